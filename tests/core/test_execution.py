"""BaTS's execution phase keeps the plan's promise (seed 000 §3.1, the budget as a ceiling): exact
actions of the core for a short ATU with the default settings, for per-second billing with a
minimum charge, and for a task that ends shortly before the edge of a machine the budget cannot
renew; a paid task is never thrown away when it can end in paid time.

:class:`Run` drives a core by hand in virtual time: every ``Dispatch`` ends ``runtime(cluster)``
seconds later, every ``Acquire`` brings its machines up at once, every ``WakeAt`` becomes a
``Tick``, and the operator's choice, when scheduled, comes at ``choose_at``.
"""

from __future__ import annotations

import heapq
import random

import pytest
from helpers.actions import match

from bats.common.config import ClusterConfig, Config, MasterConfig, SamplingConfig
from bats.master import core as c
from bats.master.core.bats.execution import Execution
from bats.master.core.bats.policy import BatsCore, BatsSettings, Choice
from bats.master.core.events import ScheduleChosen
from bats.master.core.planning.clusters import ClusterPlan
from bats.master.core.planning.planner import Option, Planner
from bats.master.core.registry import build_core

SMALL_SAMPLE = SamplingConfig(initial_workers=1, error=0.4)  # 30 tasks: a sample of 9


class Run:
    def __init__(self, core: BatsCore, runtimes: dict[str, float], choose=None, choose_at: float | None = None):
        self.core = core
        self.runtimes = runtimes
        self.choose = choose  # core -> Option, or None: nobody chooses
        self.choose_at = choose_at
        self.log: list[tuple[c.Event, list]] = []
        self._queue: list = []
        self._n = 0
        self._made = 0

    def _push(self, t: float, kind: str, data=None) -> None:
        self._n += 1
        heapq.heappush(self._queue, (t, self._n, kind, data))

    def feed(self, event) -> list:
        actions = self.core.handle(event)
        self.log.append((event, actions))
        for a in actions:
            if isinstance(a, c.Dispatch):
                queue_end = max([t for t, _n, k, d in self._queue if k == "end" and d.machine == a.machine],
                                default=event.now)
                self._push(queue_end + self.runtimes[self.core.machines[a.machine].cluster], "end", a)
            elif isinstance(a, c.WakeAt):
                self._push(a.at, "tick")
            elif isinstance(a, c.Acquire):
                for _ in range(a.n):
                    self._made += 1
                    self._push(event.now, "up", (f"{a.cluster}{self._made}", a.cluster))
            elif isinstance(a, c.OfferOptions) and self.choose is not None:
                self._push(event.now if self.choose_at is None else self.choose_at, "choose")
        return actions

    def until(self, t_end: float = float("inf"), events: list | None = None) -> None:
        for event in events or ():
            self._push(event.now, "event", event)
        while self._queue and self.core.finished is None and self._queue[0][0] <= t_end:
            t, _n, kind, data = heapq.heappop(self._queue)
            if kind == "end":
                m = self.core.machines.get(data.machine)
                if m is not None and m.state is c.MachineState.UP and (data.task, data.attempt) in m.held:
                    self.feed(c.TaskFinished(t, data.machine, data.task, data.attempt, 0,
                                             self.runtimes[m.cluster]))
            elif kind == "tick":
                self.feed(c.Tick(t))
            elif kind == "up":
                self.feed(c.MachineAcquired(t, *data))
                self.feed(c.MachineUp(t, data[0]))
                self.feed(c.WorkerAsked(t, data[0], 1))
            elif kind == "choose":
                self.feed(ScheduleChosen(t, self.choose(self.core)))
            else:
                self.feed(data)

    def at(self, t: float, kind=None) -> list:
        """Every action answered to the events at time ``t`` (of type ``kind``), in order."""
        return [a for ev, actions in self.log if ev.now == t and (kind is None or isinstance(ev, kind))
                for a in actions]

    def killed_releases(self) -> list:
        return [a for ev, actions in self.log for a in actions if isinstance(a, c.Release) and a.reason != "bag done"]


