"""Seed 001's adaptive host heuristic (master/core/adaptive/policy.py): exact actions, the paper's
behaviour on its 256-task workloads, properties in the simulator, config and flags."""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from pathlib import Path

import pytest
from helpers.cores import Driver
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.common.config import (
    AdaptiveConfig,
    ClusterConfig,
    Config,
    ConfigError,
    MasterConfig,
    PolicyConfig,
    load_config,
)
from bats.master import core as c
from bats.master.cli.sim import main as sim_main
from bats.master.core.actions import WakeAt
from bats.master.core.adaptive.policy import END_OF_UNIT, AdaptiveCore, AdaptiveSettings
from bats.master.core.bats.policy import Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes
from bats.provisioners import options_of

ROOT = Path(__file__).resolve().parents[2]


def one_cluster(max_: int = 3) -> dict[str, ClusterConfig]:
    return {"a": ClusterConfig("a", "local", max=max_, price=1.0, atu_s=100.0)}


def make_core(tasks: int = 30, max_: int = 3, ratio: float = 0.5, increase: float = 0.5,
              hpt: float | None = None, **kwargs) -> AdaptiveCore:
    """One cluster, ATU 100 s, release margin 10 s, the periodic look every 50 s."""
    return AdaptiveCore(range(1, tasks + 1), one_cluster(max_), random.Random(1),
                        AdaptiveSettings("a", ratio, increase, hpt, 10.0, 50.0), max_held=1, **kwargs)


# ---------------------------------------------------------------- exact actions
def test_one_host_first_then_the_formula_damped_by_the_creation_ratio():
    """30 tasks of 10 s. The first host is let go at its ATU edge (100) less the margin. At t=10 the
    average is 10 s; a1 can do floor((90 - 10) / 10) = 8 more, so 29 - 8 = 21 tasks are left over:
    round(21 x 10 / 100) = 2 hosts needed, int(2 x 0.5) + 1 = 2 created; the ratio goes to 0.75."""
    core = make_core()
    d = Driver(core, {"a": 10.0})
    assert d.feed(c.RunStarted(0.0)) == [c.Acquire("a", 1), WakeAt(50.0)]
    assert d.feed(c.MachineAcquired(0.0, "a1", "a")) == [WakeAt(90.0)]
    assert d.feed(c.MachineUp(0.0, "a1")) == []
    (first,) = d.feed(c.WorkerAsked(0.0, "a1", 1))
    event, actions = d.step()
    assert event.now == 10.0
    assert actions == [c.RecordResult(first.task, "done", "a1", 1, 0, 10.0, False, b"", b""),
                       c.Acquire("a", 2), actions[-1]] and isinstance(actions[-1], c.Dispatch)
    assert core.creation_ratio == 0.75 and core.creations[0]["necessary"] == 2
    # the two new hosts: ends at 10 + 90 = 100; with 3 hosts (the cluster's max) nothing more is created
    for m in ("a2", "a3"):
        assert d.feed(c.MachineAcquired(10.0, m, "a")) == [WakeAt(100.0)]
    for m in ("a2", "a3"):
        d.feed(c.MachineUp(10.0, m))
        d.feed(c.WorkerAsked(10.0, m, 1))
    assert core.machines["a1"].release_at == 90.0
    _event, actions = d.step()  # a1 at t=20: 8 + 9 + 9 = 26 possible, 28 left: one more wanted, none room
    assert not [a for a in actions if isinstance(a, c.Acquire)]


def run_by_hand(core: AdaptiveCore, runtime: float = 10.0) -> tuple[Driver, float]:
    """Drive ``core`` to the end: machines boot at once, ticks every 10 s."""
    d = Driver(core, {"a": runtime})
    acquired = 0
    now = 0.0

    def carry(actions) -> None:
        nonlocal acquired
        for a in actions:
            if isinstance(a, c.Acquire):
                for _ in range(a.n):
                    acquired += 1
                    m = f"a{acquired}"
                    carry(d.feed(c.MachineAcquired(now, m, "a")))
                    carry(d.feed(c.MachineUp(now, m)))
                    carry(d.feed(c.WorkerAsked(now, m, 1)))

    carry(d.feed(c.RunStarted(0.0)))
    while core.finished is None:
        nxt = d.next_time()
        tick = (math.floor(now / 10.0) + 1) * 10.0
        if nxt is not None and nxt <= tick:
            event, actions = d.step()
            now = event.now
        else:
            now = tick
            actions = d.feed(c.Tick(tick))
        carry(actions)
    return d, now


