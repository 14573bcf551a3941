"""When every task takes the same known time, a run does what its option said, at every billing.

With fixed runtimes the sample measures the mean exactly and nothing is left to chance: every option
must then finish the bag within its budget (plus the cushion Theorem 1's rounding asks for) and
within one task of its planned makespan, whether the clouds bill by the hour, by the minute, per
second after a minimum, or in short ATUs, with boots or without. The two cases the property first
broke on are kept as examples, with what went wrong."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master.core.bats.policy import Choice
from bats.master.sim import driver
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

BILLINGS = [(3600.0, 0.0), (600.0, 0.0), (60.0, 0.0), (6.0, 0.0), (1.0, 0.0), (1.0, 60.0)]


def run(atu: float, min_charge: float, runtime: float, tasks: int, schedule: str, seed: int,
        clusters: dict[str, tuple[float, int, float, float]]) -> tuple[dict, float | None, float]:
    """(report, execution makespan, the slowest task of the chosen clusters) of one run."""
    config = Config(MasterConfig(), {
        name: ClusterConfig(name, "local", max=most, price=price, atu_s=atu, min_charge_s=min_charge, speed=speed,
                            options={"slowdown": 1.0, "startup": boot})
        for name, (price, most, speed, boot) in clusters.items()})
    sim = simulate(config, tasks, parse_runtimes(f"fixed:{runtime}"), seed,
                   choice=Choice(policy="bats", schedule=schedule, cushion=True))
    report, core = sim.report(), sim.core
    chosen = (report.get("selected") or {}).get("machines") or {}
    slowest = max((runtime / clusters[name][2] for name, n in chosen.items() if n), default=0.0)
    started = getattr(core, "execution_started_at", None)
    actual = None if started is None or core.last_finish_at is None else core.last_finish_at - started
    return report, actual, slowest


def keeps_its_word(report: dict, actual: float | None, slowest: float) -> None:
    assert report["status"] == "done", report["reason"]
    if report["budget"] is None:  # the sample ran the whole bag: there was nothing left to plan
        return
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9
    if report["tasks_at_plan"] < 2 * sum(report["selected"]["machines"].values()):
        return  # a task or two per machine: the hand-out may queue two on one machine (not a billing matter)
    assert actual is not None and actual <= report["selected"]["makespan_s"] + slowest + 1e-6


def test_a_6_s_atu_run_no_longer_ends_a_task_short():
    """ATU 6 s, 0.3 s boots, 320 tasks of 0.45 s, `cheapest`: the renewal check reused a release
    plan made before the machines began their last reserved ATU, so it said "renewed" and let the
    slow machines start the last two tasks, which the ceiling then cut off at the edge."""
    clusters = {"fast": (9.0, 4, 1.0, 0.3), "slow": (3.0, 4, 0.25, 0.3)}
    for schedule in ("cheapest", "fastest"):
        keeps_its_word(*run(6.0, 0.0, 0.45, 320, schedule, 1, clusters))


def test_per_second_billing_after_a_minute_prices_the_last_check():
    """Per second after 60 s, 20 s boots, 2,000 tasks of 5 s: the ceiling is checked every 5 s and
    lets a machine go when the money left does not pay until the next check plus the release
    margin, so that time at the end of a machine's run is paid but unworked; the options priced the
    work alone and `cheapest` ended one task short."""
    clusters = {"fast": (0.0025, 4, 1.0, 20.0), "slow": (0.000833, 8, 0.25, 20.0)}
    for schedule in ("cheapest", "fastest"):
        keeps_its_word(*run(1.0, 60.0, 5.0, 2000, schedule, 1, clusters))


def test_per_second_sampling_machines_are_kept_at_the_choice_not_booted_again():
    """Per second after 60 s, 60 s boots, 1,200 tasks of 60 s, `fastest` (every machine): billed by
    the second a sampling machine has no paid edge to wait for, and letting it go at the end of the
    sample threw its running task away and booted a new one in its place, which the option had not
    priced; the run then fell behind and re-planned to a quarter of the machines (2.5 times its
    makespan). It is held while the operator chooses, for as long as a boot would take, and the
    option keeps it: no machine is acquired twice, and the run ends as planned."""
    clusters = {"fast": (0.0025, 6, 1.0, 60.0), "slow": (0.0008, 6, 0.5, 60.0)}
    report, actual, slowest = run(1.0, 60.0, 60.0, 1200, "fastest", 1, clusters)
    keeps_its_word(report, actual, slowest)
    assert report["reconfigurations"] == []
    assert len(report["machines"]) == sum(report["selected"]["machines"].values())  # none booted twice
    assert actual is not None and actual >= report["selected"]["makespan_s"] - slowest


cluster = st.tuples(st.floats(0.5, 9.0).map(lambda p: round(p, 2)), st.integers(2, 6),
                    st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0]), st.sampled_from([0.0, 0.1, 0.5]))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(billing=st.sampled_from(BILLINGS), clusters=st.lists(cluster, min_size=2, max_size=3),
       share=st.floats(0.05, 0.25) | st.sampled_from([0.5, 1.0, 2.0]), tasks=st.integers(40, 300), schedule=st.sampled_from(["cheapest", "fastest"]),
       seed=st.integers(0, 2**31 - 1))
@example(billing=(1.0, 0.0), clusters=[(13.82, 1, 2.0, 0.1), (0.72, 3, 0.5, 0.5)], share=0.41, tasks=188,
         schedule="cheapest", seed=719279514)  # sampling machines let go at the choice were planned as kept
@example(billing=(6.0, 0.0), clusters=[(1.0, 2, 2.0, 0.1), (1.0, 3, 2.0, 0.5)], share=0.5, tasks=41,
         schedule="cheapest", seed=0)  # a task due to end at its machine's release was cut off by it, then stranded
@example(billing=(60.0, 0.0), clusters=[(1.0, 2, 4.0, 0.5), (2.0, 2, 1.0, 0.0)], share=0.5, tasks=40,
         schedule="cheapest", seed=0)  # the sampling machines' ATU ended while the options were shown: no boot priced
@example(billing=(6.0, 0.0), clusters=[(1.0, 2, 4.0, 0.5), (1.0, 2, 4.0, 0.5)], share=0.5, tasks=40,
         schedule="cheapest", seed=0)  # a machine let go in another's result cut off two tasks ending at that moment
def test_fixed_runtimes_end_within_budget_and_one_task_of_the_plan(billing, clusters, share, tasks, schedule, seed):
    atu, min_charge = billing
    runtime = round(max(atu, min_charge) * share, 3)
    # a boot is a share of the billing unit, at most 3 minutes (within the 10-minute boot timeout)
    named = {f"c{k}": (price * speed, most, speed, round(min(180.0, boot * max(atu, min_charge, 40.0)), 3))
             for k, (price, most, speed, boot) in enumerate(clusters)}
    keeps_its_word(*run(atu, min_charge, runtime, tasks, schedule, seed, named))


def test_a_task_cut_off_after_the_plans_machines_went_is_run_on_one_acquired_again(monkeypatch):
    """ATU 6 s, 41 tasks of 1.5 s, `cheapest` keeps one c0 machine. A sampling machine let go at
    27.5 + 1.5 = 29.0 took a task expected to end at that very moment; on a real master the
    release can come first (here: the simulator made to handle its check before the task's end,
    the order it used to have). The task came back when the plan's c0, billed by the second, had
    already gone for want of a task: the run stopped "no machines left" with 10 of its 12 unspent.
    The plan's machine is acquired again and the bag finishes, within budget."""
    monkeypatch.setattr(driver, "_ENDS_FIRST", 0)
    clusters = {"c0": (2.0, 2, 2.0, 4.0), "c1": (2.0, 3, 2.0, 20.0)}
    report, actual, slowest = run(6.0, 0.0, 3.0, 41, "cheapest", 0, clusters)
    assert report["status"] == "done", report["reason"]
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"]
    assert [m["id"] for m in report["machines"] if m["nt"] == 1] == ["c0-s1-3"]  # acquired again for the task
