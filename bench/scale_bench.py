"""Benchmark 10 of ``make bench``: one master and a thousand machines, and one machine's shell runner.

How this works. *Fleets*: a real ``bats-master`` (``--policy self``, CurveZMQ on, ``heartbeat = 1s``,
``liveness = 5s``) runs a bag on a ``manual`` cluster of M seats, and ``bench/emulate.py`` processes
(about 250 machines each) join it as M emulated machines speaking the real protocol: no-op tasks
(answered at once) and ``sleep 1`` tasks (a timer per machine). Each fleet gives tasks/s (results
recorded over the window from the first result to the last, as the emulators saw them), the
master's CPU per task and peak RSS (its report), the longest gap between two heartbeats of the
master any machine saw, and false losses (machines the master released for any reason but the end
of the bag, or told ``unknown``). *One machine*: the master's CPU per no-op task with 2 real no-op
workers (a 20,000-task bag) and its start-up (10 ``true``, whole command, wall and the process tree's
CPU), each alternating with the code of :data:`BASE_COMMIT` (extracted by ``git archive``, first on
``PYTHONPATH``), so that the ratio comes from one run on one load; its peak RSS at 200,000 no-op
tasks; and 10,000 ``true`` on 2 workers beside ``xargs -P2`` and GNU ``parallel -j2`` (alternating
order each repeat), wall time of each whole command.
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sections import Section, fmt, median, verdict

BENCH_DIR = Path(__file__).resolve().parent
EMULATE = BENCH_DIR / "emulate.py"
PER_EMULATOR = 250  # emulated machines per emulator process
PER_SOURCE = 50  # ... and per loopback address they connect from (bench/emulate.py --source-from)
FLEETS = (200, 500, 1000)

# the targets (the "done when")
T_FLEET_TPS = 15_000  # no-op tasks/s at 1,000 machines
T_BEAT_GAP_S = 2.0
T_CPU_US = 15.0  # master CPU per no-op task, 2 workers
T_XARGS = 1.3  # BaTS at least this much faster than xargs -P2 on 10,000 true
T_PARALLEL = 3.0  # ... and than GNU parallel -j2
T_START_S = 0.6  # 10 true, whole command
T_RSS_MIB = 80.0  # peak RSS at 200,000 tasks
# the code before this round's cuts of the per-task and start-up costs, measured beside this tree
BASE_COMMIT = "6449329cef1a9edb6462122255cf62db21e92e17"


def _base(work: Path, log: Callable[[str], None], compiled: bool = True) -> Path | None:
    """``BASE_COMMIT``'s packages (see :mod:`attack_bench`), their bytecode written (or a copy without
    it); None without git."""
    from attack_bench import _base_tree

    base = _base_tree(work, BASE_COMMIT, "" if compiled else "-raw")
    if base is None:
        log("scale: no git: the code before this round is not measured beside this tree")
        return None
    if compiled:
        for folder in (base / "bats").iterdir():  # links to the extracted folders, which compileall does not follow
            compileall.compile_dir(str(folder.resolve()), quiet=1)
    return base


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_file(path: Path, master: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if master.poll() is not None:
            raise RuntimeError(f"the master exited ({master.returncode}) before writing {path.name}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {path} after {timeout_s:.0f} s")
        time.sleep(0.02)


def run_fleet(work: Path, bats_master: Path, machines: int, task_s: float, n_tasks: int) -> dict[str, Any]:
    """One bag on ``machines`` emulated machines; the figures of one fleet row."""
    import zmq.auth

    run = Path(tempfile.mkdtemp(prefix=f"fleet-{machines}-", dir=work))
    config = run / "fleet.toml"
    config.write_text(f'[master]\nlisten = "tcp://127.0.0.1:{_free_port()}"\nheartbeat = "1s"\nliveness = "5s"\n'
                      'boot_timeout = "10m"\n\n'
                      f'[clusters.emu]\nprovisioner = "manual"\nmax = {machines}\nprice = 0\n')
    bag = run / "bag.txt"
    command = "true" if task_s <= 0 else f"sleep {task_s:g}"
    bag.write_text(f"{command}\n" * n_tasks)
    state = run / "state"
    endpoint = config.read_text().split('"')[1]
    emulators: list[tuple[subprocess.Popen, Path]] = []
    with open(run / "master.log", "wb") as master_log:
        master = subprocess.Popen([str(bats_master), "--bag", str(bag), "--config", str(config), "--state-dir",
                                   str(state), "--quiet", "--policy", "self"], stdout=subprocess.DEVNULL,
                                  stderr=master_log)
        try:
            _wait_file(state / "master.key", master)
            _wait_file(state / "join" / "emu.token", master)
            public, _secret = zmq.auth.load_certificate(str(state / "master.key"))
            names = [f"e{i}" for i in range(1, machines + 1)]
            for start in range(0, machines, PER_EMULATOR):
                out = run / f"emulator-{start}.json"
                proc = subprocess.Popen([sys.executable, str(EMULATE), "--master", endpoint, "--server-key",
                                         public.decode("ascii"), "--token-file", str(state / "join" / "emu.token"),
                                         "--cluster", "emu", "--names", ",".join(names[start:start + PER_EMULATOR]),
                                         "--task-s", str(task_s), "--out", str(out),
                                         "--source-from", str(2 + start // PER_SOURCE)])
                emulators.append((proc, out))
            code = master.wait(timeout=1800)
        finally:
            if master.poll() is None:
                master.kill()
                master.wait()
            for proc, _out in emulators:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            for proc, _out in emulators:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    stats = [json.loads(out.read_text()) for _proc, out in emulators if out.exists()]
    report = json.loads((state / "report.json").read_text()) if (state / "report.json").exists() else None
    row: dict[str, Any] = {"machines": machines, "task_s": task_s, "tasks": n_tasks, "exit": code,
                           "emulators": len(emulators), "reported": len(stats)}
    if report is None or len(stats) != len(emulators) or all(s["first_result"] is None for s in stats):
        row["error"] = (run / "master.log").read_text(errors="replace").strip().splitlines()[-3:]
        shutil.rmtree(run, ignore_errors=True)
        return row
    done = report["tasks"]["done"]
    first = min(s["first_result"] for s in stats if s["first_result"] is not None)
    last = max(s["last_result"] for s in stats if s["last_result"] is not None)
    lost = [m for m in report["machines"] if m["release_reason"] != "bag done"]
    row.update(done=done, status=report["status"], window_s=last - first, tps=done / max(last - first, 1e-9),
               makespan_s=report["makespan_s"], cpu_us=report["master"]["cpu_s"] / max(done, 1) * 1e6,
               rss_mib=report["master"]["peak_rss_mib"], beat_gap_s=max(s["beat_gap_s"] for s in stats),
               frame_gap_s=max(s["frame_gap_s"] for s in stats), welcomed=sum(s["welcomed"] for s in stats),
               false_losses=len(lost) + sum(s["unknown"] for s in stats),
               silences=sum(s["silences"] for s in stats), lost_reasons=sorted({m["release_reason"] for m in lost}))
    shutil.rmtree(run, ignore_errors=True)
    return row


def _whole(argv: list[str], stdin: Path | None = None) -> float | None:
    """Wall seconds of a command run to completion; None when it failed."""
    with contextlib.ExitStack() as stack:
        given = stack.enter_context(open(stdin, "rb")) if stdin else subprocess.DEVNULL
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=given, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                              timeout=1800)
        wall = time.perf_counter() - t0
    return wall if proc.returncode == 0 else None


def bench_scale(work: Path, bats_master: Path, run_bats: Callable[..., Any],
                write_noop_config: Callable[..., Path], log: Callable[[str], None], quick: bool) -> Section:
    sec = Section("10. Scale: a thousand emulated machines, and the shell runner on one machine")
    t = sec.text
    noop_tasks = 30_000 if quick else 100_000
    fleets = (200,) if quick else FLEETS
    rows = []
    for machines in fleets:
        for task_s, n in ((0.0, noop_tasks), (1.0, 3 * machines)):
            log(f"scale: {machines} emulated machines, {n:,} {'no-op' if task_s == 0 else 'sleep 1'} tasks")
            rows.append(run_fleet(work, bats_master, machines, task_s, n))
            log(f"scale: {_row_line(rows[-1])}")
    t += [f"Fleets: `bats-master --policy self` (CurveZMQ, `heartbeat = \"1s\"`, `liveness = \"5s\"`) on a `manual` "
          f"cluster; `bench/emulate.py` processes ({PER_EMULATOR} machines each, connecting from loopback addresses "
          f"of {PER_SOURCE} machines each, as machines on separate hosts would) are the machines. No-op bags of "
          f"{noop_tasks:,} tasks; `sleep 1` bags of 3 tasks per machine. tasks/s: results over the window from the "
          "first result to the last; master CPU and RSS: its report; beat gap: the longest time between two "
          "heartbeats of the master any machine saw (any frame: the longest silence); false losses: machines "
          "released for any reason but the bag's end, or told `unknown`; joined: machines welcomed before the bag "
          "ended (the master lets at most 512 connections wait for their hello at once, so a fleet joins over "
          "a few seconds).", "",
          "| machines | joined | tasks | done | tasks/s | master CPU µs/task | peak RSS MiB | beat gap s "
          "| longest silence s | false losses | makespan s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kind = "no-op" if r["task_s"] == 0 else "sleep 1"
        if "error" in r:
            t.append(f"| {r['machines']:,} | | {r['tasks']:,} {kind} | error: {' / '.join(r['error'])} |||||||")
            continue
        t.append(f"| {r['machines']:,} | {r['welcomed']:,} | {r['tasks']:,} {kind} | {r['done']:,} | {r['tps']:,.0f} | {r['cpu_us']:.1f} "
                 f"| {r['rss_mib']:.0f} | {r['beat_gap_s']:.2f} | {r['frame_gap_s']:.2f} | {r['false_losses']}"
                 + (f" ({', '.join(r['lost_reasons'])})" if r["lost_reasons"] else "") + f" | {r['makespan_s']:.1f} |")
    t.append("")
    big = [r for r in rows if r["machines"] == max(fleets) and "error" not in r]
    big_noop = next((r for r in big if r["task_s"] == 0), None)
    tps_ok = None if big_noop is None else big_noop["tps"] >= T_FLEET_TPS
    gap = max((r["beat_gap_s"] for r in rows if "error" not in r), default=None)
    gap_ok = None if gap is None else gap <= T_BEAT_GAP_S
    losses = sum(r.get("false_losses", 0) for r in rows) if all("error" not in r for r in rows) else None
    sec.summary += [
        (f"scale: no-op tasks/s, {max(fleets):,} machines", fmt(big_noop and big_noop["tps"]), f"≥ {T_FLEET_TPS:,}",
         verdict(tps_ok)),
        ("scale: longest gap between heartbeats", fmt(gap, ".2f", " s"), f"≤ {T_BEAT_GAP_S:g} s", verdict(gap_ok)),
        ("scale: false losses (every fleet)", fmt(losses, ","), "0", verdict(None if losses is None else losses == 0)),
    ]

    # one machine: CPU per no-op task and start-up, each beside the code before this round's cuts
    # (BASE_COMMIT, alternating), and RSS at 200k
    repeats = 1 if quick else 3
    cpu_tasks = 20_000
    noop_bag = work / "scale-noop.txt"
    noop_bag.write_text("true\n" * cpu_tasks)
    config = write_noop_config(work / "scale-noop.toml", 2)
    ten = work / "scale-ten.txt"
    ten.write_text("true\n" * 10)
    base = _base(work, log)
    trees: list[tuple[str, Path | None]] = [("this", None)] + ([("base", base)] if base is not None else [])
    # the start-up also of the base without its bytecode: how an editable install ran under PYTHONDONTWRITEBYTECODE
    # before bench/run.py and make install wrote it (every module compiled on every start)
    raw = _base(work, log, compiled=False) if base is not None else None
    start_trees = trees + ([("raw", raw)] if raw is not None else [])
    cpus: dict[str, list[float]] = {name: [] for name, _ in trees}
    for rep in range(repeats):  # the 10-task run's CPU is the fixed cost (imports, journal, workers' start)
        for name, tree in trees if rep % 2 == 0 else trees[::-1]:
            small = run_bats(work, ten, ["--config", str(config)], base=tree)
            r = run_bats(work, noop_bag, ["--config", str(config)], base=tree)
            if r.ok and small.ok:
                cpus[name].append((r.report["master"]["cpu_s"] - small.report["master"]["cpu_s"])
                                  / (cpu_tasks - 10) * 1e6)
    cpu = median(cpus["this"])
    starts: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in start_trees}  # (wall, tree CPU)
    for rep in range(5 if not quick else 2):
        for name, tree in start_trees if rep % 2 == 0 else start_trees[::-1]:
            run = run_bats(work, ten, [], base=tree, bytecode=name != "raw")
            if run.ok:
                starts[name].append((run.wall_s, run.cpu_tree_s))
    start = median([w for w, _c in starts["this"]])
    big_n = 20_000 if quick else 200_000
    big_bag = work / "scale-big.txt"
    big_bag.write_text("true\n" * big_n)
    big_run = run_bats(work, big_bag, ["--config", str(config)])
    rss = big_run.report["master"]["peak_rss_mib"] if big_run.ok else None

    def ratio(name: str, values: dict[str, list[float]]) -> float | None:
        mine, theirs = median(values.get("this", [])), median(values.get(name, []))
        return theirs / mine if mine and theirs else None

    cpu_ratio = ratio("base", cpus)
    start_walls = {name: [w for w, _c in v] for name, v in starts.items()}
    start_cpus = {name: [c for _w, c in v] for name, v in starts.items()}
    start_ratio, start_cpu_ratio = ratio("base", start_walls), ratio("base", start_cpus)
    raw_ratio = ratio("raw", start_walls)
    t += [f"One machine, this tree beside `{BASE_COMMIT[:10]}` (the code before the cuts of this round: the "
          "protocol's check and its unpackers, the events log's flattening, the journal's binding of output tails, "
          "the server's glue; extracted by `git "
          "archive` and run first on `PYTHONPATH`, through its own `python -m bats.master.cli`), alternating; both "
          "with their bytecode written first (`bench/run.py` compiles the installed packages before it times "
          "anything, as an install from a wheel has them); the start-up also of the base without bytecode "
          "(`PYTHONDONTWRITEBYTECODE=1`, as an editable install ran in such a shell before).", "",
          f"Master CPU per no-op task, 2 no-op workers, ({cpu_tasks:,}-task run − 10-task run) / {cpu_tasks - 10:,}; "
          f"start-up, `bats-master --bag` of 10 `true` (whole command, default local workers; the CPU is the "
          "whole process tree's). Load average at the start of this part: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}.", "",
          "| code | CPU µs/task (each repeat) | median | start-up s (each) | median | start-up CPU s (median) |",
          "|---|---|---|---|---|---|"]
    for name, _tree in start_trees:
        label = {"this": "this tree", "base": f"`{BASE_COMMIT[:10]}`",
                 "raw": f"`{BASE_COMMIT[:10]}` without bytecode (start-up only)"}[name]
        got = cpus.get(name, [])
        t.append(f"| {label} | {', '.join(f'{c:.1f}' for c in got)} | {fmt(median(got), '.1f')} "
                 f"| {', '.join(f'{w:.2f}' for w in start_walls[name])} | {fmt(median(start_walls[name]), '.2f')} "
                 f"| {fmt(median(start_cpus[name]), '.3f')} |")
    t += ["", f"Base / this tree: CPU per task {fmt(cpu_ratio, '.2f', '×')}, start-up wall {fmt(start_ratio, '.2f', '×')}, "
          f"start-up CPU {fmt(start_cpu_ratio, '.2f', '×')}; the base without bytecode / this tree, start-up "
          f"wall: {fmt(raw_ratio, '.2f', '×')}. Peak RSS of the master at {big_n:,} no-op tasks on 2 "
          f"workers: {fmt(rss, '.1f')} MiB.", ""]
    sec.summary += [
        ("scale: master CPU per no-op task, 2 workers", fmt(cpu, ".1f", " µs"), f"≤ {T_CPU_US:g} µs",
         verdict(None if cpu is None else cpu <= T_CPU_US)),
        (f"scale: master CPU per no-op task, `{BASE_COMMIT[:10]}` / this", fmt(cpu_ratio, ".2f", "×"), "(measured)",
         "n/a"),
        ("scale: start-up, 10 true", fmt(start, ".2f", " s"), f"≤ {T_START_S:g} s",
         verdict(None if start is None else start <= T_START_S)),
        (f"scale: start-up, 10 true, `{BASE_COMMIT[:10]}` / this (wall; tree CPU)",
         f"{fmt(start_ratio, '.2f', '×')}; {fmt(start_cpu_ratio, '.2f', '×')}", "(measured)", "n/a"),
        (f"scale: start-up, 10 true, `{BASE_COMMIT[:10]}` without bytecode / this (wall)",
         fmt(raw_ratio, ".2f", "×"), "(measured)", "n/a"),
        (f"scale: peak RSS at {big_n:,} tasks", fmt(rss, ".1f", " MiB"), f"≤ {T_RSS_MIB:g} MiB",
         verdict(None if rss is None or quick else rss <= T_RSS_MIB)),
    ]

    # 10,000 true: bats, xargs, parallel
    shell_n = 2_000 if quick else 10_000
    shell_bag = work / "scale-true.txt"
    shell_bag.write_text("true\n" * shell_n)
    parallel = shutil.which("parallel")
    runners: list[tuple[str, Callable[[], float | None]]] = [
        ("bats", lambda: (lambda r: r.wall_s if r.ok else None)(run_bats(work, shell_bag, ["--workers", "2"]))),
        ("xargs", lambda: _whole(["xargs", "-d", "\\n", "-n1", "-P2", "sh", "-c"], stdin=shell_bag)),
    ]
    if parallel:
        runners.append(("parallel", lambda: _whole([parallel, "--will-cite", "-j2"], stdin=shell_bag)))
    bash = shutil.which("bash")
    if bash:  # where /bin/sh is bash (Fedora, RHEL, Amazon Linux): the same bag, both sides under bash
        bash_config = work / "scale-bash.toml"  # --workers 2's cluster, with the shell named
        bash_config.write_text('[master]\nshell = "bash"\n\n[clusters.local]\nprovisioner = "local"\nmax = 2\n'
                               'price = 0\natu = "1h"\nstartup = "0s"\n')
        runners += [
            ("bats, bash", lambda: (lambda r: r.wall_s if r.ok else None)(
                run_bats(work, shell_bag, ["--config", str(bash_config)]))),
            ("xargs, bash", lambda: _whole(["xargs", "-d", "\\n", "-n1", "-P2", bash, "-c"], stdin=shell_bag)),
        ]
    walls: dict[str, list[float]] = {name: [] for name, _ in runners}
    for rep in range(repeats):
        order = runners if rep % 2 == 0 else list(reversed(runners))
        for name, runner in order:
            if name == "parallel" and walls[name]:
                continue  # GNU parallel takes minutes on this bag: one run of it is enough for the ratio
            wall = runner()
            if wall is not None:
                walls[name].append(wall)
        log("scale: shell rep " + ", ".join(f"{n} {w[-1]:.2f}s" for n, w in walls.items() if w))
    med = {name: median(w) for name, w in walls.items()}
    xr = med["xargs"] / med["bats"] if med["bats"] and med["xargs"] else None
    pr = med.get("parallel") / med["bats"] if med["bats"] and med.get("parallel") else None
    br = med["xargs, bash"] / med["bats, bash"] if med.get("bats, bash") and med.get("xargs, bash") else None
    t += [f"{shell_n:,} × `true` on 2 workers, whole command each, {repeats} repeat(s) (GNU parallel, which takes "
          "minutes, once), the order alternating: "
          f"BaTS `bats-master --bag BAG --workers 2`; `xargs -d '\\n' -n1 -P2 sh -c < BAG`; "
          + ("`parallel --will-cite -j2 < BAG`." if parallel else "GNU parallel **not installed** (skipped).")
          + (" Under bash: BaTS with `[master] shell = \"bash\"` (the same local cluster of 2 written out), "
             "and `xargs -d '\\n' -n1 -P2 bash -c < BAG`." if bash else " bash **not installed** (skipped)."), "",
          "| runner | wall s (each repeat) | median s | tasks/s |", "|---|---|---|---|"]
    for name, w in walls.items():
        t.append(f"| {name} | {', '.join(f'{x:.2f}' for x in w)} | {fmt(med[name], '.2f')} "
                 f"| {fmt(shell_n / med[name] if med[name] else None)} |")
    t.append("")
    sec.summary += [
        (f"scale: {shell_n:,} true, xargs wall / BaTS wall", fmt(xr, ".2f", "×"), f"≥ {T_XARGS:g}×",
         verdict(None if xr is None else xr >= T_XARGS)),
        (f"scale: {shell_n:,} true, parallel wall / BaTS wall", fmt(pr, ".2f", "×"), f"≥ {T_PARALLEL:g}×",
         verdict(None if pr is None else pr >= T_PARALLEL)),
        (f"scale: {shell_n:,} true under bash, xargs bash -c wall / BaTS wall", fmt(br, ".2f", "×"), "(measured)",
         "n/a"),
    ]
    sec.medians.update(fleet_tps=big_noop and big_noop["tps"], cpu_us=cpu, start_s=start, rss_mib=rss)
    return sec


def _row_line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"error: {' / '.join(r['error'])}"
    return (f"{r['done']:,} done, {r['tps']:,.0f} tasks/s, {r['cpu_us']:.1f} µs/task, {r['rss_mib']:.0f} MiB, "
            f"beat gap {r['beat_gap_s']:.2f} s, silence {r['frame_gap_s']:.2f} s, {r['false_losses']} false losses")


def main(argv: list[str] | None = None) -> int:
    """``python bench/scale_bench.py MACHINES TASK_S N``: one fleet, its figures as JSON (for trying)."""
    args = sys.argv[1:] if argv is None else argv
    machines, task_s, n = int(args[0]), float(args[1]), int(args[2])
    with tempfile.TemporaryDirectory(prefix="bats-scale-") as tmp:
        row = run_fleet(Path(tmp), Path(sys.executable).parent / "bats-master", machines, task_s, n)
    print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
