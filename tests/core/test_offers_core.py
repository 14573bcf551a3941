"""--policy offers (seed 002): EDF offer generation, the metascheduler core's exact actions, the
property that no pool gets more than it offered and every task is assigned once, and bats-sim
with background traces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.common.config import ClusterConfig, ConfigError, load_config
from bats.master import core as c
from bats.master.cli.sim import main as sim_main
from bats.master.core.actions import AskOffers, Notify
from bats.master.core.bats.settings import Choice
from bats.master.core.events import OffersMade
from bats.master.core.offers.compose import Offer
from bats.master.core.offers.generate import EdfPool, PoolJob, background_job, generate_offers, pool_at, sizes_of
from bats.master.core.offers.policy import SHARE_DONE, OffersCore, OffersSettings
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes
from bats.provisioners import options_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "examples" / "offers.toml"


# ---------------------------------------------------------------- offer generation (§III-A)
def test_sizes_are_the_papers_percentages():
    assert sizes_of(1000) == [1000, 750, 500, 250, 100]
    assert sizes_of(8) == [8, 6, 4, 2, 1] and sizes_of(1) == [1]


def test_offers_of_a_full_pool_merge_equal_completions():
    """4 slots busy until 100: k tasks of 10 s end at 100 + 10 * ceil(k / 4)."""
    pool = pool_at(4, [background_job(0, 4, 100)], 0.0)
    assert generate_offers("p", pool, 8, 10.0, 50.0) == [Offer("p", 8, 120.0), Offer("p", 4, 110.0)]
    assert pool.free == 0 and pool.next_event() == 100.0  # asking changed nothing


def test_edf_puts_the_bag_before_a_later_due_job_and_after_an_earlier_one():
    pool = pool_at(2, [background_job(0, 2, 30), background_job(0, 2, 100)], 0.0)  # the second waits, due 100
    assert generate_offers("p", pool, 2, 10.0, 50.0) == [Offer("p", 2, 50.0)]  # runs 30-40: met
    assert generate_offers("p", pool, 2, 10.0, 135.0) == [Offer("p", 2, 140.0)]  # due after it: 130-140
    assert generate_offers("p", pool, 2, 10.0, 200.0) == [Offer("p", 2, 200.0)]


def test_jobs_still_to_come_are_not_known_to_the_offer():
    pool = pool_at(2, [background_job(0, 2, 30), background_job(20, 2, 100)], 0.0)
    assert generate_offers("p", pool, 2, 10.0, 35.0) == [Offer("p", 2, 40.0)]
    pool.advance(25.0)  # now the second job is known (due 120, after the bag's 60)
    assert generate_offers("p", pool, 2, 10.0, 35.0) == [Offer("p", 2, 35.0)]


def test_a_released_machine_frees_its_slot_and_a_waiting_one_starts():
    pool = EdfPool(1)
    pool.submit(background_job(0, 1, 50))
    pool.submit(PoolJob(0, 1, float("inf"), 10.0, 1, "m1"))
    assert pool.started == [(0.0, "")] and pool.waiting("m1") == 1
    pool.advance(50.0)
    assert pool.started[-1] == (50.0, "m1") and pool.next_event() is None
    assert pool.release("m1") and pool.free == 1


# ---------------------------------------------------------------- the core, exact actions
def two_pools() -> dict[str, ClusterConfig]:
    return {"a": ClusterConfig("a", "local", max=2), "b": ClusterConfig("b", "local", max=1)}


def make_core(tasks: int = 6, capacity: bool = False) -> OffersCore:
    return OffersCore(range(1, tasks + 1), two_pools(), random.Random(1), OffersSettings(100.0, 10.0, capacity),
                      max_held=1)


def test_ask_compose_assign_then_each_machine_runs_its_own_clusters_tasks_only():
    core = make_core()
    assert core.handle(c.RunStarted(0.0)) == [AskOffers(6, 10.0, 100.0)]
    actions = core.handle(OffersMade(1.0, (Offer("a", 4, 99.0), Offer("a", 6, 150.0), Offer("b", 2, 99.0))))
    assert actions == [Notify(core.describe()), c.Acquire("a", 2), c.Acquire("b", 1)]
    assert core.composite is not None and core.composite.policy == "OffersWithPLB"
    assert core.composite.assigned == {"a": 4, "b": 2}
    share_b = sorted(t for t, pool in core._owner.items() if pool == "b")
    assert len(share_b) == 2 and sorted(core._owner) == [1, 2, 3, 4, 5, 6]
    assert core.handle(c.MachineAcquired(1.0, "b-1", "b")) == []
    assert core.handle(c.MachineUp(2.0, "b-1")) == []
    [first] = core.handle(c.WorkerAsked(2.0, "b-1", 1))
    assert isinstance(first, c.Dispatch) and first.task in share_b
    actions = core.handle(c.TaskFinished(12.0, "b-1", first.task, 1, 0, 10.0))
    second = (set(share_b) - {first.task}).pop()
    assert actions == [c.RecordResult(first.task, "done", "b-1", 1, 0, 10.0, False, b"", b""),
                       c.Dispatch("b-1", second, 1)]
    actions = core.handle(c.TaskFinished(22.0, "b-1", second, 1, 0, 10.0))
    assert actions == [c.RecordResult(second, "done", "b-1", 1, 0, 10.0, False, b"", b""),
                       c.Release("b-1", SHARE_DONE)]
    report = core.report(22.0)
    assert report["policy"] == "offers" and report["offers"]["composite"]["assigned"] == {"a": 4, "b": 2}


def test_a_lost_machines_task_goes_back_to_its_own_cluster():
    core = make_core()
    core.handle(c.RunStarted(0.0))
    core.handle(OffersMade(0.0, (Offer("a", 4, 50.0), Offer("b", 2, 50.0))))
    core.handle(c.MachineAcquired(0.0, "b-1", "b"))
    core.handle(c.MachineUp(0.0, "b-1"))
    [d] = core.handle(c.WorkerAsked(0.0, "b-1", 1))
    assert core.handle(c.MachineLost(5.0, "b-1", "gone")) == [c.Acquire("b", 1)]
    assert d.task in core._share["b"] and d.task not in core._share["a"]


def test_dplb_when_pools_publish_capacity_and_one_line_when_nothing_covers_the_bag():
    core = make_core(capacity=True)
    core.handle(c.RunStarted(0.0))
    core.handle(OffersMade(0.0, (Offer("a", 5, 50.0), Offer("b", 5, 50.0))))  # capacities 2 and 1
    assert core.composite.policy == "OffersWithDPLB" and core.composite.assigned == {"a": 4, "b": 2}
    core = make_core()
    core.handle(c.RunStarted(0.0))
    [finish] = core.handle(OffersMade(0.0, (Offer("a", 2, 50.0), Offer("zzz", 9, 1.0))))
    assert finish.status == "incomplete" and "no composition of the pools' offers covers the 6 tasks" in finish.reason
    assert "\n" not in finish.reason


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), deadline=st.integers(1, 100), capacity=st.booleans(),
       offers=st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 50), st.integers(1, 200)), max_size=8))
def test_no_pool_gets_more_than_it_offered_and_every_task_is_assigned_once(n, deadline, capacity, offers):
    core = OffersCore(range(1, n + 1), two_pools(), random.Random(n), OffersSettings(deadline, 1.0, capacity))
    core.handle(c.RunStarted(0.0))
    made = tuple(Offer(p, k, float(t)) for p, k, t in offers)
    core.handle(OffersMade(0.0, made))
    if core.composite is None:
        assert core.finished is not None and core.finished.status == "incomplete"
        return
    for pool, k in core.composite.assigned.items():
        assert k <= max(o.tasks for o in made if o.pool == pool)
    shares = [t for name in ("a", "b") for t in core._share[name]]
    assert sorted(shares) == list(range(1, n + 1))
    assert {name: len(core._share[name]) for name in core.composite.assigned} == core.composite.assigned


# ---------------------------------------------------------------- bats-sim with background traces
def run_example(tasks: int = 300, deadline: float = 7200.0, seed: int = 1):
    config = load_config(EXAMPLE, options_of)
    return simulate(config, tasks, parse_runtimes("normal:15m,134s"), seed,
                    choice=Choice(policy="offers", deadline=deadline))


def test_sim_with_a_background_trace_runs_each_share_on_its_pool():
    sim = run_example()
    report = sim.report()
    info = report["offers"]
    assert report["status"] == "done" and sim.duplicates == 0
    assert info["composite"]["policy"] == "OffersNoLB"  # the busy pool cannot take its part by 2h
    assert info["task_runs_by_cluster"] == info["composite"]["assigned"]
    busy = [m for m in sim.core.machines.values() if m.cluster == "busy"]
    # 28 of the 32 slots are taken at the start: 4 machines start at once, the rest wait for slots
    assert sum(1 for m in busy if m.up_at == 0.0) == 4 and max(m.up_at for m in busy if m.up_at is not None) > 0
    assert run_example().report() == report  # same seed, same report


def test_background_trace_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "bg.csv").write_text("0, 2, 1h\n10m, two, 1h\n")
    (tmp_path / "c.toml").write_text('[clusters.p]\nprovisioner = "local"\nmax = 4\nbackground_trace = "bg.csv"\n')
    with pytest.raises(ConfigError, match=r"c.toml:\d+: \[clusters.p\] background_trace: .*bg.csv:2: slots"):
        load_config(tmp_path / "c.toml", options_of)
    (tmp_path / "bg.csv").write_text("0, 8, 1h\n")
    with pytest.raises(ConfigError, match=r"bg.csv:1: 8 slots, more than the pool's max = 4"):
        load_config(tmp_path / "c.toml", options_of)


def test_sim_command_line_needs_a_deadline_and_a_task_runtime(capsys, tmp_path):
    assert sim_main(["--config", str(EXAMPLE), "--tasks", "10", "--runtimes", "fixed:60", "--policy", "offers"]) == 2
    assert "--policy offers needs --deadline" in capsys.readouterr().err
    plain = tmp_path / "c.toml"
    plain.write_text('[clusters.p]\nprovisioner = "local"\nmax = 4\n')
    assert sim_main(["--config", str(plain), "--tasks", "10", "--runtimes", "fixed:60", "--policy", "offers",
                     "--deadline", "1h"]) == 2
    assert "[policy.offers] task_runtime: required" in capsys.readouterr().err
    assert sim_main(["--config", str(EXAMPLE), "--tasks", "50", "--runtimes", "fixed:60", "--policy", "offers",
                     "--deadline", "1h", "--seed", "2", "-q"]) == 0