def test_a_6_s_atu_with_the_default_settings_runs_the_chosen_option_within_budget():
    """ATU 6 s, price $1, 2.5 s tasks, no [master] settings: the monitoring interval defaults to
    5 min and the release margin to 1 s. The ceiling is not checked once per 5 min (which reserved
    50 ATUs a machine and released every machine at the choice): it decides each machine's next
    ATU at its edge less the margin, reserving one ATU. Sampling (9 tasks) ends at 22.5; a1, paid
    to 24, is marked for its edge less the margin, 23, and carried into the execution when the
    fastest option (2 x a, $10) is chosen at once. Its decision point 23 is the next check; the
    new machine a2 (acquired at 22.5) is decided at 27.5, a1 again at 29, and so on. The plan
    (about 26 s) is monitored every 5 s, a sixth of it at least the ceiling's floor: 27.5, 32.5."""
    cfg = Config(MasterConfig(), {"a": ClusterConfig("a", "local", max=2, price=1.0, atu_s=6.0)},
                 sampling=SMALL_SAMPLE)
    assert (cfg.monitor_interval_s, cfg.release_margin_s) == (300.0, 1.0)
    core = build_core(range(1, 31), cfg, random.Random(1), Choice(), max_held=1)
    run = Run(core, {"a": 2.5}, choose=lambda k: k.choose("fastest"))
    run.until(events=[c.RunStarted(0.0)])
    assert [a for a in run.at(22.5, c.TaskFinished) if not isinstance(a, (c.RecordResult, c.OfferOptions))] == [
        c.WakeAt(23.0)]
    assert run.at(22.5, ScheduleChosen) == [  # the sampling machine a1 is kept and fed
        c.Notify("executing option 2 (+20%): 2 x a, budget 10"), match(c.Dispatch, machine="a1"), c.Acquire("a", 1),
        c.WakeAt(23.0)]
    assert run.at(23.0, c.Tick) == [c.WakeAt(27.5)]
    assert run.at(27.5, c.Tick) == [c.WakeAt(29.0)]
    assert core.execution.monitor_s == 5.0
    assert run.at(29.0, c.Tick) == [c.WakeAt(32.5)]
    report = core.report(core._now)
    assert core.finished == c.Finish("done", "every task succeeded")
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] and report["cost"]["execution"] == 10.0
    assert report["killed"] == {"tasks": 0, "paid_s": 0.0} and run.killed_releases() == []


@pytest.mark.parametrize("atu_s", [60.0, 3600.0])
def test_a_short_plan_billed_per_minute_or_hourly_is_monitored_six_times_not_once_in_5_minutes(atu_s):
    """Billed per minute (margin 3 s) or by the hour (margin 60 s) the ceiling runs at the machines'
    edges, never on a clock; the monitoring (the re-plan check and the early warning) still comes a
    sixth of the chosen plan apart, as per-second billing has it: a plan of about 2 minutes is
    checked every 20 s or so, not once in the default 5 minutes, after which its money was gone."""
    cfg = Config(MasterConfig(), {"m": ClusterConfig("m", "local", max=4, price=0.01, atu_s=atu_s)},
                 sampling=SMALL_SAMPLE)
    core = build_core(range(1, 61), cfg, random.Random(1), Choice(), max_held=1)
    assert core.execution.ceiling_s == float("inf") and cfg.monitor_interval_s == 300.0
    run = Run(core, {"m": 10.0}, choose=lambda k: k.choose("fastest"))
    run.until(events=[c.RunStarted(0.0)])
    selected = core.execution.selected
    assert selected is not None and 60.0 < selected.makespan_s < 300.0
    assert core.execution.monitor_s == pytest.approx(selected.makespan_s / 6)
    assert core.finished == c.Finish("done", "every task succeeded")