def test_hosts_go_just_before_their_unit_ends_or_are_kept_for_another_one():
    """45 tasks of 10 s on at most 3 hosts: three hosts do about 26 tasks in their first unit;
    the tasks left over keep some of them for a second unit instead of new hosts."""
    core = make_core(tasks=45)
    d, now = run_by_hand(core)
    report = core.report(now)
    assert core.finished.status == "done" and report["tasks"]["done"] == 45
    assert report["adaptive"]["hosts"] == 3 and report["adaptive"]["renewals"] >= 1
    for m in core.machines.values():
        atus = report["machines"][list(core.machines).index(m.id)]["atus"]
        # never into a unit it was not kept for: up at most (units x ATU) - margin, or until the bag was done
        assert m.uptime(now) <= atus * 100.0 - 10.0 + 1e-9 or m.release_reason == "bag done"
    assert {m.release_reason for m in core.machines.values()} <= {END_OF_UNIT, "bag done"}


def test_a_lone_host_is_kept_unit_after_unit_while_tasks_are_left():
    """20 tasks of 10 s, one host at most: it runs 9 tasks by t=90 (its end: the edge less the
    margin), 11 are left that nobody else can do, so it is kept for a second unit (to t=190), and
    at t=190, one task left, for a third; the bag is done at t=200: two ATUs paid."""
    core = make_core(tasks=20, max_=1)
    _d, now = run_by_hand(core)
    assert core.finished.status == "done" and core.renewals == 2 and now == 200.0
    (m,) = core.machines.values()
    assert m.release_reason == "bag done" and core.report(now)["cost"]["total"] == 2.0


def test_periodic_look_raises_the_average_while_the_first_task_runs_long():
    """Fig. 3b: nothing has finished at t=50, the running task has taken 50 s: the average becomes
    50 s and hosts are created from it (before any result)."""
    core = make_core(tasks=40, max_=10)
    d = Driver(core, {"a": 400.0})
    d.feed(c.RunStarted(0.0))
    for event in (c.MachineAcquired(0.0, "a1", "a"), c.MachineUp(0.0, "a1"), c.WorkerAsked(0.0, "a1", 1)):
        d.feed(event)
    actions = d.feed(c.Tick(50.0))
    assert actions[0] == WakeAt(100.0)
    (acquire,) = [a for a in actions if isinstance(a, c.Acquire)]
    # a1 can do floor((90 - 0) / 50) = 1 task: 39 left over need round(39 x 50 / 100) = 20 hosts,
    # int(20 x 0.5) + 1 = 11, capped by the 9 the cluster still has
    assert acquire == c.Acquire("a", 9) and core.average == 50.0


# ---------------------------------------------------------------- the paper's behaviour (seed 001 §5)
def ec2(ratio: float, increase: float, max_: int = 100, max_machines: int | None = None) -> Config:
    return Config(MasterConfig(max_machines=max_machines),
                  {"ec2": ClusterConfig("ec2", "local", max=max_, price=0.1, atu_s=3600.0)},
                  policy=PolicyConfig(adaptive=AdaptiveConfig(ratio, increase)))


def paper_runs(ratio: float, increase: float, seeds: int = 10) -> tuple[list[int], list[float], list[float]]:
    hosts, speedups, optimal = [], [], []
    for seed in range(seeds):
        report = simulate(ec2(ratio, increase), 256, parse_runtimes("normal:150s,30s"), seed,
                          choice=Choice(policy="adaptive")).report()
        assert report["status"] == "done"
        work = sum(m["rt_s"] for m in report["machines"])
        hosts.append(report["adaptive"]["hosts"])
        speedups.append(work / report["makespan_s"])
        optimal.append(math.ceil(work / 3600.0))
    return hosts, speedups, optimal


def test_conservative_uses_fewer_hosts_than_aggressive_and_speedup_is_close_to_the_hosts():
    """256 tasks, normal (mean 150 s, sd 30 s), one-hour units, 10 bags each: the conservative
    behaviour (0.5/0.5) allocates no more hosts than the aggressive one (0.75/0.75), both stay
    within about 12 % of the optimal number (the work in host-hours, rounded up), and the speedup
    is close to the number of hosts ("13 hosts had speedups between 11 and 12")."""
    conservative = paper_runs(0.5, 0.5)
    aggressive = paper_runs(0.75, 0.75)
    assert statistics.mean(conservative[0]) <= statistics.mean(aggressive[0])
    for hosts, speedups, optimal in (conservative, aggressive):
        assert statistics.mean(hosts) <= 1.15 * statistics.mean(optimal)
        assert statistics.mean(s / h for s, h in zip(speedups, hosts)) >= 0.85


