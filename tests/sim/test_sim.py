"""bats-sim: the virtual-time driver of the core, its runtime distributions and its command line."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.common.config import (
    ClusterConfig,
    Config,
    ConfigError,
    MasterConfig,
    load_config,
)
from bats.master.cli.sim import main
from bats.master.core import Core, TaskFinished, atus_begun
from bats.master.sim.driver import Simulator, cluster_speed, simulate
from bats.master.sim.runtimes import MDB_RANGE_MIN, RuntimeSpecError, parse_runtimes
from bats.provisioners import options_of


def cluster(name="a", max=2, price=0.5, atu_s=100.0, speed=1.0, **options) -> ClusterConfig:
    opts = {"slowdown": 1.0, "startup": 0.0, **options}
    return ClusterConfig(name, "local", max=max, price=price, atu_s=atu_s, options=opts, speed=speed)


def config(*clusters: ClusterConfig, prefetch: int = 1, boot_timeout_s: float = 600.0) -> Config:
    return Config(MasterConfig(prefetch=prefetch, boot_timeout_s=boot_timeout_s),
                  {cl.name: cl for cl in clusters})


def run(cfg: Config, tasks: int, spec: str, seed: int = 1, **kwargs):
    return simulate(cfg, tasks, parse_runtimes(spec), seed, **kwargs)


def check_accounting(sim, tasks: int, runs: int | None = None) -> dict:
    """Every task recorded exactly once and run ``runs`` times in all (default: once each); cost is
    the machines' begun ATUs times their price."""
    report = sim.report()
    assert report["tasks"] == {"total": tasks, "done": tasks, "failed": 0, "not_run": 0}
    assert sim.recorded == tasks and sim.duplicates == 0
    assert sum(m["nt"] for m in report["machines"]) == (tasks if runs is None else runs)
    total = 0.0
    for m in report["machines"]:
        cl = sim.config.clusters[m["cluster"]]
        assert m["atus"] == max(1, math.ceil(m["uptime_s"] / cl.atu_s - 1e-9))
        assert m["cost"] == pytest.approx(m["atus"] * cl.price)
        total += m["cost"]
    assert report["cost"]["total"] == pytest.approx(total)
    return report


# ---------------------------------------------------------------- exact runs
def test_fixed_runtimes_exact_makespan_with_prefetch():
    """10 tasks of 60 s on 2 machines holding 1 + 1 prefetched task each: at t=0 each machine asks
    for 2 and gets 2 (4 handed out); whenever a machine finishes, its prefetched task starts at once
    and the master hands it one more, so both run back to back: 5 tasks each, 5 x 60 = 300 s.
    Both machines are released when the last task ends, so each is up 300 s = 3 ATUs of 100 s."""
    sim = run(config(cluster(max=2, price=0.5, atu_s=100.0)), 10, "fixed:60")
    report = check_accounting(sim, 10)
    assert sim.finish.status == "done"
    assert report["makespan_s"] == 300.0
    assert [(m["id"], m["nt"], m["uptime_s"], m["atus"]) for m in report["machines"]] == [
        ("a-s1-1", 5, 300.0, 3), ("a-s1-2", 5, 300.0, 3)]
    assert report["cost"]["total"] == 3.0


def test_odd_task_count_end_of_bag():
    """5 tasks of 60 s on 2 machines: the fifth goes to whichever machine asks first at t=60, as a
    prefetch behind its running task (no machine is idle), so the makespan is 3 x 60 = 180 s."""
    report = check_accounting(run(config(cluster(max=2)), 5, "fixed:60"), 5)
    assert report["makespan_s"] == 180.0
    assert sorted(m["nt"] for m in report["machines"]) == [2, 3]