def test_per_second_billing_with_a_60_s_minimum_acquires_and_checks_the_ceiling_every_5_s():
    """EC2-like billing, ``atu = 1s``, ``min_charge = 60s``, $0.01 a second, 10 s tasks, default
    settings (margin 1 s). An ATU no longer than twice the margin cannot be decided at each edge:
    the ceiling is checked every max(ATU, 5 s) = 5 s and reserves what a machine begins until
    then plus the margin, a new machine its 60 s minimum ($0.60). The operator's $2.5 pays 2
    machines, acquired at the choice (before: each had to reserve 301 s, $3.01, and none was
    acquired: the run ended with nothing spent), and the bag finishes within it."""
    cfg = Config(MasterConfig(), {"s": ClusterConfig("s", "local", max=2, price=0.01, atu_s=1.0, min_charge_s=60.0)},
                 sampling=SMALL_SAMPLE)
    core = build_core(range(1, 31), cfg, random.Random(1), Choice(), max_held=1)
    assert (core.execution.ceiling_s, core.execution.reserve_new("s")) == (5.0, 0.6)
    run = Run(core, {"s": 10.0}, choose=lambda k: k.choose("$2.5"))
    run.until(events=[c.RunStarted(0.0)])
    assert run.at(90.0, ScheduleChosen) == [c.Notify("executing budget: 2 x s, budget 2.5"), c.Acquire("s", 2),
                                            c.WakeAt(95.0)]
    assert run.at(95.0, c.Tick) == [c.WakeAt(100.0)]
    assert run.at(100.0, c.Tick) == [c.WakeAt(105.0)]
    report = core.report(core._now)
    assert core.finished == c.Finish("done", "every task succeeded")
    # the 21 tasks left take 11 rounds of 10 s on 2 machines (110 s); the plan pays each machine's
    # last check and release margin too (6 s), so the monitor finds it on time to the end (before,
    # the plan had no room for them, and a check at 163.3 s let one machine go for the last 5
    # tasks: $2.14, later); the machine with no 21st task to take is let go as soon as it asks
    assert report["reconfigurations"] == []
    assert report["cost"]["execution"] == 2.1 and report["cost"]["execution"] <= report["budget"]


def test_a_task_ending_9_s_before_the_edge_of_a_machine_the_budget_cannot_renew_is_not_killed():
    """ATU 100 s, margin 12 s, 10.5 s tasks; the operator takes 2 s to choose (sampling ends at
    94.5, a1 waits, marked for its edge less a tenth of the margin, 98.8, and is kept by a $3 plan
    at 96.5). a1's tasks start at 96.5 + 10.5 k; the one handed out at 180.5 (expected to end at
    191, past 200 - 12) is handed out because the budget then renews a1. At 182 the price goes to
    $5: a1's next ATU no longer fits the $2 left, so a1 is marked for 188, with that task running
    (7.5 s). It ends at 191, 9 s before the edge, inside the paid time: it is not killed at 188 but
    let run, a wake-up set at 198.8 (the edge less a tenth of the margin, the time a release takes),
    and a1 is released as it ends (before: killed at 188, its 7.5 paid seconds thrown away)."""
    one = {"a": ClusterConfig("a", "local", max=1, price=1.0, atu_s=100.0)}
    settings_ = BatsSettings(sampling=SMALL_SAMPLE, monitor_interval_s=50.0, release_margin_s=12.0)
    core = BatsCore(range(1, 31), one, random.Random(1), settings_, max_held=1)
    plan = Option(0, "budget", {"a": 1}, 220.0, 3, 3.0, 0.0, 3.0, 0, "", True)
    run = Run(core, {"a": 10.5}, choose=lambda k: plan, choose_at=96.5)
    run.until(181.0, events=[c.RunStarted(0.0)])
    run.until(200.0, events=[c.PriceChanged(182.0, "a", 5.0)])
    budget = "the budget cannot pay its next ATU"
    assert run.at(182.0) == [c.WakeAt(188.0)]
    (dispatch,) = [a for a in run.at(180.5) if isinstance(a, c.Dispatch)]
    assert dispatch.machine == "a1" and core.machines["a1"].release_at == 188.0
    assert run.at(188.0) == [c.WakeAt(198.8), c.WakeAt(196.5)]  # held (its task may end in paid time); the next check
    finished = run.at(191.0)
    assert [type(a) for a in finished] == [c.RecordResult, c.Release, c.Finish]
    assert finished[1] == c.Release("a1", budget)
    assert finished[2].status == "incomplete" and finished[2].reason.startswith("the budget is spent: 1 of 3 paid")
    assert core.report(191.0)["killed"] == {"tasks": 0, "paid_s": 0.0}
    assert core.spent(191.0) - core.sampling_cost <= 3.0


