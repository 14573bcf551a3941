"""``make reliability``: the fault-injection scenarios, many times over, and the cost of encryption;
writes ``docs/reliability.md``.

    .venv/bin/python bench/reliability.py [--runs N] [--sim-runs N] [--curve-tasks N] [--output FILE]
    .venv/bin/python bench/reliability.py --only-attacks   # the "Under attack" section alone, in place

How this works. Each real-process scenario of ``tests/helpers/faults.py`` (a real ``bats-master`` with
real workers on 127.0.0.1, local or, for the rows marked (ssh)/(sge), started through a real sshd
or as jobs of a real Grid Engine, hurt in one way) runs ``--runs`` times with different random
seeds, and each run is audited from its journal and report: tasks without a result (lost),
result rows beyond one per task (double-counted), money spent past budget plus accepted cushion
(overrun), and whether the report's cost equals the machines' recorded ATUs times the price. A run
that raises (the master exits non-zero, a fault did not take effect) counts as an error; a row
whose daemons are not installed is skipped, and says so. The
simulator rows run BaTS (``bats.master.sim.driver`` with :class:`~bats.master.sim.driver.SimFaults` and price
traces) on random clusters, bags and choices, and count budget overruns the same way. The cost of
encryption is ``bench/curve_bench.py``'s measurement, made in this same run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import random
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH_DIR))

import pytest  # tests/helpers/daemons.py reports a missing daemon through pytest.skip/fail
from curve_bench import measure, ping_pong, pong_lines
from helpers import faults, hostile
from sections import fmt


def log(msg: str) -> None:
    print(f"[reliability {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_scenarios(runs: int, work: Path) -> list[dict]:
    rows = []
    for index, (name, scenario) in enumerate(faults.SCENARIOS.items()):
        row = {"name": name, "runs": 0, "lost": 0, "double": 0, "overrun": 0, "cost_mismatch": 0, "errors": 0,
               "tasks": 0, "wall": 0.0, "notes": []}
        for k in range(runs):
            seed = 1000 * index + k
            started = time.perf_counter()
            try:
                result = scenario(work / f"s{index}-{k}", random.Random(seed))
            except pytest.skip.Exception as exc:  # the back end's daemons are not installed here
                row["notes"].append(f"skipped: {exc.msg}")
                log(f"{name}: skipped: {exc.msg}")
                break
            except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - counted and described, not fatal
                row["errors"] += 1
                row["notes"].append(f"seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
                log(f"{name} seed {seed}: ERROR {traceback.format_exc(limit=1).splitlines()[-1]}")
                continue
            finally:
                row["wall"] += time.perf_counter() - started
            row["runs"] += 1
            row["tasks"] += result.tasks
            row["lost"] += result.lost
            row["double"] += result.double
            row["overrun"] += result.overrun > 1e-9
            row["cost_mismatch"] += not result.cost_matches
            log(f"{name} seed {seed}: lost {result.lost}, double {result.double}, cost {result.cost:.4f} "
                f"(ATUs {result.atu_cost:.4f}), machines {result.machines}")
        rows.append(row)
    return rows


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_hostile(runs: int, work: Path) -> dict:
    """The runs of ``tests/helpers/hostile.py``, ``runs`` times each: floods against an unflooded
    baseline measured in the same loop, clock steps, and the state-dir refusals."""
    out: dict = {"floods": {}, "big": {}, "clock": {}, "state": {"attempts": 0, "refused": 0, "whole": 0, "runs": 0}}
    for kind in (None, "hellos", "heartbeats"):
        rows = []
        for k in range(runs):
            log(f"hostile: flood {kind or 'none'} run {k + 1}/{runs}")
            rows.append(hostile.flood_run(work / f"flood-{kind}-{k}", kind))
        out["floods"][kind or "none"] = {
            "runs": len(rows), "complete": sum(r["code"] == 0 and r["done"] == r["tasks"] for r in rows),
            "wall_s": _median([r["wall_s"] for r in rows]), "peak_mib": _median([r["peak_mib"] for r in rows]),
            "max_peak_mib": max(r["peak_mib"] for r in rows), "admitted": sum(r["admitted"] for r in rows)}
    for kind, flood in ((None, hostile.BIG_FLOOD), ("megabytes", hostile.BIG_FLOOD),
                        ("wide", hostile.WIDE_FLOOD)):
        rows = []
        for k in range(runs):
            log(f"hostile: 1 MiB flood {kind or 'none'} ({flood['peers']} peers) run {k + 1}/{runs}")
            rows.append(hostile.flood_run(work / f"big-{kind}-{k}", kind and "megabytes", **flood))
        out["big"][kind or "none"] = {"peers": flood["peers"],
            "handshakes": _median([r["handshakes"] for r in rows]), "refused": _median([r["refused"] for r in rows]),
            "runs": len(rows), "complete": sum(r["code"] == 0 and r["done"] == r["tasks"] for r in rows),
            "wall_s": _median([r["wall_s"] for r in rows]), "peak_mib": _median([r["peak_mib"] for r in rows]),
            "max_peak_mib": max(r["peak_mib"] for r in rows), "after_mib": _median([r["after_mib"] for r in rows])}
    for step in (3600.0, -3600.0):
        rows = []
        for k in range(runs):
            log(f"hostile: clock step {step:+.0f} s run {k + 1}/{runs}")
            rows.append(hostile.clock_step_run(work / f"clock-{step:+.0f}-{k}", step))
        out["clock"][step] = {
            "runs": len(rows), "complete": sum(r["code"] == 0 and r["done"] == r["tasks"] for r in rows),
            "within": sum(r["cost"] is not None and r["cost"] <= r["budget"] for r in rows),
            "max_uptime_s": max(r["max_uptime_s"] for r in rows)}
    for k in range(runs):
        log(f"hostile: state dir attempts run {k + 1}/{runs}")
        r = hostile.state_dir_refusals(work / f"state-{k}")
        state = out["state"]
        state["runs"] += 1
        state["attempts"] += r["attempts"]
        state["refused"] += r["refused"]
        state["whole"] += r["run_whole"]
    return out


def _hostile_lines(h: dict) -> list[str]:
    base = h["floods"]["none"]
    lines = [
        "## Under attack, and with a damaged clock",
        "",
        "A bag of 20 × `sleep 0.2` on 2 local workers whose acquisition answers 3 s after it started them "
        "(`tests/helpers/hostile.py`), alone and while 2 peers that know only the master's public key flood it: "
        "frames of 256 hellos with made-up machine ids and tokens (read back, to count any answer admitting them), "
        "or frames of 256 heartbeats from peers that never read. Wall time is the median from start to exit; "
        "the slowdown is against the unflooded runs of this same page.",
        "",
        "| run | runs | bag complete | wall (median) | slowdown | master memory (median / max) | forged peers admitted |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"none": "no flood", "hellos": "early-hello flood", "heartbeats": "pre-hello heartbeats, never read"}
    for kind, row in h["floods"].items():
        slow = (row["wall_s"] / base["wall_s"]) if base["wall_s"] else None
        lines.append(f"| {names[kind]} | {row['runs']} | {row['complete']} | {fmt(row['wall_s'], '.1f', ' s')} | "
                     f"{fmt(slow, '.2f', '×')} | {fmt(row['peak_mib'], '.0f')} / {fmt(row['max_peak_mib'], '.0f')} MiB"
                     f" | {row['admitted'] if kind == 'hellos' else '-'} |")
    quiet = h["big"]["none"]
    lines += ["", "1 MiB frames before hello: 4 peers with only the public key send frames of 1 MiB as fast as the "
              "master takes them for 8 s, then leave, while 40 × `sleep 0.5` run on 2 local workers "
              "(`hostile.BIG_FLOOD`), and the same from 80 connections, more than the master lets in from one "
              "address without a hello (`hostile.WIDE_FLOOD`; the workers connect from that address too); memory "
              "after is the master's at its last sample, after they left. Handshakes are the flooders' that "
              "completed (a connection shut down for its first frame connects again, and that handshake counts "
              "again) and those refused at the door (medians of the runs); the 80 flooding threads run on the same "
              "2 cores as the master and its workers, so part of that slowdown is theirs.", "",
              "| run | runs | bag complete | wall (median) | slowdown | master memory (median / max) | after they left "
              "| handshakes completed / refused |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, row in h["big"].items():
        name = "no flood" if kind == "none" else f"1 MiB frames, {row['peers']} peers"
        slow = (row["wall_s"] / quiet["wall_s"]) if quiet["wall_s"] else None
        shakes = "-" if kind == "none" else f"{row['handshakes']:.0f} / {row['refused']:.0f}"
        lines.append(f"| {name} | {row['runs']} | {row['complete']} | {fmt(row['wall_s'], '.1f', ' s')} | "
                     f"{fmt(slow, '.2f', '×')} | {fmt(row['peak_mib'], '.0f')} / {fmt(row['max_peak_mib'], '.0f')} MiB"
                     f" | {fmt(row['after_mib'], '.0f')} MiB | {shakes} |")
    lines += ["", "A BaTS run on two emulated clouds (`--budget 40`, 30 × `sleep 0.3`) whose wall clock "
              "(`time.time()`) jumps an hour two seconds in, as an NTP step would:", "",
              "| wall clock step | runs | bag complete | bill within budget | longest machine uptime |",
              "|---|---:|---:|---:|---:|"]
    for step, row in h["clock"].items():
        lines.append(f"| {step:+.0f} s | {row['runs']} | {row['complete']} | {row['within']} | "
                     f"{row['max_uptime_s']:.0f} s |")
    state = h["state"]
    lines += ["", f"State directory: {state['attempts']} attempts on {state['runs']} runs (a second `--resume` and "
              "a fresh start on a live run's directory, then `--resume` with `bag.txt` and with `config.toml` "
              f"edited) were refused {state['refused']} times with exit 2; the run stayed whole "
              f"(every task once) in {state['whole']} of {state['runs']}.", "", *ROUND_TWO]
    return lines


# attacks found by a hostile local user, a key-only peer and an admitted machine, each a test with a
# real master; the figures are what the tests check (the "before" ones are the attack report's)
ROUND_TWO = [
    "### Second round: the status socket, frames before hello, other users' state dirs, admitted machines",
    "",
    "Each attack is a test against a real master over real sockets; before, what the attack did to the code of "
    "the time.",
    "",
    "| attack | before | now | test |",
    "|---|---|---|---|",
    "| a 2-part message to the status socket | the master exited 1 with ~220 of 300 tasks not run, no report, "
    "machines not released | dropped; the run ends with every task; `status` still answers | "
    "`tests/views/test_control_socket.py` |",
    "| a 1 MiB (or 1 GiB) status request | master 96 MiB -> 2 GiB | dropped by libzmq before it is buffered "
    "(requests of at most 256 bytes); the socket is a Unix socket, 0600 in a 0700 directory, and a request must "
    "carry the key in `control.json` | same |",
    "| 1 MiB frames before hello from 4 key-only peers | about 1 GiB per connection, held after they left (the "
    "run of the table above, before the change: 372 MiB at the peak, 128 MiB after, 91 MiB unflooded) | "
    "see the table above: at most 16 unread frames per connection, 8 frames of at most 16 KiB then 1 a second "
    "before hello, and a connection that sends past that is shut down at once (it may connect again) | "
    "`tests/server/test_flood.py` (peak < 250 MiB, < 150 MiB after) |",
    "| connections that never say hello, as many as a peer likes (80 from one address in the test) | no limit: "
    "each could hold 16 frames of up to 1 MiB (32 flooding peers before the cap: 65 MiB at the peak, the bag "
    "1.4× slower) | at most 64 from one address and 512 in all complete the handshake (the ZAP handler counts "
    "them from the socket's monitor); the rest are refused with ZAP's temporary status, so libzmq tries again "
    "and an honest worker gets in when one leaves; the client key of a connection shut down for its budget "
    "waits 2 s before a new handshake; one without a hello after 30 s is shut down (`shutdown(2)` on "
    "its descriptor: ZeroMQ has no call that drops one peer of a ROUTER) | `tests/server/test_flood.py`, "
    "`tests/server/test_door.py` |",
    "| a state dir made first by another user (mode 0777, `master.lock` linked to an operator's file, `logs` "
    "linked to the other user's folder) | used as it was: the linked file truncated, the logs written there | "
    "refused in one line (exit 2), nothing written, the linked file untouched; a new state dir is 0700 | "
    "`tests/state/test_hostile_state_dir.py` |",
    "| heartbeats with arrays nested 1,000 deep (~1M objects a frame) from an admitted machine | 13 of 300 "
    "tasks in 35 s, 13 re-joins, SIGTERM ignored for 60 s | refused at the first array header; nested maps "
    "when the second map of a message completes; at most 32 fields | `tests/server/test_admitted_attacks.py` |",
    "| an admitted machine claiming 1,048,576 CPUs that never answers | 1,024 slots, 282 of 300 tasks held, "
    "the run hung even with `--task-timeout 3s` | `slots = \"auto\"` capped by `max_slots` (64); with "
    "`--task-timeout 2s` it is declared lost 5 s after its first task, its tasks run elsewhere, 40 of 40 done | "
    "same |",
    "| a task that kills its machine (as an out-of-memory kill would) | took down machine after machine (8-9, "
    "and a whole `--budget 30`) | quarantined after 2 lost machines (`--max-machine-losses`), named "
    "in a warning and in `tasks.quarantined_ids`; the other 7 tasks done | `tests/e2e/test_poison_task.py` |",
    "| a task that kills its worker within milliseconds of starting, queued behind another whose result the crash "
    "loses | the loss was counted against the task the master believed running, the honest one: the killer took "
    "a third machine (core test), and one more each time its crash lost the result before it | every task the lost machine held is a suspect and "
    "is never queued again, so its next loss is its own: 2 machines lost, the killer quarantined; with real "
    "workers, 2 `kill -9 $PPID` among 200 `true`: both quarantined, at most 4 machines lost, 198 done | "
    "`tests/core/test_core.py`, `tests/core/test_losses.py`, `tests/e2e/test_poison_task.py` |",
    "| machines lost en masse (a spot interruption of 3 of 4 machines, twice) | an honest task on a lost machine "
    "both times was quarantined | a loss shared with 2 other machines lost within 60 s (that held neither the "
    "task nor a task lost elsewhere too) counts against no task: none quarantined, 24 of 24 done with real "
    "workers | same |",
    "| `manual` workers started before their seat opens | 2 of 2 exited for good | told to wait; they say "
    "hello every 2 s and take the next seat | `tests/provisioners/test_provisioner_manual.py` |",
    "| task output starting with `=`, `+`, `-`, `@` in a CSV export | a spreadsheet formula | a leading `'` "
    "| `tests/state/test_journal.py` |",
    "| `[master] advertise` with a newline | accepted, written into cloud user data | refused at config "
    "load, naming file and line | `tests/common/test_cluster_names.py` |",
    "| a web page whose name resolves to 127.0.0.1 (DNS rebinding) reading `--dashboard` | answered | 403 unless "
    "`Host` is a loopback name | `tests/views/test_dashboard_host.py` |",
    "| a wall-clock step of an hour between a `kill -9` and `--resume` | report makespan 3,605 s for 5 s of "
    "work (+1 h), or 0.0 (-1 h) | the resumed master continues the run's clock (same boot: the monotonic clock "
    "ran on), logs the step, and reports the real makespan | `tests/common/test_clock.py` |",
    "| the journal's WAL deleted after a `kill -9` | 74 finished tasks ran again, silently | `--resume` refused, "
    "naming how many results are missing | `tests/state/test_hostile_state_dir.py` |",
    "",
]


def run_simulations(runs: int) -> list[dict]:
    """BaTS in the simulator with machine faults and price spikes: random cases of the kind the
    property tests draw (``tests/sim/test_sim_faults.py``), counted the same way."""
    from helpers.budget import check_budget

    cases = {
        "simulator: machine losses and boot failures (BaTS)": (("schedule", "id", "budget"), False),
        "simulator: price spikes after the options, with losses (BaTS)": (("schedule", "id"), True),
        "simulator: up-front --budget with price spikes (BaTS)": (("budget",), True),
    }
    rows = []
    for index, (name, (kinds, spikes)) in enumerate(cases.items()):
        rng = random.Random(12345 + index)
        row = {"name": name, "runs": 0, "lost": "—", "double": 0, "overrun": 0, "cost_mismatch": "—", "errors": 0,
               "tasks": 0, "wall": 0.0, "notes": []}
        started = time.perf_counter()
        for _ in range(runs):
            args = _random_case(rng, kinds, spikes)
            try:
                check_budget(*args)
            except AssertionError as exc:
                message = str(exc).splitlines()[0] if str(exc) else ""
                if "duplicates" in message or "recorded" in message:
                    row["double"] += 1
                else:
                    row["overrun"] += 1
                    if len(row["notes"]) < 2:
                        row["notes"].append(f"overrun, e.g. (status, reason, cost, budget + cushion, losses, "
                                            f"boot failures) = {message[:220]}")
            except Exception as exc:  # noqa: BLE001
                row["errors"] += 1
                row["notes"].append(f"{type(exc).__name__}: {exc}"[:200])
            row["runs"] += 1
            row["tasks"] += args[1]
        row["wall"] = time.perf_counter() - started
        log(f"{name}: {row['runs']} runs, {row['overrun']} overruns")
        rows.append(row)
    return rows


def _random_case(rng: random.Random, kinds: tuple[str, ...], spikes: bool) -> tuple:
    """Arguments for ``check_budget``, drawn from the same ranges as the property tests' strategies."""
    from helpers.strategies import PRICES

    from bats.master.sim.driver import SimFaults

    clusters = [{"max": rng.randint(1, 8), "price": rng.choice(PRICES), "atu_s": rng.choice([1.0, 60.0, 300.0, 3600.0]),
                 "speed": rng.choice([0.5, 1.0, 2.0, 3.0]), "startup": rng.choice([0.0, 5.0, 90.0])}
                for _ in range(rng.randint(1, 3))]
    spec = rng.choice([f"fixed:{rng.randint(1, 900)}", f"normal:{rng.randint(1, 30)}m,{rng.randint(0, 300)}s",
                       f"levy:{rng.randint(1, 15)}m,{rng.randint(1, 60)}m", "mdb"])
    kind = rng.choice(kinds)
    how = {"schedule": ("schedule", rng.choice(["cheapest", "fastest"]), rng.random() < 0.5),
           "id": ("id", rng.randint(1, 10_000), rng.random() < 0.5),
           "budget": ("budget", rng.choice([1.0, 1.01, 1.2, 2.0, 5.0]), rng.random() < 0.5)}[kind]
    faults = SimFaults(boot_fail_rate=rng.choice([0.0, 0.1, 0.3, 0.6]), loss_rate=rng.choice([0.0, 0.2, 0.5, 0.9]),
                       loss_within_s=rng.choice([60.0, 900.0, 7200.0]), seed=rng.randint(0, 2**16))
    spike = [(rng.choice([60.0, 600.0, 3600.0]), rng.choice([1.5, 3.0, 10.0]), rng.choice([None, 300.0, 3600.0]))
             if spikes and rng.random() < 0.7 else None for _ in range(3)]
    return clusters, rng.randint(20, 300), spec, how, faults, spike, rng.randint(0, 2**32 - 1)