# ---------------------------------------------------------------- properties
@settings(max_examples=25, deadline=None)
@given(tasks=st.integers(1, 300), max_=st.integers(1, 30), cap=st.one_of(st.none(), st.integers(1, 20)),
       ratio=st.sampled_from([0.0, 0.5, 0.75, 1.0]), increase=st.sampled_from([0.0, 0.5, 0.75, 1.0]),
       spec=st.sampled_from(["normal:150s,30s", "fixed:20m", "levy:2m,20m", "fixed:90m", "mdb"]),
       seed=st.integers(0, 2**31))
def test_property_never_more_hosts_than_allowed_and_every_task_once(tasks, max_, cap, ratio, increase, spec, seed):
    sim = simulate(ec2(ratio, increase, max_, cap), tasks, parse_runtimes(spec), seed, choice=Choice(policy="adaptive"))
    report = sim.report()
    assert report["status"] == "done" and sim.duplicates == 0 and sim.recorded == tasks
    spans = sorted((m.acquired_at, 1) for m in sim.core.machines.values())
    spans += sorted((m.released_at if m.released_at is not None else sim.now, -1) for m in sim.core.machines.values())
    live = peak = 0
    for _t, step in sorted(spans, key=lambda e: (e[0], e[1])):
        live += step
        peak = max(peak, live)
    assert peak <= min(max_, cap if cap is not None else max_)


# ---------------------------------------------------------------- config and flags
def test_policy_adaptive_table(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[policy.adaptive]\ncreation_ratio = 0.75\nincrease_ratio = 0.75\nhost_processing_time = "30m"\n'
                    'cluster = "b"\n[clusters.a]\nprovisioner = "local"\nmax = 2\n'
                    '[clusters.b]\nprovisioner = "local"\nmax = 4\nprice = 1.0\n')
    config = load_config(path, options_of)
    assert config.policy.adaptive == AdaptiveConfig(0.75, 0.75, 1800.0, "b")
    assert AdaptiveSettings.from_config(config).cluster == "b"
    path.write_text('[clusters.a]\nprovisioner = "local"\nmax = 2\nprice = 2.0\n'
                    '[clusters.b]\nprovisioner = "local"\nmax = 4\nprice = 1.0\n')
    assert AdaptiveSettings.from_config(load_config(path, options_of)).cluster == "b"  # the cheapest


@pytest.mark.parametrize("table, message", [
    ("[policy.adaptive]\ncreation_ratio = 2\n", "[policy.adaptive] creation_ratio: expected a number from 0 to 1, got 2"),
    ("[policy.adaptive]\nincrease = 0.5\n", "[policy.adaptive] increase: unknown key"),
    ("[policy.adaptive]\ncluster = \"x\"\n", "[policy.adaptive] cluster: no cluster 'x' (clusters: a)"),
    ("[policy.adaptive]\nhost_processing_time = \"0s\"\n", "[policy.adaptive] host_processing_time: must be longer"),
    ("[policy.deadline]\ninterval = \"soon\"\n", "[policy.deadline] interval: expected a duration"),
    ("[policy.other]\nx = 1\n", "[policy.other]: unknown policy table"),
])
def test_policy_table_errors_name_file_and_key(tmp_path, table, message):
    path = tmp_path / "c.toml"
    path.write_text(table + '[clusters.a]\nprovisioner = "local"\nmax = 2\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, options_of)
    assert re.match(rf"{re.escape(str(path))}:\d+: {re.escape(message)}", str(info.value)) and "\n" not in str(info.value)


def test_sim_command_line(tmp_path, capsys):
    report = tmp_path / "r.json"
    assert sim_main(["--workers", "4", "--tasks", "50", "--runtimes", "fixed:60", "--seed", "3", "--policy", "adaptive",
                     "--report", str(report), "-q"]) == 0
    data = json.loads(report.read_text())
    assert data["policy"] == "adaptive" and data["adaptive"]["peak_hosts"] <= 4
    assert sim_main(["--workers", "4", "--tasks", "5", "--runtimes", "fixed:60", "--policy", "adaptive",
                     "--budget", "3"]) == 2
    assert "--policy adaptive" in capsys.readouterr().err