@pytest.mark.parametrize("speed, options, makespan", [
    (2.0, {}, 150.0),  # runtimes divided by speed
    (0.5, {}, 600.0),
    (1.0, {"slowdown": 2.0}, 600.0),  # a local cluster's slowdown is speed 1/slowdown
    (4.0, {"slowdown": 2.0}, 75.0),  # an explicit speed wins over slowdown
])
def test_speed_scales_runtimes(speed, options, makespan):
    cl = cluster(max=2, speed=speed, **options)
    sim = run(config(cl), 10, "fixed:60")
    assert check_accounting(sim, 10)["makespan_s"] == makespan
    assert sim.report()["clusters"]["a"]["speed"] == cluster_speed(cl)


def test_two_clusters_of_different_speed():
    """Deterministic with fixed runtimes whatever the seed: the fast machine (20 s a task) does
    five tasks, the slow one (60 s) three; the last task was prefetched to the slow machine at t=60,
    before the fast one ran dry, and ends at 180 s."""
    cfg = config(cluster("slow", max=1), cluster("fast", max=1, speed=3.0))
    for seed in (1, 2, 3):
        report = check_accounting(run(cfg, 8, "fixed:60", seed=seed), 8)
        assert report["makespan_s"] == 180.0
        assert {m["cluster"]: m["nt"] for m in report["machines"]} == {"slow": 3, "fast": 5}


def test_startup_delays_the_first_task_and_is_paid():
    sim = run(config(cluster(max=2, startup=30.0)), 10, "fixed:60")
    report = check_accounting(sim, 10)
    assert report["makespan_s"] == 330.0  # measured from the start of the run, boot included
    assert all(m["uptime_s"] == 330.0 and m["atus"] == 4 for m in report["machines"])


def test_machines_that_never_boot_end_the_run_incomplete():
    """startup past the boot timeout: each machine is released on a tick after the timeout (its
    pending hello is dropped), replaced twice, then the core gives up on the cluster."""
    sim = run(config(cluster(max=1, startup=600.0), boot_timeout_s=60.0), 4, "fixed:60")
    report = sim.report()
    assert sim.finish.status == "incomplete"
    assert report["tasks"]["not_run"] == 4 and report["tasks"]["done"] == 0
    assert [(m["id"], m["nt"], m["release_reason"]) for m in report["machines"]] == [
        (f"a-s1-{k}", 0, "boot timeout") for k in (1, 2, 3)]
    assert report["finished_at"] == 360.0  # ticks at 120, 240, 360 (each > 60 s after acquisition)


class _ResultsLost(Core):
    """A core that never hears results: the run can only stall."""

    def handle(self, event):
        return [] if isinstance(event, TaskFinished) else super().handle(event)


class _Foreign(Core):
    def handle(self, event):
        return [*super().handle(event), ("an action", "the driver does not know")]


def _driver(core_class, cfg: Config, tasks: int) -> Simulator:
    core = core_class(range(1, tasks + 1), cfg.clusters, random.Random(1), max_held=2)
    return Simulator(core, cfg, [60.0] * (tasks + 1))


def test_a_stalled_run_is_stopped():
    sim = _driver(_ResultsLost, config(cluster(max=2, atu_s=100.0)), 6)
    finish = sim.run()
    assert finish.status == "incomplete" and "stalled" in finish.reason
    # the last (unheard) results are due at 120 s (each machine ran its prefetched task after the
    # first); then only ticks, until they have gone on longer than the boot timeout (600 s) + a tick
    assert 120.0 + 660.0 < sim.now <= 120.0 + 660.0 + 2 * 60.0
    assert all(m.state.value == "gone" for m in sim.core.machines.values())


def test_an_action_the_driver_does_not_know_is_an_error():
    with pytest.raises(TypeError, match="cannot carry out"):
        _driver(_Foreign, config(cluster(max=1)), 2).run()