def test_a_milp_stopped_at_its_time_limit_with_a_feasible_plan_uses_that_plan(monkeypatch):
    """scipy's milp answers status 1 when it reaches its time limit; with a feasible point found,
    that point is a plan (within the gap), not "the deadline cannot be met". Without a point,
    nothing is known and no plan is made up."""
    import scipy.optimize

    from bats.master.core.deadline import ilp

    clusters = [ilp.DeadlineCluster("a", 600.0, 1.0, 3600.0, 4)]
    exact = ilp.cheapest_plan(clusters, 20, 4 * 3600.0)
    assert exact is not None

    def stopped_at_the_limit(*args, **kwargs):
        res = scipy.optimize.milp(*args, **kwargs)
        res.status = 1  # as if the time limit had been reached after finding this point
        return res

    monkeypatch.setattr(ilp, "milp", stopped_at_the_limit)
    assert ilp.cheapest_plan(clusters, 20, 4 * 3600.0) == exact
    assert ilp.feasible(clusters, 20, 4 * 3600.0)

    def stopped_with_nothing(*args, **kwargs):
        res = scipy.optimize.milp(*args, **kwargs)
        res.status, res.x = 1, None
        return res

    monkeypatch.setattr(ilp, "milp", stopped_with_nothing)
    assert ilp.cheapest_plan(clusters, 20, 4 * 3600.0) is None


def test_a_long_deadline_whose_program_runs_out_of_solver_time_is_planned_not_refused(monkeypatch):
    """A 114 h deadline is a large program (684 ten-minute intervals): when the solver stops at its
    time limit with no point, the deadline is not "cannot be met" (feasibility only grows with the
    horizon, and the bag can be done in under 2 h): the search for the earliest finish starts from
    one interval, and a plan on a shorter horizon, which meets the deadline too, is used."""
    from bats.master.core.deadline import ilp
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes

    real = ilp.milp

    def times_out_on_long_horizons(c, *args, **kwargs):
        res = real(c, *args, **kwargs)
        if len(c) > 400:  # the long horizon's program: as if the time limit came first
            res.status, res.x = 1, None
        return res

    monkeypatch.setattr(ilp, "milp", times_out_on_long_horizons)
    sim = simulate(two_clouds(), 200, parse_runtimes("normal:8m,1m"), 1,
                   choice=Choice(policy="deadline", deadline=114 * 3600.0))
    report = sim.report()
    assert report["status"] == "done", report["reason"]
    assert report["deadline"]["met"] is True and report["makespan_s"] <= 114 * 3600.0


def test_a_deadline_the_solver_cannot_decide_in_its_time_limit_is_not_called_impossible(monkeypatch):
    """Every program up to the deadline's horizon stops at the time limit with no point: the
    deadline is not proven infeasible, so the run does not say it "cannot be met"."""
    from bats.master.core.deadline import ilp
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes

    deadline = 10 * 3600.0
    probe = [ilp.DeadlineCluster(name, 480.0, 1.0, 600.0, 8) for name in ("slow", "fast")]
    limit = ilp._build(probe, deadline, ilp.DEFAULT_INTERVAL_S, None, 1.0).n_vars
    real = ilp.milp

    def times_out_up_to_the_deadline(c, *args, **kwargs):
        res = real(c, *args, **kwargs)
        if len(c) <= limit:
            res.status, res.x = 1, None
        return res

    monkeypatch.setattr(ilp, "milp", times_out_up_to_the_deadline)
    sim = simulate(two_clouds(), 200, parse_runtimes("normal:8m,1m"), 1,
                   choice=Choice(policy="deadline", deadline=deadline))
    report = sim.report()
    assert report["status"] == "incomplete"
    assert "could not prove there is none" in report["reason"] and "cannot be met" not in report["reason"]


def two_clouds() -> Config:
    """The issue's example: ATU 10 min, slow ($1, speed 1) and fast ($3, speed 4), 8 machines each."""
    return Config(MasterConfig(), {
        "slow": ClusterConfig("slow", "local", max=8, price=1.0, atu_s=600.0, speed=1.0),
        "fast": ClusterConfig("fast", "local", max=8, price=3.0, atu_s=600.0, speed=4.0)})


def test_the_fastest_option_with_the_cushion_finishes_the_bag_it_used_to_leave_incomplete():
    """300 tasks normal:8m,1m, --schedule fastest --cushion yes, seed 3: before, task 21 was killed
    9 s before it ended, 30 s before its machine's paid edge, and the run left 2 tasks."""
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes
    from bats.master.views.report import add_analysis

    sim = simulate(two_clouds(), 300, parse_runtimes("normal:8m,1m"), 3,
                   choice=Choice(policy="bats", schedule="fastest", cushion=True))
    report = sim.report()
    assert report["status"] == "done" and report["tasks"]["done"] == 300
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"]
    add_analysis(report, sim.core.execution_started_at, sim.core.last_finish_at)
    assert report["predicted_vs_actual"]["execution"]["makespan_s"]["actual"] > 0


