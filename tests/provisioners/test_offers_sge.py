"""provisioners/sge_offers.py and qstat.py: an SGE queue's offers (seed 002 §III-A) from recorded ``qstat`` output."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from bats.master.core.offers.compose import Offer
from bats.provisioners.qstat import QstatError, array_count, free_slots_from_gc, parse_h_rt
from bats.provisioners.sge_offers import offers_from_qstat, queue_jobs

DATA = Path(__file__).resolve().parents[1] / "data"
NOW = datetime(2026, 11, 22, 11, 10, 0)


def busy() -> str:
    return (DATA / "qstat_busy.xml").read_text()


def test_jobs_of_a_busy_queue():
    running, pending = queue_jobs(busy(), NOW)
    assert [(j.tag, j.slots, j.runtime_s) for j in running] == [("sge-101", 4, 3000.0), ("sge-103", 2, 1200.0)]
    # the held job 105 is left out; the array job counts its four tasks; deadlines = submission + h_rt
    assert [(j.tag, j.slots, j.count, j.deadline_s) for j in pending] == [("sge-102", 8, 1, -300.0),
                                                                           ("sge-104", 1, 4, 0.0)]


def test_offers_of_a_busy_queue_by_edf():
    """8 slots, 2 free. EDF: the overdue 8-slot job 102 cannot start before every slot is free;
    the array job 104 (due now) takes the 2 free slots twice (0-600, 600-1200); from 1200 (job 103
    and 104 done) the bag runs 4 at a time until job 101 ends at 3000."""
    offers = offers_from_qstat(busy(), free_slots=2, now=NOW, tasks=10, task_runtime_s=600.0, deadline_s=1500.0)
    assert [(o.tasks, round(o.completion)) for o in offers] == [(10, 3000), (7, 2400), (2, 1800)]
    assert all(o.pool == "sge" for o in offers)
    met = offers_from_qstat(busy(), free_slots=2, now=NOW, tasks=10, task_runtime_s=600.0, deadline_s=7200.0,
                            pool="cluster-a")
    assert met == [Offer("cluster-a", 10, 7200.0)]  # every size meets the deadline: one offer, the largest


def test_offers_of_an_idle_queue_and_of_no_slots():
    idle = (DATA / "qstat_idle.xml").read_text()
    offers = offers_from_qstat(idle, free_slots=4, now=NOW, tasks=10, task_runtime_s=600.0, deadline_s=1200.0)
    assert offers == [Offer("sge", 10, 1800.0), Offer("sge", 7, 1200.0)]
    assert offers_from_qstat(idle, free_slots=0, now=NOW, tasks=10, task_runtime_s=600.0, deadline_s=1200.0) == []


def test_free_slots_and_small_parsers():
    text = (DATA / "qstat_gc.txt").read_text()
    assert free_slots_from_gc(text) == 6 and free_slots_from_gc(text, "all.q") == 2
    with pytest.raises(QstatError, match="no queue 'gpu.q'"):
        free_slots_from_gc(text, "gpu.q")
    assert parse_h_rt("3600") == 3600 and parse_h_rt("1:30:00") == 5400 and parse_h_rt("90:00") == 5400
    assert array_count("1-10:2") == 5 and array_count("7") == 1 and array_count("3,5-6") == 3
    with pytest.raises(QstatError, match="qstat -xml printed no valid XML"):
        queue_jobs("<job_info>", NOW)
    with pytest.raises(QstatError, match="h_rt"):
        parse_h_rt("soon")