def test_failures_are_retried_and_counted_once():
    sim = run(config(cluster(max=3)), 200, "fixed:10", fail_rate=0.3, retries=10)
    runs = sum(m.nt for m in sim.core.machines.values())  # nt counts every attempt, failed ones too
    assert 200 * 1.2 < runs < 200 * 1.8  # about 200 / 0.7 attempts
    check_accounting(sim, 200, runs)
    sim = run(config(cluster(max=3)), 50, "fixed:10", fail_rate=1.0)
    assert sim.finish.status == "failed" and sim.report()["tasks"]["failed"] == 50
    assert sim.recorded == 50 and sim.duplicates == 0


def test_same_seed_same_report_other_seed_other_report():
    cfg = config(cluster("a", max=3, price=1.0, atu_s=600.0), cluster("b", max=2, price=3.0, speed=2.5,
                                                                       startup=45.0))

    def report(seed):
        sim = run(cfg, 300, "normal:15m,134s", seed=seed, fail_rate=0.05, retries=2)
        return json.dumps(sim.report({"seed": seed}), sort_keys=True)

    assert report(11) == report(11)
    assert report(11) != report(12).replace('"seed": 12', '"seed": 11')


# ---------------------------------------------------------------- runtime distributions
def test_normal_statistics():
    values = parse_runtimes("normal:15m,134s").sample(np.random.default_rng(3), 40_000)
    assert values.mean() == pytest.approx(900.0, rel=0.01)
    assert values.std() == pytest.approx(134.0, rel=0.03)
    low = parse_runtimes("normal:2s,3s").sample(np.random.default_rng(3), 10_000)
    assert low.min() >= 1.0 and (low == 1.0).sum() == 0  # truncated by redrawing, no point mass


def test_levy_is_bounded_and_follows_its_truncated_cdf():
    dist = parse_runtimes("levy:12m,45m")
    values = dist.sample(np.random.default_rng(5), 50_000)
    assert values.min() > 0 and values.max() <= 45 * 60
    for x in (3 * 60, 8 * 60, 15 * 60, 30 * 60):
        assert (values <= x).mean() == pytest.approx(dist.cdf(x), abs=0.01)
    extreme = parse_runtimes("levy:1h,1m").sample(np.random.default_rng(5), 5_000)  # max far below scale
    assert extreme.max() <= 60 and extreme.mean() > 50


def test_mdb_shape():
    values = parse_runtimes("mdb").sample(np.random.default_rng(7), 50_000) / 60
    low, high = MDB_RANGE_MIN
    assert values.min() >= low and values.max() <= high
    assert values.mean() == pytest.approx(14.6, abs=0.3)
    counts, _edges = np.histogram(values, bins=45, range=(0.5, 45.5))  # bin k is centred on k + 1
    assert counts.argmax() in (4, 13)  # the two Cauchy modes, at 5 and 14 minutes
    assert counts[4] > 3 * counts[9] and counts[13] > 3 * counts[9]  # with a trough between them


def test_fixed_and_file_cycling(tmp_path):
    assert parse_runtimes("fixed:1.5m").sample(np.random.default_rng(), 3).tolist() == [90.0] * 3
    path = tmp_path / "runtimes.txt"
    path.write_text("# seconds or durations\n10\n\n20s # two\n1m\n")
    values = parse_runtimes(f"file:{path}").sample(np.random.default_rng(), 7)
    assert values.tolist() == [10, 20, 60, 10, 20, 60, 10]
    sim = run(config(cluster(max=1), prefetch=0), 4, f"file:{path}")  # one machine: sum of runtimes
    assert check_accounting(sim, 4)["makespan_s"] == 100.0


# ---------------------------------------------------------------- the command
CONFIG = '[clusters.a]\nprovisioner = "local"\nmax = 2\nprice = 0.5\natu = 100\nspeed = 2\nstartup = "10s"\n'


