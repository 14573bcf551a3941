"""``make bench``: BaTS master benchmarks with the real ``bats-master`` and real worker processes.

    .venv/bin/python bench/run.py [--repeats N] [--quick] [--full] [--only 1,2,3,6] [--variants 2:auto,2:1,4:auto,2:auto:8]
                                  [--output FILE]

1. No-op dispatch throughput: 50,000 ``true`` tasks on a ``noop`` local cluster, for each variant
   (max workers, ``[master] prefetch``): by default max=2 prefetch=auto (the default configuration,
   no ``prefetch`` key), max=2 prefetch=1 (the issue's original design, written explicitly) and
   max=4 prefetch=auto, and max=2 prefetch=auto slots=8 (two machines of 8 slots: each worker holds
   8 - 1 + 1 + prefetch tasks); each beside its transport floor, a bare pyzmq ROUTER with the same workers
   and tasks in flight (``bench/zmq_floor.py``; 16 for auto, whose depth reaches its maximum with
   no-op tasks), alternating within every repeat.
2. Real shell tasks: 2,000 ``true`` tasks with ``--workers 2`` against ``parallel -j2``.
3. A 1,000,000-task bag: the master's start-up before the first dispatch (time, peak RSS), in a
   fresh process (``bench/startup_probe.py``); with ``--full`` also a real noop run of that bag.
4. BaTS planning time: ``Planner(...).options()`` for each scenario of seed 000 §4.1
   (``deploy/examples/paper/``), N = 1,000, in-process.
5. ``bats-sim``: wall time of 1,000 tasks on 64 machines (scenario S3-4) and of 1,000,000 tasks on
   1,000 machines (100,000 with ``--quick``), as subprocesses.
6. BaTS monitoring tick: one ``bats.master.core.planning.monitor.check(...)`` over 1,000 machines, from a
   ``MachineTable`` (the target) and from ``MachineView`` objects (conversion included), and
   ``plan_releases(...)``, in-process.
7. Pareto planning on seed 003's 40-60-100 mix (``bench/pareto_bench.py``): the exact front, the
   GA with a population of 2,000, and re-planning after a spot price change, CPU time in-process.
8. Cost of encryption (``bench/curve_bench.py``): 20,000 no-op tasks with the default CurveZMQ
   transport and with ``--insecure``, alternating; medians and their ratio from the same run.
9. The deadline ILP (``bench/deadline_bench.py``): seed 004's program for 1,000 tasks on five
   types in 12 intervals, CPU time in-process.
10. Scale (``bench/scale_bench.py``): 200, 500 and 1,000 emulated machines (``bench/emulate.py``)
    on one master, no-op and ``sleep 1`` bags; the master's CPU per no-op task with 2 workers, its
    start-up and its RSS at 200,000 tasks; 10,000 ``true`` beside ``xargs -P2`` and GNU parallel.
12. Options with odds (``bench/odds_bench.py``): a 5,000-task bag on 5 clusters sampled in virtual
    time, the time from the end of its sample to the options with their odds (goal: 5 s); and
    ``bats-sim`` on 50,000 tasks and 1,000 machines, whose every monitoring step re-estimates the
    odds: its peak RSS and wall time.

Writes ``bench/RESULTS.md`` (``--quick`` writes ``bench/out/RESULTS-quick.md`` unless ``--output``
is given, so a smoke run never replaces the real results). Every run gets a fresh temporary
``--state-dir`` and ``--quiet``. Shared, noisy machines: every figure is the median of the repeats.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sections import Section, fmt, median, verdict

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
BIN_DIR = Path(sys.executable).parent
BATS_MASTER = BIN_DIR / "bats-master"
PROBE = BENCH_DIR / "startup_probe.py"
FLOOR = BENCH_DIR / "zmq_floor.py"
RUN_TIMEOUT_S = 1800

# Targets
T_NOOP_TASKS_PER_S = 10_000
T_NOOP_CPU_US = 50.0
T_SHELL_TASKS_PER_S = 800
T_BIG_START_S = 3.0
T_BIG_RSS_MIB = 250.0

PARSL_PUBLISHED_TASKS_PER_S = 1_200  # published figure for Parsl's ZeroMQ executor, not measured here

AUTO = "auto"  # ``[master] prefetch = "auto"``: the default, what a config without the key gets
DEFAULT_PREFETCH = AUTO
MAX_PREFETCH = 15  # as bats.common.config.MAX_PREFETCH
AUTO_PREFETCH_MAX = 15  # as bats.common.config.AUTO_PREFETCH_MAX: auto's prefetch for tasks under 10 ms
DEFAULT_VARIANTS = "2:auto,2:1,4:auto,2:auto:8"  # benchmark 1: max:prefetch[:slots]
N_NOOP = 50_000  # benchmark 1's bag (100,000 before it ran three variants and their floors)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- running things
@dataclass
class Run:
    ok: bool
    wall_s: float
    cpu_tree_s: float  # CPU of the command and every descendant it waited for
    report: dict[str, Any] | None = None
    error: str = ""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], stdin_path: Path | None = None, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> tuple[int, float, float, str]:
    """Run argv to completion; return (exit code, wall seconds, CPU seconds of its tree, stderr tail)."""
    with contextlib.ExitStack() as stack:
        stdin = stack.enter_context(open(stdin_path, "rb")) if stdin_path else subprocess.DEVNULL
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              cwd=cwd, timeout=RUN_TIMEOUT_S, check=False, env=env)
        wall = time.perf_counter() - t0
        cpu = _children_cpu() - cpu0
    tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
    return proc.returncode, wall, cpu, " / ".join(tail)


def run_bats(work: Path, bag: Path, extra: list[str], base: Path | None = None, bytecode: bool = True) -> Run:
    """One ``bats-master`` run in a fresh state dir under ``work``; the state dir is removed after.
    With ``base`` (a folder holding other code's ``bats`` packages), that code runs instead: first on
    ``PYTHONPATH``, started through its own ``python -m bats.master.cli`` (its workers inherit the path);
    without ``bytecode`` it runs with ``PYTHONDONTWRITEBYTECODE=1``, so code without it compiles on every start."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    shutil.rmtree(state)  # bats-master creates it; it must not hold a run
    command, env = [str(BATS_MASTER)], None
    if base is not None:
        command, env = [sys.executable, "-m", "bats.master.cli"], {**os.environ, "PYTHONPATH": str(base)}
    if not bytecode:
        env = {**(env or os.environ), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        code, wall, cpu, err = timed([*command, "--bag", str(bag), "--state-dir", str(state),
                                      "--quiet", *extra], env=env)
        report = None
        report_path = state / "report.json"
        if report_path.exists():
            report = json.loads(report_path.read_text())
        ok = code == 0 and report is not None and report.get("status") == "done"
        error = "" if ok else f"exit {code}: {err or 'no report'}"
        return Run(ok, wall, cpu, report, error)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def compile_bytecode(*trees: Path) -> None:
    """Write the bytecode of the installed ``bats`` packages (and of ``trees``), as an install from a
    wheel has it: an editable install leaves it to the first import, and a shell with
    ``PYTHONDONTWRITEBYTECODE`` set would have every timed run compile its modules again (about
    0.2 s of every start on this machine)."""
    import bats.master

    for tree in (Path(bats.master.__file__).parent.parent, *trees):  # bats/ as installed (the editable link tree)
        compileall.compile_dir(str(tree), quiet=1)


def write_bag(path: Path, lines: Callable[[int], str], n: int) -> Path:
    with open(path, "w") as out:
        out.writelines(f"{lines(i)}\n" for i in range(1, n + 1))
    return path


def write_noop_config(path: Path, max_workers: int, prefetch: int | str = DEFAULT_PREFETCH, slots: int = 1) -> Path:
    """A noop cluster's config; ``prefetch = P`` is written for an integer P, nothing for auto (the default);
    ``slots = K`` for K > 1."""
    master = f"[master]\nprefetch = {prefetch}\n\n" if prefetch != AUTO else ""
    path.write_text(
        "# bench: one local cluster whose workers skip the command and report at once\n"
        + master
        + "[clusters.local]\n"
        'provisioner = "local"\n'
        f"max = {max_workers}\n"
        "price = 0\n"
        "noop = true\n"
        + (f"slots = {slots}\n" if slots > 1 else "")
    )
    return path


@dataclass
class Repeats:
    """Up to ``most`` repeats; past ``least`` a repeat starts only if it should end before ``deadline``
    (``time.monotonic()``), judged by the mean duration of the repeats so far. No deadline: exactly ``most``."""

    most: int
    least: int
    deadline: float | None = None
    ran: int = 0
    cut: bool = False

    def __iter__(self):
        started = time.monotonic()
        for rep in range(1, self.most + 1):
            if self.deadline is not None and rep > self.least:
                mean = (time.monotonic() - started) / (rep - 1)
                if time.monotonic() + mean > self.deadline:
                    self.cut = True
                    log(f"stopping after {rep - 1} repeats to stay within the time budget")
                    return
            yield rep
            self.ran = rep

    def describe(self) -> str:
        if self.cut:
            return f"{self.ran} repeats (of up to {self.most}: more would have broken the time budget)"
        return f"{self.ran} repeat{'s' if self.ran != 1 else ''}"


# ---------------------------------------------------------------------------- benchmarks
@dataclass(frozen=True)
class Variant:
    """One configuration of benchmark 1: ``max`` noop workers and ``[master] prefetch``, ``"auto"`` or an
    integer P (each worker then holds 1 + P tasks)."""

    max: int
    prefetch: int | str = DEFAULT_PREFETCH
    slots: int = 1

    @property
    def label(self) -> str:
        return f"max={self.max} prefetch={self.prefetch}" + (f" slots={self.slots}" if self.slots > 1 else "")

    @property
    def depth(self) -> int:
        """Tasks in flight per worker, the transport floor's D: K + P, or for auto K + AUTO_PREFETCH_MAX
        (with no-op tasks the core's adaptive depth reaches its maximum after the first result)."""
        return self.slots + (AUTO_PREFETCH_MAX if self.prefetch == AUTO else int(self.prefetch))


def parse_variants(text: str) -> list[Variant]:
    """``"2:auto,2:1,4:auto,2:auto:8"`` (max:prefetch[:slots], prefetch ``auto`` or 0-15; a bare ``max`` means
    auto) -> variants."""
    variants: list[Variant] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        max_text, _, rest = item.partition(":")
        prefetch_text, _, slots_text = rest.partition(":")
        prefetch_text = prefetch_text.strip().lower()
        try:
            prefetch = AUTO if prefetch_text in ("", AUTO) else int(prefetch_text)
            v = Variant(int(max_text), prefetch, int(slots_text) if slots_text.strip() else 1)
        except ValueError:
            raise ValueError(f"expected MAX:auto, MAX:PREFETCH or MAX, such as 2:auto or 2:1, got {item!r}") from None
        if v.max < 1 or (v.prefetch != AUTO and not 0 <= int(v.prefetch) <= MAX_PREFETCH):
            raise ValueError(f"{item!r}: max must be at least 1 and prefetch auto or between 0 and {MAX_PREFETCH}")
        if v in variants:
            raise ValueError(f"{item!r} is listed twice")
        variants.append(v)
    if not variants:
        raise ValueError("no variants given")
    return variants


def default_variant(variants: list[Variant]) -> Variant | None:
    """The variant that is the default configuration: prefetch left at its default (auto, no key
    written), and preferably ``max = 2``, the worker count of benchmark 2 and of the full big-bag run."""
    plain = [v for v in variants if v.prefetch == DEFAULT_PREFETCH and v.slots == 1]
    return next((v for v in plain if v.max == 2), plain[0] if plain else None)


def run_floor(variant: Variant, round_trips: int) -> dict[str, Any]:
    """One run of ``bench/zmq_floor.py`` with W = max and D = ``variant.depth``, in a fresh process."""
    argv = [sys.executable, str(FLOOR), "--workers", str(variant.max), "--depth", str(variant.depth),
            "--round-trips", str(round_trips)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"floor_ok": False, "floor_error": "timed out"}
    if proc.returncode != 0:
        tail = " / ".join(proc.stderr.strip().splitlines()[-2:])
        return {"floor_ok": False, "floor_error": f"exit {proc.returncode}: {tail}"}
    out = json.loads(proc.stdout)
    return {"floor_ok": True, "floor_error": "", "floor_s": out["seconds"], "floor_rtps": out["rt_per_s"],
            "floor_cpu": out["cpu_s"], "floor_us": out["us_cpu_per_rt"]}


def _noop_bats(work: Path, bag: Path, small: Path, small_n: int, n_tasks: int, config: Path,
               row: dict[str, Any]) -> None:
    base = run_bats(work, small, ["--config", str(config)])
    big = run_bats(work, bag, ["--config", str(config)])
    row.update(ok=base.ok and big.ok, error=big.error or base.error)
    if row["ok"]:
        assert big.report is not None and base.report is not None
        makespan = big.report["makespan_s"]
        cpu, base_cpu = big.report["master"]["cpu_s"], base.report["master"]["cpu_s"]
        row.update(
            makespan=makespan, tps=n_tasks / makespan, cpu=cpu, base_cpu=base_cpu,
            us_per_task=(cpu - base_cpu) / (n_tasks - small_n) * 1e6,
            us_raw=cpu / n_tasks * 1e6, rss=big.report["master"]["peak_rss_mib"],
            wall=big.wall_s, tree_cpu=big.cpu_tree_s,
        )


def bench_noop(work: Path, repeats: Repeats, n_tasks: int, variants: list[Variant]) -> Section:
    sec = Section("1. No-op dispatch throughput", repeats=repeats)
    bag = write_bag(work / "noop-bag.txt", lambda i: "true", n_tasks)
    small_n = 10
    small = write_bag(work / "noop-bag-10.txt", lambda i: "true", small_n)
    configs = {v: write_noop_config(work / f"noop-{v.max}-{v.prefetch}-{v.slots}.toml", v.max, v.prefetch, v.slots)
               for v in variants}
    default = default_variant(variants)
    rows: dict[Variant, list[dict[str, Any]]] = {v: [] for v in variants}
    steps = [(v, kind) for v in variants for kind in ("bats", "floor")]
    for rep in repeats:
        order = steps if rep % 2 else list(reversed(steps))  # alternate, so drift hits all alike
        current = {v: {"rep": rep, "ok": False, "error": "not run", "floor_ok": False} for v in variants}
        for v, kind in order:
            row = current[v]
            if kind == "bats":
                _noop_bats(work, bag, small, small_n, n_tasks, configs[v], row)
                log(f"noop {v.label} rep {rep}: " + (f"{row['tps']:,.0f} tasks/s, {row['us_per_task']:.1f} µs "
                                                     "CPU/task" if row["ok"] else f"FAILED {row['error']}"))
            else:
                row.update(run_floor(v, n_tasks))
                log(f"floor {v.label} rep {rep}: " + (f"{row['floor_rtps']:,.0f} round trips/s, "
                                                      f"{row['floor_us']:.1f} µs CPU/round trip"
                                                      if row["floor_ok"] else f"FAILED {row['floor_error']}"))
        for v in variants:
            row = current[v]
            if row["ok"] and row["floor_ok"]:
                row["tps_ratio"] = row["tps"] / row["floor_rtps"]
                row["cpu_ratio"] = row["us_per_task"] / row["floor_us"]
            rows[v].append(row)

    def name(v: Variant) -> str:
        return v.label + (" (default configuration)" if v == default else "")

    keys = ("makespan", "tps", "cpu", "base_cpu", "us_per_task", "us_raw", "rss", "wall", "tree_cpu")
    floor_keys = ("floor_s", "floor_rtps", "floor_cpu", "floor_us")
    med: dict[Variant, dict[str, float | None]] = {}
    for v in variants:
        ok_rows = [r for r in rows[v] if r["ok"]]
        floor_rows = [r for r in rows[v] if r["floor_ok"]]
        m = {k: median([r[k] for r in ok_rows]) for k in keys}
        m.update({k: median([r[k] for r in floor_rows]) for k in floor_keys})
        m["tps_ratio"] = m["tps"] / m["floor_rtps"] if m["tps"] and m["floor_rtps"] else None
        m["cpu_ratio"] = m["us_per_task"] / m["floor_us"] if m["us_per_task"] is not None and m["floor_us"] else None
        m["tps_ratio_paired"] = median([r["tps_ratio"] for r in rows[v] if "tps_ratio" in r])
        m["cpu_ratio_paired"] = median([r["cpu_ratio"] for r in rows[v] if "cpu_ratio" in r])
        med[v] = m

    def tps_ok(v: Variant) -> bool | None:
        return None if med[v]["tps"] is None else med[v]["tps"] >= T_NOOP_TASKS_PER_S

    def cpu_ok(v: Variant) -> bool | None:
        return None if med[v]["us_per_task"] is None else med[v]["us_per_task"] <= T_NOOP_CPU_US

    default_text = (
        f"**The default configuration is `{default.label}`**: no `[master] prefetch` key, so the default "
        f"`\"{AUTO}\"`, and {default.max} workers"
        + (", as `--workers 2` in benchmark 2. " if default.max == 2 else ". ")
        if default else f"None of these variants is the default configuration (`prefetch` {AUTO}). ")
    t = sec.text
    t += [
        f"Bag: {n_tasks:,} lines of `true`"
        + (f" ({N_NOOP:,} rather than 100,000 so that `make bench`, which runs {len(variants)} variants and a "
           "transport floor for each in every repeat, stays within about 5 minutes; the per-task figures do not "
           "depend on the bag size)" if n_tasks == N_NOOP else "")
        + ". Config: one `local` cluster, `max = N`, "
        "`price = 0`, `noop = true` (workers skip the command and report at once, so this measures the master's "
        "dispatch path: ZeroMQ, decode, core, journal); a variant with an integer `prefetch` P also sets "
        "`[master]` `prefetch = P` (each worker then holds 1 + P tasks; `prefetch = 1`, one running and one "
        f"prefetched, is the issue's original design), one with `prefetch={AUTO}` leaves the key out. "
        f"`{AUTO}` is the default: the master sends each worker one prefetched task while the recent mean task "
        f"runtime is 10 ms or more, and up to {AUTO_PREFETCH_MAX} while tasks are shorter, since then per-message "
        "costs, not the tasks, dominate. "
        "Command: `bats-master --bag BAG --config CFG --state-dir FRESH --quiet`. "
        + default_text
        + "Every variant is held to both targets.",
        "",
        "* **tasks/s** = tasks / report `makespan_s`.",
        (f"* **master CPU per task** = (report `master.cpu_s` of the {n_tasks:,}-task run − `master.cpu_s` of a "
        f"{small_n}-task run with the same config, run just before it) / ({n_tasks:,} − {small_n}). "
        "The small run's CPU is the fixed cost (interpreter start, imports, journal creation, starting and "
        "stopping workers), so subtracting it leaves only the cost that grows with the number of tasks. "
        "The raw figure (cpu_s / tasks, no subtraction) is shown too."),
        "* **tree CPU** = CPU of bats-master plus its workers (getrusage of waited-for children), for scale.",
        (f"* **transport floor** = `bench/zmq_floor.py --workers W --depth D --round-trips {n_tasks}` with "
        f"W = max and D = 1 + prefetch, or 1 + {AUTO_PREFETCH_MAX} = {1 + AUTO_PREFETCH_MAX} for `prefetch={AUTO}` "
        "(with no-op tasks the master's adaptive depth reaches its maximum after the first result): a bare pyzmq "
        "ROUTER on `tcp://127.0.0.1:*` and W worker processes, each a "
        "DEALER that answers every frame with a 60-byte frame at once; the ROUTER first sends D frames to each "
        f"worker, then answers every echo with one new frame, until {n_tasks:,} round trips are done. "
        "Round trips/s = round trips / seconds from the first send to the last echo; CPU per round trip = "
        "`getrusage(RUSAGE_SELF)` user + sys of the ROUTER's process over that span (its Python thread and "
        "ZeroMQ's I/O thread, counted the way `master.cpu_s` counts the master; worker start-up is not "
        "included)."),
        ("* **bats/floor** = the ratio of the medians (in brackets: the median of the per-repeat ratios, "
        "each bats run paired with the floor run of the same repeat). Throughput ratio < 1 and CPU ratio > 1 "
        "mean BaTS is that far from the floor."),
        ("* Order: odd repeats run the variants as listed, each bats run (small then big bag) before its floor "
        "run; even repeats run the whole sequence reversed, so drift on this shared machine hits all alike."),
        (f"* For scale: Parsl's ZeroMQ executor publishes about {PARSL_PUBLISHED_TASKS_PER_S:,} tasks/s "
        "(a published figure, not measured here)."),
        "",
        ("One task costs the master exactly one round trip (a `result` frame with `ask` comes in, one `task` frame "
        "goes out), and the floor does that and nothing else, so its figures are the best any pyzmq master "
        "speaking this protocol could reach on this machine with the same workers and tasks in flight. "
        "The difference between BaTS and the floor is the master's own work per task: decoding and validating "
        "the frame, the core's bookkeeping, the journal and the report (its noop workers also decode and encode "
        "msgpack where the echo workers do not, which on a machine with few cores takes CPU from the master)."),
        "",
        ("| variant | tasks/s | µs master CPU/task | floor round trips/s | floor µs CPU/round trip "
        "| bats/floor throughput | bats/floor CPU | ≥ 10,000 tasks/s | ≤ 50 µs/task |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in variants:
        m = med[v]
        t.append(f"| {name(v)} | **{fmt(m['tps'])}** | **{fmt(m['us_per_task'], '.1f')}** | {fmt(m['floor_rtps'])} "
                 f"| {fmt(m['floor_us'], '.1f')} | {fmt(m['tps_ratio'], '.2f', '×')} "
                 f"({fmt(m['tps_ratio_paired'], '.2f', '×')}) | {fmt(m['cpu_ratio'], '.2f', '×')} "
                 f"({fmt(m['cpu_ratio_paired'], '.2f', '×')}) | {verdict(tps_ok(v))} | {verdict(cpu_ok(v))} |")
    t.append("")
    if default is not None and med[default]["tps"]:
        others = [f"`{v.label}` {med[v]['tps'] / med[default]['tps']:.2f}×" for v in variants
                  if v != default and med[v]["tps"]]
        if others:
            t += [f"Throughput relative to the default configuration (same run, alternating): {', '.join(others)}.",
                  ""]

    for v in variants:
        m = med[v]
        t += [(f"**{name(v)}** ({v.max} noop workers, each holding up to {v.depth} tasks; floor W = {v.max}, "
              f"D = {v.depth})"), "",
              ("| repeat | makespan s | tasks/s | master CPU s | baseline CPU s | µs CPU/task (net) "
              "| µs CPU/task (raw) | master peak RSS MiB | wall s | tree CPU s | floor s | floor round trips/s "
              "| floor µs CPU/round trip |"),
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows[v]:
            floor = (f"{r['floor_s']:.2f} | {r['floor_rtps']:,.0f} | {r['floor_us']:.1f}" if r["floor_ok"]
                     else f"error: {r['floor_error']} | |")
            if not r["ok"]:
                t.append(f"| {r['rep']} | error: {r['error']} | | | | | | | | | {floor} |")
                continue
            t.append(f"| {r['rep']} | {r['makespan']:.2f} | {r['tps']:,.0f} | {r['cpu']:.2f} | {r['base_cpu']:.2f} "
                     f"| {r['us_per_task']:.1f} | {r['us_raw']:.1f} | {r['rss']:.1f} | {r['wall']:.2f} "
                     f"| {r['tree_cpu']:.2f} | {floor} |")
        if any(r["ok"] for r in rows[v]) or any(r["floor_ok"] for r in rows[v]):
            t.append(f"| **median** | **{fmt(m['makespan'], '.2f')}** | **{fmt(m['tps'])}** | {fmt(m['cpu'], '.2f')} "
                     f"| {fmt(m['base_cpu'], '.2f')} | **{fmt(m['us_per_task'], '.1f')}** | {fmt(m['us_raw'], '.1f')} "
                     f"| {fmt(m['rss'], '.1f')} | {fmt(m['wall'], '.2f')} | {fmt(m['tree_cpu'], '.2f')} "
                     f"| {fmt(m['floor_s'], '.2f')} | **{fmt(m['floor_rtps'])}** | **{fmt(m['floor_us'], '.1f')}** |")
        t.append("")
        t += [f"Target ≥ {T_NOOP_TASKS_PER_S:,} tasks/s: median {fmt(m['tps'])} → {verdict(tps_ok(v))}; "
              f"target ≤ {T_NOOP_CPU_US:.0f} µs master CPU per task: median {fmt(m['us_per_task'], '.1f', ' µs')} "
              f"→ {verdict(cpu_ok(v))}."
              + (f" That is {m['tps'] / PARSL_PUBLISHED_TASKS_PER_S:.1f}× Parsl's published figure." if m["tps"] else "")
              + f" Transport floor: {fmt(m['floor_rtps'])} round trips/s, {fmt(m['floor_us'], '.1f', ' µs')} CPU per "
              f"round trip; BaTS reaches {fmt(m['tps_ratio'], '.2f', '×')} the floor's throughput at "
              f"{fmt(m['cpu_ratio'], '.2f', '×')} its CPU per task.", ""]
        tag = " (default)" if v == default else ""
        sec.summary.append((f"noop {v.label}{tag}: tasks/s", fmt(m["tps"]), f"≥ {T_NOOP_TASKS_PER_S:,}",
                            verdict(tps_ok(v))))
        sec.summary.append((f"noop {v.label}{tag}: master CPU/task", fmt(m["us_per_task"], ".1f", " µs"),
                            f"≤ {T_NOOP_CPU_US:.0f} µs", verdict(cpu_ok(v))))
        sec.summary.append((f"noop {v.label}: transport floor (W={v.max}, D={v.depth})",
                            (f"{fmt(m['floor_rtps'])} rt/s, {fmt(m['floor_us'], '.1f', ' µs')}/rt; bats/floor "
                            f"{fmt(m['tps_ratio'], '.2f', '×')} throughput, {fmt(m['cpu_ratio'], '.2f', '×')} CPU"),
                            "(no target)", "n/a"))
        sec.medians[f"tps_{v.max}_{v.prefetch}"] = m["tps"]
    sec.medians["tps_default"] = med[default]["tps"] if default is not None else None
    return sec


def _shell_bats(work: Path, bag: Path, row: dict[str, Any]) -> None:
    r = run_bats(work, bag, ["--workers", "2"])
    row["bats_ok"], row["bats_error"] = r.ok, r.error
    if r.ok:
        assert r.report is not None
        row.update(bats_wall=r.wall_s, bats_makespan=r.report["makespan_s"], bats_cpu=r.cpu_tree_s,
                   bats_master_cpu=r.report["master"]["cpu_s"])


def _shell_parallel(parallel: str, bag: Path, row: dict[str, Any]) -> None:
    code, wall, cpu, err = timed([parallel, "--will-cite", "-j2"], stdin_path=bag)
    row["par_ok"] = code == 0
    row["par_error"] = "" if code == 0 else f"exit {code}: {err}"
    if code == 0:
        row.update(par_wall=wall, par_cpu=cpu)


def bench_shell(work: Path, repeats: Repeats, n_tasks: int) -> Section:
    sec = Section("2. Real shell tasks vs GNU parallel", repeats=repeats)
    bag = write_bag(work / "shell-bag.txt", lambda i: "true", n_tasks)
    parallel = shutil.which("parallel")
    parallel_version = ""
    if parallel:
        try:
            out = subprocess.run([parallel, "--will-cite", "--version"], capture_output=True, text=True, timeout=30,
                                 check=False)
            parallel_version = out.stdout.splitlines()[0] if out.stdout else ""
        except (OSError, subprocess.SubprocessError):
            parallel_version = "?"
    rows = []
    for rep in repeats:
        row: dict[str, Any] = {"rep": rep}
        steps: list[tuple[str, Callable[[], None]]] = [("bats", lambda row=row: _shell_bats(work, bag, row))]
        if parallel:
            steps.append(("parallel", lambda row=row: _shell_parallel(parallel, bag, row)))
        if rep % 2 == 0:
            steps.reverse()  # alternate who goes first
        row["order"] = " → ".join(name for name, _ in steps)
        for _name, step in steps:
            step()
        if row.get("bats_ok") and row.get("par_ok"):
            row["ratio"] = row["bats_wall"] / row["par_wall"]
        log(f"shell rep {rep}: bats {row.get('bats_wall', float('nan')):.2f}s"
            + (f", parallel {row.get('par_wall', float('nan')):.2f}s" if parallel else ", parallel missing"))
        rows.append(row)

    ok = [r for r in rows if r.get("bats_ok")]
    pok = [r for r in rows if r.get("par_ok")]
    med_bw = median([r["bats_wall"] for r in ok])
    med_bm = median([r["bats_makespan"] for r in ok])
    med_pw = median([r["par_wall"] for r in pok])
    med_ratio = median([r["ratio"] for r in rows if "ratio" in r])
    tps_makespan = n_tasks / med_bm if med_bm else None
    tps_wall = n_tasks / med_bw if med_bw else None

    t = sec.text
    t += [
        f"Bag: {n_tasks:,} lines of `true`. BaTS: `bats-master --bag BAG --workers 2 --state-dir FRESH --quiet` "
        "(default local cluster; each task is a real `/bin/sh -c true` in a worker). "
        + (f"Peer: `parallel --will-cite -j2 < BAG` ({parallel_version}). "
           if parallel else "Peer: **GNU parallel is not installed, so the peer was skipped** "
           "(`apt-get install parallel`). ")
        + "The two alternate within each repeat (odd repeats BaTS first, even repeats parallel first). "
        "Wall = `time.perf_counter()` around `subprocess.run` of the whole command (start-up, workers, "
        "journal and report included); tree CPU = CPU of the command and all its descendants.",
        "",
        ("| repeat | order | bats wall s | bats makespan s | bats tasks/s (makespan) | bats tree CPU s "
        "| parallel wall s | parallel tree CPU s | bats/parallel wall |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bw = f"{r['bats_wall']:.2f}" if r.get("bats_ok") else f"error: {r.get('bats_error')}"
        bm = f"{r['bats_makespan']:.2f}" if r.get("bats_ok") else ""
        bt = f"{n_tasks / r['bats_makespan']:,.0f}" if r.get("bats_ok") else ""
        bc = f"{r['bats_cpu']:.2f}" if r.get("bats_ok") else ""
        pw = f"{r['par_wall']:.2f}" if r.get("par_ok") else ("—" if not parallel else f"error: {r.get('par_error')}")
        pc = f"{r['par_cpu']:.2f}" if r.get("par_ok") else ""
        ra = f"{r['ratio']:.3f}" if "ratio" in r else ""
        t.append(f"| {r['rep']} | {r['order']} | {bw} | {bm} | {bt} | {bc} | {pw} | {pc} | {ra} |")
    t.append(f"| **median** | | **{fmt(med_bw, '.2f')}** | {fmt(med_bm, '.2f')} | **{fmt(tps_makespan)}** "
             f"| {fmt(median([r['bats_cpu'] for r in ok]), '.2f')} | **{fmt(med_pw, '.2f')}** "
             f"| {fmt(median([r['par_cpu'] for r in pok]), '.2f')} | **{fmt(med_ratio, '.3f')}** |")
    t.append("")
    wall_ok = None if med_ratio is None else med_ratio <= 1.0
    tps_ok = None if tps_makespan is None else tps_makespan >= T_SHELL_TASKS_PER_S
    if med_ratio is not None and med_bw is not None and med_pw is not None:
        t.append(f"Median bats/parallel wall ratio (paired per repeat): {med_ratio:.3f}; ratio of the medians: "
                 f"{med_bw / med_pw:.3f} (BaTS {fmt(med_bw, '.2f')} s vs parallel {fmt(med_pw, '.2f')} s).")
    t += [f"Target bats wall ≤ parallel wall: {verdict(wall_ok)}" + ("" if parallel else " (peer skipped)") + ". "
          f"Target ≥ {T_SHELL_TASKS_PER_S} tasks/s (tasks / report `makespan_s`, as in benchmark 1): "
          f"median {fmt(tps_makespan)} → {verdict(tps_ok)}; by whole-command wall time it is {fmt(tps_wall)} tasks/s.",
          ""]
    sec.summary.append(("shell: bats wall / parallel wall", fmt(med_ratio, ".3f"), "≤ 1", verdict(wall_ok)))
    sec.summary.append(("shell: bats tasks/s", fmt(tps_makespan), f"≥ {T_SHELL_TASKS_PER_S}", verdict(tps_ok)))
    return sec


def bench_big(work: Path, repeats: Repeats, n_tasks: int, full: bool, noop_tps: float | None) -> Section:
    sec = Section(f"3. A {n_tasks:,}-task bag", repeats=repeats)
    bag = write_bag(work / "big-bag.txt", lambda i: f"echo task-{i:06d}", n_tasks)
    size_mib = bag.stat().st_size / 2**20
    rows = []
    for rep in repeats:
        state = Path(tempfile.mkdtemp(prefix="probe-", dir=work)) / "state"
        proc = subprocess.run([sys.executable, str(PROBE), str(bag), str(state)], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)
        shutil.rmtree(state.parent, ignore_errors=True)
        if proc.returncode == 0:
            row = {"rep": rep, "ok": True, **json.loads(proc.stdout)}
            log(f"big startup rep {rep}: {row['seconds']:.2f}s, peak RSS {row['peak_rss_mib']:.0f} MiB")
        else:
            row = {"rep": rep, "ok": False, "error": proc.stderr.strip().splitlines()[-1:]}
            log(f"big startup rep {rep}: FAILED {row['error']}")
        rows.append(row)
    ok = [r for r in rows if r["ok"]]
    med_s = median([r["seconds"] for r in ok])
    med_rss = median([r["peak_rss_mib"] for r in ok])
    step_names = list(ok[0]["steps"]) if ok else []

    t = sec.text
    t += [
        (f"Bag: {n_tasks:,} lines `echo task-000001` … ({size_mib:.1f} MiB). Start-up is measured in a fresh "
        "Python process (`bench/startup_probe.py`) doing what `bats-master` does before its first dispatch: "
        "`load_bag`, `Journal.create` in a temp state dir, writing `bag.txt`, "
        "`Core(bag.task_ids, default_config(2).clusters, random.Random(1))` and handling `RunStarted`. "
        "Seconds cover those steps (imports are timed apart); peak RSS is `getrusage(RUSAGE_SELF).ru_maxrss` "
        "of that process (interpreter and imports included)."),
        "",
        "| repeat | seconds | " + " | ".join(f"{s} s" for s in step_names) + " | imports s | RSS before bag MiB "
        "| peak RSS MiB |",
        "|---|---|" + "---|" * len(step_names) + "---|---|---|",
    ]
    for r in rows:
        if not r["ok"]:
            t.append(f"| {r['rep']} | error: {r['error']} |" + " |" * (len(step_names) + 3))
            continue
        t.append(f"| {r['rep']} | {r['seconds']:.2f} | " + " | ".join(f"{r['steps'][s]:.3f}" for s in step_names)
                 + f" | {r['import_s']:.3f} | {r['rss_before_mib']:.1f} | {r['peak_rss_mib']:.1f} |")
    if ok:
        t.append(f"| **median** | **{med_s:.2f}** | "
                 + " | ".join(f"{median([r['steps'][s] for r in ok]):.3f}" for s in step_names)
                 + f" | {median([r['import_s'] for r in ok]):.3f} | {median([r['rss_before_mib'] for r in ok]):.1f} "
                   f"| **{med_rss:.1f}** |")
    t.append("")
    s_ok = None if med_s is None else med_s <= T_BIG_START_S
    rss_ok = None if med_rss is None else med_rss <= T_BIG_RSS_MIB
    t += [(f"Target ≤ {T_BIG_START_S:.0f} s: median {fmt(med_s, '.2f', ' s')} → {verdict(s_ok)}; "
          f"target ≤ {T_BIG_RSS_MIB:.0f} MiB: median {fmt(med_rss, '.1f', ' MiB')} → {verdict(rss_ok)}."), ""]
    sec.summary.append((f"{n_tasks:,}-task bag: start-up", fmt(med_s, ".2f", " s"), f"≤ {T_BIG_START_S:.0f} s",
                        verdict(s_ok)))
    sec.summary.append((f"{n_tasks:,}-task bag: peak RSS", fmt(med_rss, ".1f", " MiB"), f"≤ {T_BIG_RSS_MIB:.0f} MiB",
                        verdict(rss_ok)))

    t += [f"**Full run of the {n_tasks:,}-task bag** (noop local cluster, `max = 2`, one repeat):", ""]
    if not full:
        estimate = (f"about {n_tasks / noop_tps:,.0f} s at the {noop_tps:,.0f} tasks/s measured in benchmark 1"
                    if noop_tps else "several minutes at the current no-op throughput")
        t += [("Not run by default: it needs `--full` (`.venv/bin/python bench/run.py --full`). It would take "
              f"{estimate}, too long for the ~5-minute budget of `make bench`."), ""]
        sec.summary.append((f"{n_tasks:,}-task bag: full noop run", "not run (needs --full)", "—", "n/a"))
        return sec
    cfg = write_noop_config(work / "big-noop-2.toml", 2)
    log(f"big full run: {n_tasks:,} noop tasks, max 2 …")
    r = run_bats(work, bag, ["--config", str(cfg)])
    if r.ok:
        assert r.report is not None
        mk = r.report["makespan_s"]
        t += ["| makespan s | tasks/s | master CPU s | master peak RSS MiB | wall s | tree CPU s |",
              "|---|---|---|---|---|---|",
              (f"| {mk:.1f} | {n_tasks / mk:,.0f} | {r.report['master']['cpu_s']:.1f} "
              f"| {r.report['master']['peak_rss_mib']:.1f} | {r.wall_s:.1f} | {r.cpu_tree_s:.1f} |"), ""]
        log(f"big full run: {n_tasks / mk:,.0f} tasks/s, master peak RSS {r.report['master']['peak_rss_mib']} MiB")
        sec.summary.append((f"{n_tasks:,}-task bag: full noop run", (f"{n_tasks / mk:,.0f} tasks/s, master "
                            f"{r.report['master']['peak_rss_mib']:.0f} MiB peak"), "(no target)", "n/a"))
    else:
        t += [f"Failed: {r.error}", ""]
        log(f"big full run FAILED: {r.error}")
        sec.summary.append((f"{n_tasks:,}-task bag: full noop run", "error", "(no target)", "n/a"))
    return sec


# ---------------------------------------------------------------------------- BaTS planning and bats-sim
PAPER_DIR = REPO / "deploy" / "examples" / "paper"
PAPER_SCENARIOS = ("s1-1", "s1-4", "s4-1", "s3-4", "s4-3")  # seed 000 §4.1, in the paper's order
PAPER_TASKS = 1_000
PAPER_MEAN_S = 900.0  # T1 = 15 min on cluster1; T2 = T1 / cluster2's speed
PAPER_RUNTIMES = "normal:15m,134s"  # N(15 min, σ² = 5 min²): σ = √5 min ≈ 134 s
BATS_SIM = BIN_DIR / "bats-sim"
SIM_SEED = 1
T_PLAN_MS = 50.0
T_SIM_SMALL_S = 2.0
T_SIM_BIG_S = 60.0
PLAN_SAMPLES = 25  # timed Planner.options() calls per scenario (5 with --quick)
N_SIM_BIG = 1_000_000
SIM_BIG_PER_CLUSTER = 500  # two clusters: 1,000 machines
SIM_BIG_BUDGET_S = 90.0  # by default the big bats-sim runs repeat only while they fit in this


def paper_clusters(name: str) -> list[Any]:
    """The planner's view of a paper scenario: the clusters of ``deploy/examples/paper/NAME.toml``
    with T_i = 15 min / the cluster's bats-sim speed."""
    from bats import provisioners
    from bats.common.config import load_config
    from bats.master.core.planning.planner import ClusterPlan
    from bats.master.sim.driver import cluster_speed

    config = load_config(PAPER_DIR / f"{name}.toml", provisioners.options_of)
    return [ClusterPlan.from_config(cl, PAPER_MEAN_S / cluster_speed(cl)) for cl in config.clusters.values()]


def bench_planning(samples: int) -> Section:
    from bats.master.core.planning.planner import Planner

    sec = Section("4. BaTS planning time")
    scenarios = {name: paper_clusters(name) for name in PAPER_SCENARIOS}
    for clusters in scenarios.values():  # warm-up: first numpy calls, imports
        Planner(clusters, PAPER_TASKS).options()
    times: dict[str, list[float]] = {name: [] for name in scenarios}
    for _ in range(samples):
        for name, clusters in scenarios.items():  # interleaved, so drift hits every scenario alike
            t0 = time.perf_counter()
            Planner(clusters, PAPER_TASKS).options()
            times[name].append((time.perf_counter() - t0) * 1e3)
    t = sec.text
    t += [
        (f"For each scenario of seed 000 §4.1, `Planner(clusters, {PAPER_TASKS:,}).options()` "
         "(`bats.master.core.planning.planner`): the candidate frontier, the paper's four schedules with their rounding "
         "(ΔN) refinement, and the Pareto set. Clusters as in `deploy/examples/paper/SCENARIO.toml` (32 machines "
         f"each, $3 for cluster1, ATU 60 min), T1 = {PAPER_MEAN_S / 60:g} min and T2 = T1 / cluster2's speed "
         "(the true means, not sampled estimates, so the schedules need not match the paper's Table 2). "
         f"In-process, `time.perf_counter()` around a fresh `Planner` and its `options()`; one untimed warm-up "
         f"call per scenario, then {samples} timed calls per scenario, the scenarios interleaved."),
        "",
        ("| scenario | cluster2 price, speed | T2 min | median ms | min ms | max ms | candidates | options "
         f"| cheapest (cluster1, cluster2) | fastest | ≤ {T_PLAN_MS:.0f} ms |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, clusters in scenarios.items():
        planner = Planner(clusters, PAPER_TASKS)
        opts = planner.options()
        med = median(times[name])
        ok = None if med is None else med <= T_PLAN_MS
        label = "S" + name[1:]

        def config(option_label: str, opts=opts) -> str:
            o = next((o for o in opts if option_label in (o.label, *o.also)), None)
            return "—" if o is None else (f"({', '.join(str(v) for v in o.machines.values())}) "
                                          f"${o.cost:,.0f}, {o.makespan_atu} ATU")

        c2 = clusters[1]
        t.append(f"| {label} | ${c2.price:g}, {PAPER_MEAN_S / c2.mean_s:g}× | {c2.mean_s / 60:g} "
                 f"| **{fmt(med, '.2f')}** | {min(times[name]):.2f} | {max(times[name]):.2f} "
                 f"| {planner.candidate_count:,} | {len(opts)} | {config('cheapest')} | {config('fastest')} "
                 f"| {verdict(ok)} |")
        sec.summary.append((f"planning {label}: Planner.options()", fmt(med, ".2f", " ms"), f"≤ {T_PLAN_MS:.0f} ms",
                            verdict(ok)))
        sec.medians[f"plan_ms_{name}"] = med
    t += ["", ("Candidates: configurations on the planner's (cost per ATU, speed) frontier; options: the four "
               "schedules and the Pareto set after merging equal configurations."), ""]
    return sec


def write_sim_config(path: Path, per_cluster: int) -> Path:
    """Scenario S3-4's clusters (seed 000 §4.1) with ``per_cluster`` machines each."""
    path.write_text(
        "# bench: S3-4's two clusters, scaled up\n"
        + "".join(f'[clusters.{name}]\nprovisioner = "local"\nmax = {per_cluster}\nprice = {price}\natu = "60m"\n'
                  f"speed = {speed}\n\n" for name, price, speed in (("cluster1", 3.0, 1.0), ("cluster2", 9.0, 4.0)))
    )
    return path


def run_sim(work: Path, config: Path, n_tasks: int) -> dict[str, Any]:
    """One ``bats-sim`` run as a subprocess: wall time; CPU and peak RSS of that process alone
    (``os.wait4``, in ``bench/own_usage.py``: a small launcher, since a child started from this
    process counts this process's resident size in its peak RSS); the simulator's own timing from
    its summary line; figures from its report."""
    report_path, out_path, err_path = work / "sim-report.json", work / "sim-stdout.txt", work / "sim-stderr.txt"
    usage_path = work / "sim-usage.json"
    for path in (report_path, usage_path):
        path.unlink(missing_ok=True)
    argv = [sys.executable, str(BENCH_DIR / "own_usage.py"), str(usage_path),
            str(BATS_SIM), "--config", str(config), "--tasks", str(n_tasks), "--runtimes", PAPER_RUNTIMES,
            "--seed", str(SIM_SEED), "--report", str(report_path), "--schedule", "fastest"]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        timer = threading.Timer(RUN_TIMEOUT_S, os.killpg, (proc.pid, signal.SIGKILL))  # the launcher and bats-sim
        timer.start()
        try:
            code = proc.wait()
        finally:
            timer.cancel()
    stdout = out_path.read_text(errors="replace")
    m = re.search(r"simulated (\d+) events in ([\d.]+) s wall", stdout)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    usage = json.loads(usage_path.read_text()) if usage_path.exists() else None
    if code != 0 or report is None or report.get("status") != "done" or m is None or usage is None:
        tail = " / ".join(err_path.read_text(errors="replace").strip().splitlines()[-2:])
        return {"ok": False, "error": f"exit {code}: {tail or 'no report or no summary line'}"}
    return {"ok": True, "error": "", "wall": usage["wall"], "cpu": usage["cpu"], "rss": usage["rss_mib"],
            "events": int(m.group(1)), "sim_s": float(m.group(2)),
            "makespan": report["makespan_s"], "cost": report["cost"]["total"],
            "machines": len(report["machines"]), "done": report["tasks"]["done"]}


def _sim_table(rows: list[dict[str, Any]]) -> list[str]:
    t = [("| repeat | wall s | simulation s | process CPU s | peak RSS MiB | events | tasks done | machines "
          "| virtual makespan | cost |"),
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["ok"]:
            t.append(f"| {r['rep']} | error: {r['error']} | | | | | | | | |")
            continue
        t.append(f"| {r['rep']} | {r['wall']:.2f} | {r['sim_s']:.2f} | {r['cpu']:.2f} | {r['rss']:.0f} "
                 f"| {r['events']:,} | {r['done']:,} | {r['machines']:,} | {r['makespan'] / 3600:.2f} h "
                 f"| ${r['cost']:,.0f} |")
    ok = [r for r in rows if r["ok"]]
    if ok:
        t.append(f"| **median** | **{median([r['wall'] for r in ok]):.2f}** | {median([r['sim_s'] for r in ok]):.2f} "
                 f"| {median([r['cpu'] for r in ok]):.2f} | {median([r['rss'] for r in ok]):.0f} | | | | | |")
    return t


def bench_sim(work: Path, small: Repeats, big: Repeats, n_big: int, big_note: str) -> Section:
    sec = Section("5. bats-sim")
    small_cfg = PAPER_DIR / "s3-4.toml"
    big_cfg = write_sim_config(work / "sim-big.toml", SIM_BIG_PER_CLUSTER)
    runs: dict[str, list[dict[str, Any]]] = {"small": [], "big": []}
    for which, repeats, cfg, n in (("small", small, small_cfg, PAPER_TASKS), ("big", big, big_cfg, n_big)):
        for rep in repeats:
            row = {"rep": rep, **run_sim(work, cfg, n)}
            runs[which].append(row)
            log(f"bats-sim {n:,} tasks rep {rep}: " + (f"{row['wall']:.2f}s wall, {row['sim_s']:.2f}s simulating"
                                                       if row["ok"] else f"FAILED {row['error']}"))
    t = sec.text
    t += [
        ("The `bats-sim` console script of the venv, run as a subprocess: "
         f"`bats-sim --config CFG --tasks N --runtimes {PAPER_RUNTIMES} --seed {SIM_SEED} --report FILE "
         "--schedule fastest` "
         "(every repeat the same run, so the figures compare). **Wall** = `time.perf_counter()` around the whole "
         "process (interpreter start-up, imports, drawing the runtimes, the simulation, writing the report); "
         "**simulation** = the time `bats-sim` reports for its event loop alone; process CPU and peak RSS come from "
         "`os.wait4` of that process. The full BaTS policy runs: the sampling phase (7 machines per cluster, "
         "replicated and sample tasks), planning, then the paper's \"fastest\" schedule (every machine of both "
         "clusters, the heaviest load per virtual hour) with monitoring every 5 virtual minutes and the budget "
         "ceiling."),
        "",
    ]
    targets = (("small", T_SIM_SMALL_S, PAPER_TASKS, 64,
                "`deploy/examples/paper/s3-4.toml` (S3-4: 2 × 32 machines, cluster2 $9 and 4× as fast)", small),
               ("big", T_SIM_BIG_S, n_big, 2 * SIM_BIG_PER_CLUSTER,
                f"S3-4's clusters with `max = {SIM_BIG_PER_CLUSTER}` each (written to the temp dir)", big))
    for which, target, n, machines, cfg_text, repeats in targets:
        rows = runs[which]
        ok = [r for r in rows if r["ok"]]
        med = median([r["wall"] for r in ok])
        good = False if len(ok) < len(rows) else (None if med is None else med <= target)  # a failed run fails
        t += [f"**{n:,} tasks on {machines:,} machines** — config {cfg_text}; {repeats.describe()}.", ""]
        t += _sim_table(rows)
        t += ["", f"Target ≤ {target:g} s wall: median {fmt(med, '.2f', ' s')} → {verdict(good)}."
              + (f" {big_note}" if which == "big" and big_note else ""), ""]
        sec.summary.append((f"bats-sim {n:,} tasks on {machines:,} machines: wall", fmt(med, ".2f", " s"),
                            f"≤ {target:g} s", verdict(good)))
        sec.medians[f"sim_wall_{which}"] = med
    return sec


# ---------------------------------------------------------------------------- BaTS monitoring tick
T_TICK_MS = 1.0  # the target: "one monitoring tick with 1,000 machines (≤ 1 ms)"
TICK_MACHINES = 1_000
TICK_SAMPLES = 200  # timed calls of each form (50 with --quick)
TICK_WARMUP = 20  # untimed calls of each form first
TICK_SEED = 7
TICK_CLUSTERS = (("cluster1", 3.0), ("cluster2", 9.0))  # name, price per 60-min ATU
TICK_ATU_S = 3600.0
TICK_SAMPLE_N = 30  # sample runtimes per cluster, N(900 s, 134 s) as the paper's T1
TICK_N_REMAINING = 5_000  # N_r: tasks still in the bag
TICK_MARGIN_S = 120.0  # release margin
TICK_HORIZON_S = 60.0  # time to the next decision (plan_releases)


def tick_inputs() -> dict[str, Any]:
    """A realistic snapshot of 1,000 live machines (as ``tests/core/test_monitor.py``'s 1,000-machine test):
    two hourly clusters, 30 sample runtimes each, random uptimes and counters, 90 % running a task,
    every 7th machine marked for release, plans of 0-4 more ATUs."""
    import random

    from bats.master.core.planning.monitor import Billing, MachineTable, MachineView, TailEstimates

    rng = random.Random(TICK_SEED)
    billings = {name: Billing(TICK_ATU_S, price) for name, price in TICK_CLUSTERS}
    samples = {name: [rng.gauss(PAPER_MEAN_S, 134.0) for _ in range(TICK_SAMPLE_N)] for name in billings}
    tails = TailEstimates.from_samples(samples)
    names = sorted(billings)
    views = []
    for i in range(TICK_MACHINES):
        uptime = rng.uniform(60.0, 6 * TICK_ATU_S)
        elapsed = rng.uniform(0.0, min(uptime, 1500.0)) if i % 10 else None  # 90 % run a task
        busy = max(0.0, uptime * rng.uniform(0.85, 0.99) - (elapsed or 0.0))  # seconds on finished tasks
        nt = round(busy / PAPER_MEAN_S)
        views.append(MachineView(f"m{i:04d}", names[i % len(names)], uptime, nt, busy if nt else 0.0, elapsed,
                                 rng.randrange(5), i % 7 == 0))
    return {"views": views, "table": MachineTable.from_views(views), "billings": billings, "tails": tails}


def bench_monitor(samples: int) -> Section:
    from bats.master.core.planning import monitor as monitor
    from bats.master.core.planning.monitor import MachineTable

    sec = Section("6. BaTS monitoring tick")
    inp = tick_inputs()
    views, table, billings, tails = inp["views"], inp["table"], inp["billings"], inp["tails"]

    def check(machines: Any) -> Any:
        return monitor.check(machines, TICK_N_REMAINING, billings, tails, release_margin_s=TICK_MARGIN_S)

    result = check(table)
    if check(views) != result:
        raise RuntimeError("monitor.check() gives different answers from the views and from the table")
    # a budget that keeps about half of the machines that are not marked: plan_releases must sort them all
    unmarked_prices = sum(billings[v.cluster].price for v in views if not v.marked_for_release)
    budget = result.spent + unmarked_prices / 2

    def releases(machines: Any) -> Any:
        return monitor.plan_releases(machines, billings, tails, budget, spent_before=0.0,
                                     release_margin_s=TICK_MARGIN_S, horizon_s=TICK_HORIZON_S)

    forms: dict[str, Callable[[], Any]] = {
        "check_table": lambda: check(table),
        "check_views": lambda: check(views),
        "from_views": lambda: MachineTable.from_views(views),
        "releases_table": lambda: releases(table),
    }
    for fn in forms.values():  # warm-up: numpy's first calls, caches
        for _ in range(TICK_WARMUP):
            fn()
    times: dict[str, list[float]] = {key: [] for key in forms}
    for _ in range(samples):
        for key, fn in forms.items():  # interleaved, so drift hits every form alike
            t0 = time.perf_counter()
            fn()
            times[key].append((time.perf_counter() - t0) * 1e3)
    plan = releases(table)
    med = {key: median(v) for key, v in times.items()}
    tick_ok = None if med["check_table"] is None else med["check_table"] <= T_TICK_MS
    running = sum(v.running_elapsed_s is not None for v in views)
    marked = sum(v.marked_for_release for v in views)

    t = sec.text
    t += [
        (f"One monitoring tick of seed 000 §3.1: `bats.master.core.planning.monitor.check(machines, N_r = {TICK_N_REMAINING:,}, "
         f"billings, TailEstimates, release_margin_s={TICK_MARGIN_S:g})` over {TICK_MACHINES:,} live machines. "
         f"Inputs (seed {TICK_SEED}, as the 1,000-machine test of `tests/core/test_monitor.py`): two clusters, "
         + ", ".join(f"`{name}` ${price:g}" for name, price in TICK_CLUSTERS)
         + f" per {TICK_ATU_S / 60:g}-min ATU, {TICK_MACHINES // len(TICK_CLUSTERS):,} machines each; "
         f"`TailEstimates.from_samples` of {TICK_SAMPLE_N} runtimes per cluster drawn from "
         f"N({PAPER_MEAN_S:g} s, 134 s); per machine a random uptime (1 min–{6 * TICK_ATU_S / 3600:g} h), "
         f"nt and rt from 85–99 % of that uptime busy on {PAPER_MEAN_S:g}-s tasks, 0–4 planned ATUs left; "
         f"{running:,} machines ({running / TICK_MACHINES:.0%}) running a task for up to 25 min, "
         f"{marked:,} marked for release. "
         f"In-process, `time.perf_counter()` around each call; {TICK_WARMUP} untimed warm-up calls of each form, "
         f"then {samples} timed calls of each, the forms interleaved."),
        "",
        ("* **check(MachineTable)** — the intended per-tick form (a core that keeps its counters in numpy "
         "columns passes the table); **the ≤ 1 ms target applies to this form**."),
        ("* **check(list of MachineView)** — the same tick from frozen dataclass views, including "
         "`MachineTable.from_views` (for information; the conversion is also timed alone)."),
        (f"* **plan_releases(MachineTable)** — the budget ceiling's decision for the same machines "
         f"(budget = spent + half the next-ATU prices of the unmarked machines, so about half are kept; "
         f"horizon {TICK_HORIZON_S:g} s, margin {TICK_MARGIN_S:g} s), for information."),
        "",
        f"| call | median ms | min ms | max ms | ≤ {T_TICK_MS:g} ms |",
        "|---|---|---|---|---|",
    ]
    rows = (("check_table", "`check(MachineTable)` (target)", True),
            ("check_views", "`check([MachineView, …])`, conversion included", False),
            ("from_views", "`MachineTable.from_views(...)` alone", False),
            ("releases_table", "`plan_releases(MachineTable)`", False))
    for key, label, target in rows:
        t.append(f"| {label} | **{fmt(med[key], '.3f')}** | {min(times[key]):.3f} | {max(times[key]):.3f} "
                 f"| {verdict(tick_ok) if target else 'n/a'} |")
    t += [
        "",
        (f"Result of the tick (the same from views and table): N_e = {result.n_e:,}, N_p = {result.n_p:,}, "
         f"plan holds: {result.ok}, spent ${result.spent:,.0f}, committed ${result.committed:,.0f}, "
         f"{result.cut_off} running tasks cut off on marked machines. plan_releases: budget ${budget:,.0f}, "
         f"{len(plan.keep):,} kept, {len(plan.release):,} released (the {marked:,} marked included), "
         f"${plan.reserved:,.0f} reserved of ${plan.money_left:,.0f} left."),
        "",
        (f"Target ≤ {T_TICK_MS:g} ms for `check` from a MachineTable: median {fmt(med['check_table'], '.3f', ' ms')} "
         f"→ {verdict(tick_ok)}. From views (conversion included): {fmt(med['check_views'], '.3f', ' ms')}; "
         f"plan_releases: {fmt(med['releases_table'], '.3f', ' ms')} (no targets)."),
        "",
    ]
    n = f"{TICK_MACHINES:,}"
    sec.summary.append((f"monitoring tick: check() over {n} machines (MachineTable)", fmt(med["check_table"], ".3f", " ms"),
                        f"≤ {T_TICK_MS:g} ms", verdict(tick_ok)))
    sec.summary.append((f"monitoring tick: check() from {n} MachineViews (conversion included)",
                        fmt(med["check_views"], ".3f", " ms"), "(no target)", "n/a"))
    sec.summary.append((f"monitoring tick: plan_releases() over {n} machines (MachineTable)",
                        fmt(med["releases_table"], ".3f", " ms"), "(no target)", "n/a"))
    sec.medians.update({f"tick_ms_{key}": value for key, value in med.items()})
    return sec


# ---------------------------------------------------------------------------- the report
def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine_info() -> list[tuple[str, str]]:
    cpuinfo = _read("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or "?")
    mem_kib = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                    if line.startswith("MemTotal:")), 0)
    os_name = next((line.split("=", 1)[1].strip().strip('"') for line in _read("/etc/os-release").splitlines()
                    if line.startswith("PRETTY_NAME=")), platform.system())
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    return [
        ("CPU", model),
        ("Cores", f"{os.cpu_count()} logical ({affinity} usable by this process)"),
        ("RAM", f"{mem_kib / 2**20:.1f} GiB"),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("OS", f"{os_name}, Linux {platform.release()} ({platform.machine()})"),
        ("Load average at start", " ".join(_read("/proc/loadavg").split()[:3])),
    ]


def git_info() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "master", "worker", "common", "provisioners"],
                               cwd=REPO, capture_output=True, text=True, timeout=10, check=False).stdout.split("\n")
        changed = sorted({line[3:] for line in dirty if line.strip()})
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not head:
        return "unknown"
    return f"`{head}`" + (f" with uncommitted changes in {', '.join(f'`{c}`' for c in changed)}" if changed else "")


def command_line(argv: list[str]) -> str:
    if os.environ.get("MAKELEVEL") and not argv:
        return "make bench"
    try:
        exe = os.path.relpath(sys.executable, REPO)
    except ValueError:
        exe = sys.executable
    return " ".join([exe, "bench/run.py", *argv])


def write_results(path: Path, sections: list[Section], args: argparse.Namespace, argv: list[str],
                  started: float, started_at: dt.datetime, env: list[tuple[str, str]], git: str) -> None:
    elapsed = time.perf_counter() - started
    lines = [
        "# BaTS benchmarks",
        "",
        (f"Generated by `bench/run.py` on {started_at.strftime('%Y-%m-%d %H:%M %Z').strip()}; "
        f"whole run took {elapsed / 60:.1f} min."),
        "",
        f"**Command:** `{command_line(argv)}` (from the repository root)"
        + (" — **quick smoke run: small bags, not comparable with the targets**" if args.quick else ""),
        "",
        (f"Repeats: {repeat_policy(args)}. Every figure below is the median of the repeats. This machine is "
        "shared and noisy, and the master, its workers and the peer all share its cores, so single runs vary "
        "by tens of percent."),
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in env],
        f"| Load average at end | {' '.join(_read('/proc/loadavg').split()[:3])} |",
        f"| Code | {git} |",
        "",
        "## Summary",
        "",
        "| benchmark | median | target | result |",
        "|---|---|---|---|",
    ]
    for sec in sections:
        for metric, med, target, ver in sec.summary:
            lines.append(f"| {metric} | {med} | {target} | {ver} |")
    lines.append("")
    for sec in sections:
        lines += [f"## {sec.title}", ""]
        if sec.repeats is not None:
            lines += [f"Repeats: {sec.repeats.describe()}.", ""]
        lines += sec.text
    lines += [
        "## Reproduce",
        "",
        (f"`make bench` (default: up to {DEFAULT_REPEATS} repeats, at least {MIN_REPEATS}, within a "
        f"{DEFAULT_BUDGET_S:.0f} s budget). Options: `.venv/bin/python bench/run.py --repeats N` (exactly N "
        "repeats, no budget), `--budget SECONDS`, "
        "`--quick` (small bags, one repeat, written to `bench/out/RESULTS-quick.md`), `--full` (adds the real "
        f"run of the 1,000,000-task bag), `--only 1,3` (some benchmarks: 1 noop, 2 shell, 3 big bag, "
        "4 planning, 5 bats-sim, 6 monitoring tick, 11 under attack), "
        f"`--variants {DEFAULT_VARIANTS}` "
        "(benchmark 1's configurations as max:prefetch, prefetch `auto` or 0–15, a bare max meaning auto), "
        "`--output FILE`. The transport floor alone: "
        f"`.venv/bin/python bench/zmq_floor.py --workers 2 --depth {1 + AUTO_PREFETCH_MAX} --round-trips 100000`. "
        "GNU parallel is the Debian package `parallel`; without it benchmark 2 skips its peer."),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


DEFAULT_REPEATS = 5
MIN_REPEATS = 3
DEFAULT_BUDGET_S = 300.0
# share of the budget by which each benchmark's repeats should be over (cumulative)
BUDGET_SHARES = {1: 0.65, 2: 0.92, 3: 1.0}


def repeat_policy(args: argparse.Namespace) -> str:
    if args.fixed:
        return f"{args.repeats} per benchmark (`{'--quick' if args.quick and args.repeats == 1 else '--repeats'}`)"
    return (f"up to {args.repeats} per benchmark, at least {min(MIN_REPEATS, args.repeats)}; a repeat past the "
            f"minimum is skipped when it would not end within the {args.budget:.0f} s time budget "
            "(each section says how many ran)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=None,
                   help=f"exactly N repeats per benchmark, no time budget (default: up to {DEFAULT_REPEATS}, "
                        f"at least {MIN_REPEATS}, within --budget; 1 with --quick)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                   help=f"time budget that decides how many repeats past {MIN_REPEATS} run "
                        f"(default {DEFAULT_BUDGET_S:.0f}; --full's big run is not counted)")
    p.add_argument("--quick", action="store_true", help="small bags and one repeat: a smoke run")
    p.add_argument("--full", action="store_true", help="also run bats-master on the 1,000,000-task bag")
    p.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10,11,12",
                   help="comma-separated benchmarks to run (default 1,2,3,4,5,6,7,8,9,10,11,12)")
    p.add_argument("--variants", default=DEFAULT_VARIANTS, metavar="MAX:PREFETCH,...",
                   help=f"benchmark 1's configurations, max workers and [master] prefetch (default "
                        f"{DEFAULT_VARIANTS}; PREFETCH is auto or 0-{MAX_PREFETCH}, a bare MAX means auto)")
    p.add_argument("--output", help="where to write the results (default bench/RESULTS.md)")
    args = p.parse_args(argv)
    args.fixed = args.repeats is not None or args.quick
    if args.repeats is None:
        args.repeats = 1 if args.quick else DEFAULT_REPEATS
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    only = {int(x) for x in args.only.split(",") if x.strip()}
    try:
        variants = parse_variants(args.variants)
    except ValueError as exc:
        p.error(f"--variants: {exc}")
    output = Path(args.output) if args.output else (
        BENCH_DIR / "out" / "RESULTS-quick.md" if args.quick else BENCH_DIR / "RESULTS.md")
    for tool in (BATS_MASTER, BATS_SIM):
        if not tool.exists():
            print(f"bench: {tool} not found; run 'make install' first", file=sys.stderr)
            return 2

    n_noop, n_shell, n_big = (10_000, 200, 100_000) if args.quick else (N_NOOP, 2_000, 1_000_000)
    n_sim_big = 100_000 if args.quick else N_SIM_BIG
    started, started_at = time.perf_counter(), dt.datetime.now().astimezone()
    t0 = time.monotonic()

    def plan(bench: int) -> Repeats:
        if args.fixed:
            return Repeats(args.repeats, args.repeats)
        return Repeats(args.repeats, min(MIN_REPEATS, args.repeats), t0 + args.budget * BUDGET_SHARES[bench])

    env, git = machine_info(), git_info()
    compile_bytecode()
    sections: list[Section] = []
    with tempfile.TemporaryDirectory(prefix="bats-bench-") as tmp:
        work = Path(tmp)
        if 1 in only:
            log(f"benchmark 1: {n_noop:,} noop tasks, variants {', '.join(v.label for v in variants)}, "
                f"each with its transport floor, {args.repeats} repeat(s) at most")
            sections.append(bench_noop(work, plan(1), n_noop, variants))
        if 2 in only:
            log(f"benchmark 2: {n_shell:,} shell tasks vs GNU parallel, {args.repeats} repeat(s) at most")
            sections.append(bench_shell(work, plan(2), n_shell))
        if 3 in only:
            log(f"benchmark 3: {n_big:,}-task bag start-up, {args.repeats} repeat(s) at most"
                + (" + full run" if args.full else ""))
            noop_tps = sections[0].medians.get("tps_default") if sections and 1 in only else None
            sections.append(bench_big(work, plan(3), n_big, args.full, noop_tps))
        if 4 in only:
            samples = 5 if args.quick else PLAN_SAMPLES
            log(f"benchmark 4: BaTS planning time, {len(PAPER_SCENARIOS)} paper scenarios, {samples} calls each")
            sections.append(bench_planning(samples))
        if 5 in only:
            log(f"benchmark 5: bats-sim, {PAPER_TASKS:,} tasks on 64 machines and {n_sim_big:,} on "
                f"{2 * SIM_BIG_PER_CLUSTER:,}, {args.repeats} repeat(s) at most")
            if args.fixed:
                big, note = Repeats(args.repeats, args.repeats), ""
            else:
                big = Repeats(args.repeats, 1, time.monotonic() + SIM_BIG_BUDGET_S)
                note = ("This run is part of the default `make bench` (not behind `--full`): one repeat always "
                        f"runs, further ones only while they should end within {SIM_BIG_BUDGET_S:.0f} s of this "
                        "benchmark's start, which keeps the whole `make bench` around 5–6 minutes.")
            sections.append(bench_sim(work, Repeats(args.repeats, args.repeats), big, n_sim_big, note))
        if 6 in only:
            samples = 50 if args.quick else TICK_SAMPLES
            log(f"benchmark 6: BaTS monitoring tick, {TICK_MACHINES:,} machines, {samples} calls of each form")
            sections.append(bench_monitor(samples))
        if 7 in only:
            from pareto_bench import bench_pareto

            samples = 5 if args.quick else 25
            log(f"benchmark 7: Pareto planning on seed 003's 40-60-100 mix, {samples} exact fronts")
            sections.append(bench_pareto(samples, replan_tasks=5_000 if args.quick else 20_000))
        if 8 in only:
            from curve_bench import bench_curve

            n_curve, r_curve = (5_000, 1) if args.quick else (20_000, max(3, min(args.repeats, 5)))
            log(f"benchmark 8: encryption cost, {n_curve:,} noop tasks with and without CurveZMQ, {r_curve} repeat(s)")
            sections.append(bench_curve(run_bats, work, n_curve, r_curve, log))
        if 9 in only:
            from deadline_bench import bench_deadline

            samples = 5 if args.quick else 25
            log(f"benchmark 9: deadline ILP, 1,000 tasks, 5 types, 12 intervals, {samples} plans")
            sections.append(bench_deadline(samples))
        if 10 in only:
            from scale_bench import bench_scale

            log("benchmark 10: scale, emulated fleets of 200-1,000 machines and 10,000 true vs xargs and parallel")
            sections.append(bench_scale(work, BATS_MASTER, run_bats, write_noop_config, log, args.quick))
        if 11 in only:
            from attack_bench import bench_attack

            r_attack = 1 if args.quick else 3
            log(f"benchmark 11: the defences' cost against the code before them, and a 1 MiB flood, {r_attack} repeat(s)")
            sections.append(bench_attack(work, BATS_MASTER, write_noop_config, log, r_attack))
        if 12 in only:
            from odds_bench import bench_odds

            samples = 1 if args.quick else 3
            log(f"benchmark 12: options with odds, 5,000 tasks on 5 clusters, {samples} bag(s), and bats-sim's "
                "50,000 tasks on 1,000 machines")
            odds_config = write_sim_config(work / "sim-odds.toml", SIM_BIG_PER_CLUSTER)
            sections.append(bench_odds(samples, lambda n: run_sim(work, odds_config, n)))
    write_results(output, sections, args, argv, started, started_at, env, git)
    log(f"wrote {output} ({(time.perf_counter() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
