"""Seed 003's instance mixes as planner clusters."""

from __future__ import annotations

from bats.master.core.planning import ga as ga
from bats.master.core.planning.planner import ClusterPlan

HOUR = 3600.0


def paper_mix(micro: int, small: int, medium: int, t_micro: float = 900.0) -> list[ClusterPlan]:
    """Seed 003 §4.1 (lines 299-301): t1.micro $0.020/h runs tasks at their runtime (NDB: 15 min
    mean, §4.2 line 310), m1.small twice as fast at $0.065/h, m1.medium three times as fast as
    m1.small at $0.130/h; hourly ATU."""
    return [ClusterPlan("t1.micro", t_micro, 0.020, HOUR, micro),
            ClusterPlan("m1.small", t_micro / 2, 0.065, HOUR, small),
            ClusterPlan("m1.medium", t_micro / 6, 0.130, HOUR, medium)]


def paper_six(on_demand: int, spot: int) -> list[ClusterPlan]:
    """The six types of §4.1 (lines 299-304): the three on-demand ones and their spot twins."""
    spots = [ClusterPlan("spot t1.micro", 900.0, 0.003, HOUR, spot),
             ClusterPlan("spot m1.small", 450.0, 0.007, HOUR, spot),
             ClusterPlan("spot m1.medium", 150.0, 0.013, HOUR, spot)]
    return paper_mix(on_demand, on_demand, on_demand) + spots