def write(output: Path, real: list[dict], sim: list[dict], hostile_runs: dict, curve: dict, pong: dict,
          args: argparse.Namespace, started_at: dt.datetime, wall_s: float) -> None:
    lines = [
        "# Reliability: fault injection and the cost of encryption",
        "",
        f"Generated by `bench/reliability.py` (`make reliability`) on {started_at:%Y-%m-%d %H:%M %Z}, "
        f"{platform.node()} ({platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}), in {wall_s / 60:.1f} min. Do not edit by hand: run it again.",
        "",
        "Every real-process scenario runs a real `bats-master` with real `bats-worker` processes over "
        "CurveZMQ on 127.0.0.1, local ones unless the row says (ssh), workers started through a real sshd on "
        "127.0.0.1, or (sge), worker jobs of a real single-node Grid Engine (`tests/helpers/faults.py`, "
        "`tests/helpers/backends.py`; one run of each is part of `make test` in "
        "`tests/e2e/test_faults.py`), then audits the state directory: **lost** counts tasks of the bag without a "
        "result row in the journal, **double-counted** counts result rows beyond one per task, **budget overruns** "
        "counts runs whose report's cost is above the plan's budget plus its accepted cushion (only runs with a "
        "BaTS plan have one), and **cost ≠ ATUs** counts runs whose report's cost differs from the sum of the "
        "machines' recorded ATUs times the price. **errors** are runs that did not finish as expected (the master "
        "exited non-zero or the fault did not take effect).",
        "",
        "| scenario | runs | tasks | lost | double-counted | budget overruns | cost ≠ ATUs | errors | wall (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in real + sim:
        lines.append(f"| {row['name']} | {row['runs']} | {row['tasks']:,} | {row['lost']} | {row['double']} | "
                     f"{row['overrun']} | {row['cost_mismatch']} | {row['errors']} | {row['wall']:.0f} |")
    notes = [(row["name"], note) for row in real + sim for note in row["notes"]]
    lines += ["", "What each scenario does:", ""]
    for name, scenario in faults.SCENARIOS.items():
        lines.append(f"- **{name}**: {' '.join((scenario.__doc__ or '').split())}")
    lines += [
        "- **simulator rows**: random clusters (1-3, prices, ATUs, speeds, boot times), bags (20-300 tasks, "
        "fixed/normal/Lévy/MDB runtimes) and BaTS choices, drawn from the property tests' strategies "
        "(`tests/sim/test_sim_faults.py`), with machines that fail to boot, machines lost mid-run and, where the "
        "row says so, price spikes (×1.5 to ×10 from 1 min to 1 h in, for 5 min, 1 h or for good).",
        "",
    ]
    if notes:
        lines += ["Notes on the runs above:", ""]
        lines += [f"- {name}: {note}" for name, note in notes]
        lines.append("")
    lines += [
        ("The up-front `--budget` row is the case this suite found in the BaTS policy: with an up-front "
         "budget the sampling happens inside the run, and a price rise during it made the run spend more "
         "than the budget until a price change during sampling re-reserved the ATUs at the new price at once "
         "(`master/core/bats/policy.py`); `tests/sim/test_sim_faults.py` keeps the minimal example as a regression test."),
        "",
        ("Found the same way: the ssh, sge and slurm provisioners had no clean-up, so a `kill -9` of the "
         "master left its workers and jobs running past `--resume` (the Grid Engine jobs held the queue "
         "and the resumed run hung); machines that came after their acquisition was given up on were "
         "released but not charged, and a master killed between a launch and its journaling left "
         "machines nobody charged. Every acquisition's intent is now journaled before the back end is "
         "asked, a late machine is charged from it, and `--resume`/`cleanup` charge what only the cloud's "
         "tags still know (`master/state/leftovers.py`; with moto in `tests/provisioners/test_ec2.py`)."),
        "",
        *_hostile_lines(hostile_runs),
        "## The cost of encryption",
        "",
        f"{curve['tasks']:,} no-op tasks on 2 `noop` local workers, CurveZMQ (the default) against `--insecure`, "
        f"alternating, {curve['repeats']} repeats each, medians (`bench/curve_bench.py`, also `make bench` "
        "section 8):",
        "",
        "| transport | tasks/s | master CPU per task |",
        "|---|---:|---:|",
    ]
    for mode in ("curve", "insecure"):
        m = curve["medians"][mode]
        lines.append(f"| {mode} | {fmt(m['tps'])} | {fmt(m['us_per_task'], '.1f', ' µs')} |")
    ratio = curve["ratio"]
    lines += ["", f"Throughput with encryption / without: **{fmt(ratio, '.2f')}**"
              + (f" ({(1 - ratio) * 100:.0f}% fewer tasks per second)." if ratio is not None and ratio < 1 else ".")
              + " Range of the repeats (tasks/s): " + "; ".join(
                  f"{mode} {fmt(r[0])}–{fmt(r[1])}" for mode, r in curve["ranges"].items() if r is not None) + ".",
              "",
              "The master packs many messages into each frame when tasks are this short, so the encryption cost per "
              "task is small next to the run-to-run noise of a shared machine; "
              + pong_lines(pong)[0], *pong_lines(pong)[1:], ""]
    if curve["errors"]:
        lines += ["Errors: " + "; ".join(curve["errors"]), ""]
    lines += ["## Reproduce", "",
              f"`make reliability` (this page: `.venv/bin/python bench/reliability.py --runs {args.runs} "
              f"--sim-runs {args.sim_runs} --curve-tasks {args.curve_tasks} --curve-repeats {args.curve_repeats}`; "
              "about 10 minutes).", ""]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/reliability.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs of each real-process scenario (default 3)")
    p.add_argument("--sim-runs", type=int, default=200, help="simulator runs per simulator row (default 200)")
    p.add_argument("--curve-tasks", type=int, default=20_000, help="no-op tasks per encryption run (default 20,000)")
    p.add_argument("--curve-repeats", type=int, default=5, help="repeats per transport (default 5)")
    p.add_argument("--output", default=str(REPO / "docs" / "reliability.md"))
    p.add_argument("--only-attacks", action="store_true",
                   help="run the attacks alone and replace the page's \"Under attack\" section (a few minutes)")
    args = p.parse_args(argv)
    started, started_at = time.perf_counter(), dt.datetime.now().astimezone()
    if args.only_attacks:
        return _only_attacks(Path(args.output), args.runs, started_at)
    with tempfile.TemporaryDirectory(prefix="bats-reliability-") as tmp:
        work = Path(tmp)
        real = run_scenarios(args.runs, work)
        sim = run_simulations(args.sim_runs)
        hostile_runs = run_hostile(args.runs, work)
        from run import run_bats  # bench/run.py's runner: a fresh state dir per run

        log(f"encryption: {args.curve_tasks:,} noop tasks, {args.curve_repeats} repeats per transport")
        curve = measure(run_bats, work, args.curve_tasks, args.curve_repeats, log)
        log("encryption: the transport alone, ping-pong")
        pong = ping_pong(args.curve_repeats)
    write(Path(args.output), real, sim, hostile_runs, curve, pong, args, started_at, time.perf_counter() - started)
    log(f"wrote {args.output}")
    return 0


def _only_attacks(output: Path, runs: int, started_at: dt.datetime) -> int:
    """Run the attacks and put their section in place of the one ``output`` has (the rest of the page
    keeps the date of its own run; this section says its own)."""
    page = output.read_text().split("\n")
    start = page.index("## Under attack, and with a damaged clock")
    end = next(i for i in range(start + 1, len(page)) if page[i].startswith("## "))
    with tempfile.TemporaryDirectory(prefix="bats-attacks-") as tmp:
        lines = _hostile_lines(run_hostile(runs, Path(tmp)))
    lines[1:1] = ["", f"This section: `bench/reliability.py --only-attacks --runs {runs}` on "
                  f"{started_at:%Y-%m-%d %H:%M %Z}, {platform.node()} ({platform.machine()}, "
                  f"CPython {platform.python_version()})."]
    output.write_text("\n".join([*page[:start], *lines, *page[end:]]))
    log(f"wrote the attacks of {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
