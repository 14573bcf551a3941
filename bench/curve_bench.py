"""``make bench`` section 8: what CurveZMQ encryption costs the master's dispatch.

How this works. The same no-op bag (``true`` tasks on a ``noop`` local cluster, ``max = 2``, the
default prefetch) runs with the default transport (CurveZMQ: encrypted, each connection
authenticated) and with ``--insecure`` (plain TCP on 127.0.0.1), alternating within every repeat
(and which goes first, from one repeat to the next) so both see the same load on a shared machine. Reported: the median dispatch throughput (tasks over
the report's makespan) and master CPU per task of each, and the ratio of the medians measured in
this same run. ``bench/reliability.py`` calls :func:`measure` for ``docs/reliability.md``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sections import Section, fmt

MODES = {"curve": [], "insecure": ["--insecure"]}


def write_config(path: Path, workers: int = 2) -> Path:
    path.write_text('[clusters.local]\nprovisioner = "local"\n'
                    f'max = {workers}\nprice = 0\nnoop = true\n')
    return path


def measure(run_bats: Callable[[Path, Path, list[str]], Any], work: Path, n_tasks: int, repeats: int,
            log: Callable[[str], None] = lambda _msg: None) -> dict[str, Any]:
    """Alternate the two modes ``repeats`` times; return per-mode lists and medians, and the ratio."""
    bag = work / f"curve-bag-{n_tasks}.txt"
    bag.write_text("true\n" * n_tasks)
    config = write_config(work / "curve-noop.toml")
    rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    errors: list[str] = []
    for rep in range(1, repeats + 1):
        order = list(MODES.items()) if rep % 2 else list(MODES.items())[::-1]  # neither always goes first
        for mode, flags in order:
            run = run_bats(work, bag, ["--config", str(config), *flags])
            if not run.ok:
                errors.append(f"{mode} rep {rep}: {run.error}")
                continue
            makespan = run.report["makespan_s"]
            cpu = run.report["master"]["cpu_s"]
            rows[mode].append({"tps": n_tasks / makespan, "us_per_task": cpu / n_tasks * 1e6})
            log(f"encryption {mode} rep {rep}: {n_tasks / makespan:,.0f} tasks/s")
    medians = {mode: {key: statistics.median(r[key] for r in got) if got else None
                      for key in ("tps", "us_per_task")} for mode, got in rows.items()}
    secure, plain = medians["curve"]["tps"], medians["insecure"]["tps"]
    return {"tasks": n_tasks, "repeats": repeats, "rows": rows, "medians": medians, "errors": errors,
            "ratio": secure / plain if secure and plain else None}


def bench_curve(run_bats: Callable[[Path, Path, list[str]], Any], work: Path, n_tasks: int, repeats: int,
                log: Callable[[str], None]) -> Section:
    got = measure(run_bats, work, n_tasks, repeats, log)
    sec = Section("8. Cost of encryption (CurveZMQ against --insecure)")
    m = got["medians"]
    ratio = got["ratio"]
    sec.text += [
        f"{n_tasks:,} no-op tasks on a `noop` local cluster (`max = 2`, default prefetch), run with the default "
        "transport (CurveZMQ, each connection authenticated) and with `--insecure` (plain TCP on 127.0.0.1), "
        f"alternating, {repeats} repeat(s) each; medians of the same run. Module: `bench/curve_bench.py`.",
        "",
        "| transport | tasks/s (median) | master CPU per task (median) | runs |",
        "|---|---:|---:|---:|",
    ]
    for mode in MODES:
        sec.text.append(f"| {mode} | {fmt(m[mode]['tps'])} | {fmt(m[mode]['us_per_task'], '.1f', ' µs')} | "
                        f"{len(got['rows'][mode])} |")
    sec.text += ["", f"Throughput with encryption / without: **{fmt(ratio, '.2f')}**"
                 + (f" ({(1 - ratio) * 100:.0f}% slower)" if ratio is not None and ratio < 1 else "") + "."]
    if got["errors"]:
        sec.text += ["", "Errors: " + "; ".join(got["errors"])]
    sec.summary.append(("encryption: tasks/s CurveZMQ / insecure", fmt(ratio, ".2f"), "(measured)", "n/a"))
    sec.medians.update(curve_tps=m["curve"]["tps"], insecure_tps=m["insecure"]["tps"], curve_ratio=ratio)
    return sec