def test_cli_runs_and_writes_the_report(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(CONFIG)
    out = tmp_path / "out" / "report.json"
    argv = ["--config", str(tmp_path / "c.toml"), "--tasks", "10", "--runtimes", "fixed:1m", "--seed", "4",
            "--report", str(out), "--policy", "self"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "DONE" in printed and str(out) in printed
    report = json.loads(out.read_text())
    assert report["status"] == "done" and report["makespan_s"] == 160.0 and report["seed"] == 4
    assert report["cost"]["total"] == 2 * 2 * 0.5
    assert set(report["machines"][0]) >= {"id", "cluster", "nt", "rt_s", "uptime_s", "atus", "cost"}
    assert report["clusters"]["a"] == {"provisioner": "local", "max": 2, "price": 0.5, "atu_s": 100.0,
                                       "slots": 1, "speed": 2.0, "startup_s": 10.0}
    first = out.read_text()
    assert main(argv + ["-q"]) == 0 and capsys.readouterr().out == ""
    assert out.read_text() == first


def test_cli_default_config_and_incomplete_exit(capsys):
    assert main(["--workers", "3", "--tasks", "7", "--runtimes", "fixed:5", "--seed", "1"]) == 0
    assert "3 machine(s)" in capsys.readouterr().out
    assert main(["--workers", "2", "--tasks", "5", "--runtimes", "fixed:5", "--fail-rate", "1", "-q"]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # -q: no summary, but the exit status of 1 is explained in one line
    assert err.startswith("bats-sim: failed: 5 task(s) failed") and err.endswith("(0 done, 5 failed, 0 not run, of 5)\n")
    assert err.count("\n") == 1


BAD_SPECS = ["", "gauss:1,2", "normal", "normal:15m", "normal:15m,2m,3m", "normal:-1,2", "normal:0,1",
             "normal:15m,lots", "levy:0,45m", "levy:12m", "levy:12m,0", "fixed:", "fixed:abc", "fixed:-3",
             "mdb:3", "file:", "file:/no/such/file", "file:BAD", "file:EMPTY", "file:DIR", "bad\nline"]


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_bad_runtime_spec_is_one_line_and_exit_2(spec, tmp_path, capsys):
    (tmp_path / "BAD").write_text("10\n20\nforever\n")
    (tmp_path / "EMPTY").write_text("# nothing\n\n")
    (tmp_path / "DIR").mkdir()
    spec = spec.replace("BAD", str(tmp_path / "BAD")).replace("EMPTY", str(tmp_path / "EMPTY"))
    spec = spec.replace("DIR", str(tmp_path / "DIR"))
    with pytest.raises(RuntimeSpecError):
        parse_runtimes(spec)
    assert main(["--workers", "1", "--tasks", "3", "--runtimes", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bats-sim: error: --runtimes: ") and err.count("\n") == 1
    if spec.endswith("BAD"):
        assert f"{tmp_path / 'BAD'}:3:" in err


@pytest.mark.parametrize("argv, fragment", [
    (["--tasks", "3"], "--runtimes"),
    (["--runtimes", "fixed:1"], "--tasks"),
    (["--tasks", "0", "--runtimes", "fixed:1"], "--tasks"),
    (["--tasks", "x", "--runtimes", "fixed:1"], "--tasks"),
    (["--tasks", "3", "--runtimes", "fixed:1", "--retries", "-1"], "--retries"),
    (["--tasks", "3", "--runtimes", "fixed:1", "--fail-rate", "2"], "--fail-rate"),
    (["--tasks", "3", "--runtimes", "fixed:1", "--tick", "0"], "--tick"),
    (["--tasks", "3", "--runtimes", "fixed:1", "--config", "/no/such.toml"], "/no/such.toml"),
    (["--tasks", "3", "--runtimes", "fixed:1", "--workers", "0"], "--workers"),
])
def test_bad_flags_exit_2(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bats-sim: error: ") and err.count("\n") == 1 and fragment in err


def test_config_speed_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    assert load_config(path, options_of).clusters["a"].speed == 2.0
    path.write_text(CONFIG.replace("speed = 2\n", ""))
    assert load_config(path, options_of).clusters["a"].speed == 1.0
    for bad in ("0", "-1", '"fast"', "inf"):
        path.write_text(CONFIG.replace("speed = 2", f"speed = {bad}"))
        with pytest.raises(ConfigError, match=r"\[clusters.a\] speed"):
            load_config(path, options_of)


# ---------------------------------------------------------------- properties
cluster_strategy = st.builds(
    dict,
    max=st.integers(1, 4),
    price=st.sampled_from([0.0, 0.1, 1.0, 3.0, 7.5]),
    atu_s=st.sampled_from([1.0, 30.0, 60.0, 600.0, 3600.0]),
    speed=st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0]),
    startup=st.sampled_from([0.0, 5.0, 90.0]),
)
spec_strategy = st.one_of(
    st.integers(0, 900).map(lambda t: f"fixed:{t}"),
    st.tuples(st.integers(1, 60), st.integers(0, 30)).map(lambda ms: f"normal:{ms[0]}m,{ms[1]}m"),
)


@settings(max_examples=60, deadline=None)
@given(clusters=st.lists(cluster_strategy, min_size=1, max_size=3), tasks=st.integers(1, 40),
       spec=spec_strategy, prefetch=st.integers(0, 2), seed=st.integers(0, 2**32 - 1))
def test_property_every_task_once_and_cost_matches_atus(clusters, tasks, spec, prefetch, seed):
    cfg = config(*(cluster(f"c{k}", max=d["max"], price=d["price"], atu_s=d["atu_s"], speed=d["speed"],
                           startup=d["startup"]) for k, d in enumerate(clusters)), prefetch=prefetch)
    sim = run(cfg, tasks, spec, seed=seed)
    assert sim.finish.status == "done"
    report = check_accounting(sim, tasks)
    assert len(report["machines"]) == sum(min(d["max"], tasks) for d in clusters)
    expected = sum(atus_begun(m["uptime_s"], cfg.clusters[m["cluster"]].atu_s) * cfg.clusters[m["cluster"]].price
                   for m in report["machines"])
    assert report["cost"]["total"] == pytest.approx(expected)


def test_bimodal_runtimes_mix_short_and_long_tasks_in_the_given_share():
    dist = parse_runtimes("bimodal:2m,40m,0.1")
    values = dist.sample(np.random.default_rng(3), 20_000)
    long = values > 20 * 60
    assert abs(long.mean() - 0.1) < 0.01
    assert abs(np.median(values[~long]) - 120) < 3 and abs(np.median(values[long]) - 2400) < 60
    assert values.min() >= 1.0
    for bad in ("bimodal:2m,40m", "bimodal:2m,40m,1.5", "bimodal:0,40m,0.1", "bimodal:2m,40m,x"):
        with pytest.raises(RuntimeSpecError, match="bimodal"):
            parse_runtimes(bad)


def test_the_end_game_copies_a_slow_machines_tasks_and_counts_each_task_once():
    """16 slow and 16 four-times-faster machines: at the end of the bag idle fast machines copy
    tasks the slow ones hold; the copies that win are counted, every task is recorded once, and the
    execution spends no more than its budget and cushion."""
    from bats.master.core.bats.policy import Choice

    cfg = Config(MasterConfig(), {
        "slow": ClusterConfig("slow", "local", max=16, price=1.0, atu_s=600.0, speed=1.0),
        "fast": ClusterConfig("fast", "local", max=16, price=3.0, atu_s=600.0, speed=4.0)})
    sim = simulate(cfg, 400, parse_runtimes("normal:8m,1m"), 1, choice=Choice(policy="bats", schedule="fastest",
                                                                             cushion=True))
    report = sim.report()
    assert report["status"] == "done"
    endgame = report["endgame"]
    assert endgame["copies_won"] >= 1 and endgame["copies_started"] >= endgame["copies_won"]
    assert endgame["copy_paid_s"] > 0
    assert sim.recorded == 400 and sim.duplicates == 0
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9