def test_an_up_front_budget_with_the_cushion_is_never_exceeded():
    """--budget A --cushion yes: the cushion comes out of A (before: added on top, up to +15.8 %)."""
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes

    for amount in (150.0, 300.0):
        sim = simulate(two_clouds(), 300, parse_runtimes("normal:8m,1m"), 3,
                       choice=Choice(policy="bats", budget=amount, cushion=True))
        report = sim.report()
        assert report["cushion"] == 0.0 and report["cost"]["total"] <= amount


def test_the_cushion_makes_room_for_the_estimate_error_at_99_percent_counting_each_runtime_once():
    """Each cluster's mean at the upper end of its 99 % interval, n the runtimes seen on it (the
    sample's among them, not counted twice), and every option's budget + cushion pays its
    configuration at those means."""
    import math
    from statistics import NormalDist

    from bats.master.core.planning.planner import NO_CUSHION
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes

    sim = simulate(two_clouds(), 300, parse_runtimes("levy:12m,45m"), 5,
                   choice=Choice(policy="bats", plan_only=True))
    core = sim.core
    assert isinstance(core, BatsCore) and core.options and core.settings.error_confidence == 0.99
    z = NormalDist().inv_cdf(0.995)
    upper = core._upper_means(core._now)
    for name, estimate in core.estimates.items():
        stats = core._stats(name, core._now)
        assert stats.n_done >= len(estimate.sample) > 0
        assert upper[name] == pytest.approx(stats.mean_s + z * stats.sd_s / math.sqrt(stats.n_done))
    priced = core._planner(core.remaining, upper)
    for option in core.options:
        if option.label.endswith(NO_CUSHION) and not option.cushion:
            continue  # what an option runs with its cushion declined: no room, by the operator's choice
        assert option.budget + option.cushion >= priced.estimate(option.machines).cost - 1e-9


def test_a_levy_bag_that_a_sample_underestimates_still_finishes_on_the_cheapest_option():
    """A pool of the execution study (pool 124: two clusters, 10-minute ATUs, 2,464 Lévy tasks):
    the sample put the cheap cluster's mean 24 % low, and `cheapest --cushion yes` ended with 159
    tasks left and the money gone while the cushion counted the sample twice and stood at 95 %."""
    from bats.master.sim.driver import simulate
    from bats.master.sim.runtimes import parse_runtimes

    config = Config(MasterConfig(), {
        "c0": ClusterConfig("c0", "local", max=11, price=0.0838, atu_s=600.0, speed=7.05,
                            options={"slowdown": 1.0, "startup": 90.0}),
        "c1": ClusterConfig("c1", "local", max=11, price=0.0398, atu_s=600.0, speed=3.84,
                            options={"slowdown": 1.0, "startup": 90.0})})
    sim = simulate(config, 2464, parse_runtimes("levy:12m,45m"), 1673950158,
                   choice=Choice(policy="bats", schedule="cheapest", cushion=True))
    report = sim.report()
    assert report["status"] == "done" and report["tasks"]["done"] == 2464
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9


def test_a_re_plan_billed_by_the_second_does_not_price_again_the_boots_of_the_machines_up():
    # 200 tasks of 30 s at 0.001/s: 6.0 of work. Priced a 90 s boot and a 60 s minimum on every
    # machine, 8.0 pays 22 machines; a re-plan's machines up have booted, and the same money keeps
    # every one of the 40 (what a machine it adds costs on top is _need's). The hourly cluster's plan
    # never priced a boot and is left as it is.
    fine = ClusterPlan("s", mean_s=30.0, price=0.001, atu_s=1.0, max=40, min_charge_s=60.0, boot_s=90.0)
    hourly = ClusterPlan("h", mean_s=30.0, price=20.0, atu_s=3600.0, max=3, boot_s=90.0)
    planner = Planner([fine, hourly], 200)
    booted = Execution._booted(planner)
    assert planner.fastest_within(8.0) == {"s": 22, "h": 0}
    assert booted.fastest_within(8.0) == {"s": 40, "h": 0}
    assert booted.cluster("h") == hourly
    assert booted.cluster("s") == ClusterPlan("s", mean_s=30.0, price=0.001, atu_s=1.0, max=40)
    assert planner.estimate({"s": 10}).cost == pytest.approx(6.9) and booted.estimate({"s": 10}).cost == pytest.approx(6.0)
    hourly_only = Planner([hourly], 200)
    assert Execution._booted(hourly_only) is hourly_only
