"""Spot clusters: price traces, every ATU billed at the price when it begins, re-planning when a
price moves, and interruption above the bid (seed 003 §3), in the simulator."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bats import provisioners
from bats.common.config import ConfigError, load_config
from bats.master.core import charged as _charged
from bats.master.core.bats.policy import Choice
from bats.master.sim.driver import simulate
from bats.master.sim.runtimes import parse_runtimes

CONFIG = """
[clusters.od]
provisioner = "local"
max = 4
price = 1.0
atu = "5m"

[clusters.spot]
provisioner = "local"
max = 4
price = 0.2
atu = "5m"
market = "spot"
price_trace = "trace.csv"
"""


def write(tmp_path: Path, extra: str = "", trace: str = "0, 0.2\n900s, 6.0\n") -> Path:
    (tmp_path / "trace.csv").write_text("# offset, price\n" + trace)
    path = tmp_path / "c.toml"
    path.write_text(CONFIG + extra)
    return path


def run(config_path: Path, budget: float = 60.0, seed: int = 1):
    config = load_config(config_path, provisioners.options_of)
    sim = simulate(config, 200, parse_runtimes("normal:60s,10s"), seed, choice=Choice(budget=budget))
    return sim, sim.report()


def test_each_atu_costs_the_price_when_it_begins():
    # ATUs of 100 s from t=50: they begin at 50, 150, 250, 350; the price is 1 before 200, 3 from 200
    assert _charged(50.0, 4, 100.0, 1.0, [200.0], [3.0]) == 1 + 1 + 3 + 3
    assert _charged(50.0, 4, 100.0, 1.0, [], []) == 4.0
    # a change exactly at an ATU's start applies to that ATU
    assert _charged(0.0, 3, 100.0, 1.0, [100.0, 250.0], [2.0, 5.0]) == 1 + 2 + 2
    # per-second billing over an hour: O(changes), not O(ATUs)
    assert _charged(0.0, 3600, 1.0, 0.001, [1800.0], [0.002]) == pytest.approx(1800 * 0.001 + 1800 * 0.002)


def test_a_spot_type_that_gets_expensive_is_dropped_at_its_atu_edges(tmp_path):
    sim, report = run(write(tmp_path))
    assert report["status"] == "done" and sim.duplicates == 0
    assert report["cost"]["total"] <= 60.0 + 1e-9  # an up-front budget pays the sampling too
    (change, *_) = report["reconfigurations"]
    assert change["reason"] == "price of spot 0.2 -> 6" and change["at_s"] == 900.0
    assert change["machines"]["spot"] < 4
    spot = [m for m in report["machines"] if m["cluster"] == "spot"]
    dropped = [m for m in spot if m["release_reason"] == "the plan needs fewer machines of its cluster"]
    assert dropped and all(m["atus"] == 3 and m["cost"] == pytest.approx(0.6) for m in dropped)  # never the dear ATU
    for m in spot:  # the cost of each machine: its ATUs before 900 s at 0.2, after at 6
        before = min(m["atus"], 3)
        assert m["cost"] == pytest.approx(before * 0.2 + (m["atus"] - before) * 6.0)


def test_a_price_above_the_bid_interrupts_and_the_bag_still_finishes(tmp_path):
    # the price jumps in the middle of an ATU (1000 s; edges every 300 s): the machines are lost
    sim, report = run(write(tmp_path, extra="bid = 1.0\n", trace="0, 0.2\n1000s, 6.0\n"))
    assert report["status"] == "done" and sim.duplicates == 0 and report["tasks"]["done"] == 200
    assert report["sim"]["spot_interruptions"] >= 1
    interrupted = [m for m in report["machines"] if m["release_reason"].startswith("spot interruption")]
    assert interrupted and all(m["cluster"] == "spot" for m in interrupted)
    # no spot machine is acquired while the price stays above the bid: the 4 of the sampling phase only
    assert sum(m["cluster"] == "spot" for m in report["machines"]) == 4
    assert report["cost"]["total"] <= 60.0 + 1e-9


@pytest.mark.parametrize("extra, trace, fragment", [
    ("", "0, cheap\n", "trace.csv:2: price"),
    ("", "1h, 0.2\n30m, 0.3\n", "trace.csv:3: offset 30m is not after"),
    ("", "0, 0.2, 9\n", "trace.csv:2: expected 'offset, price'"),
    ("", "# nothing\n", "no price rows"),
    ("", "0, -1\n", "trace.csv:2: price: must be a finite number >= 0"),
])
def test_bad_price_traces_name_the_file_and_line(tmp_path, extra, trace, fragment):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, extra, trace), provisioners.options_of)
    assert fragment in str(err.value) and "[clusters.spot] price_trace" in str(err.value)


def test_spot_keys_need_a_spot_market(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[clusters.od]\nprovisioner = "local"\nmax = 1\nbid = 0.5\n')
    with pytest.raises(ConfigError, match=r"\[clusters.od\] bid: only for a spot cluster"):
        load_config(path, provisioners.options_of)
    path.write_text('[clusters.s]\nprovisioner = "local"\nmax = 1\nmarket = "preemptible"\n')
    with pytest.raises(ConfigError, match="market"):
        load_config(path, provisioners.options_of)


def test_on_demand_price_is_the_default_bid(tmp_path):
    config = load_config(write(tmp_path, extra="on_demand_price = 1.0\n"), provisioners.options_of)
    assert config.clusters["spot"].bid == 1.0 and config.clusters["spot"].spot
    assert not math.isnan(config.clusters["spot"].price_trace.price_at(1000.0, 0.2))


def test_the_overall_machine_limit_holds_in_every_phase(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[master]\nmax_machines = 5\n\n'
                    '[clusters.a]\nprovisioner = "local"\nmax = 4\nprice = 1.0\natu = "5m"\n\n'
                    '[clusters.b]\nprovisioner = "local"\nmax = 4\nprice = 2.0\natu = "5m"\nspeed = 2\n')
    config = load_config(path, provisioners.options_of)
    for choice in (Choice(policy="self"), Choice(schedule="fastest"), Choice(budget=500.0)):
        sim = simulate(config, 300, parse_runtimes("normal:60s,10s"), 3, choice=choice)
        report = sim.report()
        assert report["status"] == "done" and sim.duplicates == 0
        # machines up at the same time never exceed the limit
        spans = [(m["uptime_s"], m) for m in report["machines"]]
        assert len(spans) >= 2
        events = sorted([(sim.core.machines[m["id"]].acquired_at, 1) for m in report["machines"]]
                        + [(sim.core.machines[m["id"]].released_at, -1) for m in report["machines"]],
                        key=lambda e: (e[0], e[1]))
        live = peak = 0
        for _t, step in events:
            live += step
            peak = max(peak, live)
        assert peak <= 5, (choice, peak)
