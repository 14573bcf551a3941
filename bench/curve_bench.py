"""``make bench`` section 8: what CurveZMQ encryption costs the master's dispatch.

How this works. The same no-op bag (``true`` tasks on a ``noop`` local cluster, ``max = 2``, the
default prefetch) runs with the default transport (CurveZMQ: encrypted, each connection
authenticated) and with ``--insecure`` (plain TCP on 127.0.0.1), alternating within every repeat
(and which goes first, from one repeat to the next) so both see the same load on a shared machine. Reported: the median dispatch throughput (tasks over
the report's makespan) and master CPU per task of each, and the ratio of the medians measured in
this same run, with each mode's range, since no-op runs on a shared machine are noisy. Because
the master batches many messages per frame, the end-to-end figure hides the per-message cost, so
:func:`ping_pong` also measures the transport alone: one ROUTER and one DEALER on 127.0.0.1 in one
thread, strictly one message in flight (no batching), a 60-byte frame (a ``task``) and a 64 KiB
frame (a ``result`` with full output tails), plain and CURVE, alternating.
``bench/reliability.py`` calls :func:`measure` and :func:`ping_pong` for ``docs/reliability.md``.
"""

from __future__ import annotations

import statistics
import time
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
    ranges = {mode: (min(r["tps"] for r in got), max(r["tps"] for r in got)) if got else None
              for mode, got in rows.items()}
    return {"tasks": n_tasks, "repeats": repeats, "rows": rows, "medians": medians, "errors": errors,
            "ranges": ranges, "ratio": secure / plain if secure and plain else None}


def _pair(curve: bool):
    import zmq

    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    if curve:
        server_public, server_secret = zmq.curve_keypair()
        router.curve_secretkey, router.curve_publickey, router.curve_server = server_secret, server_public, True
        dealer.curve_serverkey = server_public
        dealer.curve_publickey, dealer.curve_secretkey = zmq.curve_keypair()
    router.bind("tcp://127.0.0.1:*")
    dealer.connect(router.getsockopt_string(zmq.LAST_ENDPOINT))
    return ctx, router, dealer


def _round_trips_per_s(curve: bool, size: int, n: int) -> float:
    ctx, router, dealer = _pair(curve)
    try:
        frame = b"x" * size
        dealer.send(frame)  # the handshake and the first round trip are not timed
        ident, _ = router.recv_multipart()
        router.send_multipart([ident, frame])
        dealer.recv()
        started = time.perf_counter()
        for _ in range(n):
            dealer.send(frame)
            ident, got = router.recv_multipart()
            router.send_multipart([ident, got])
            dealer.recv()
        return n / (time.perf_counter() - started)
    finally:
        ctx.destroy(linger=0)


def ping_pong(repeats: int = 5, n: int = 5_000) -> dict[str, Any]:
    """Round trips per second, plain and CURVE, for each frame size; medians and the ratio."""
    out: dict[str, Any] = {"n": n, "repeats": repeats, "sizes": {}}
    for size in (60, 64 * 1024):
        got: dict[str, list[float]] = {"curve": [], "insecure": []}
        for rep in range(repeats):
            for curve in ((True, False) if rep % 2 == 0 else (False, True)):
                got["curve" if curve else "insecure"].append(_round_trips_per_s(curve, size, n))
        med = {mode: statistics.median(values) for mode, values in got.items()}
        out["sizes"][size] = {"medians": med, "ratio": med["curve"] / med["insecure"]}
    return out


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
    if any(r is not None for r in got["ranges"].values()):
        sec.text += ["", "Range of the repeats (tasks/s): " + "; ".join(
            f"{mode} {fmt(r[0])}–{fmt(r[1])}" for mode, r in got["ranges"].items() if r is not None) + "."]
    pong = ping_pong()
    sec.text += ["", "The master packs many messages into a frame when tasks are this short, which hides the "
                 "per-message cost in the noise of a shared machine;", *pong_lines(pong)]
    for size, row in pong["sizes"].items():
        sec.summary.append((f"encryption: ping-pong {size} B, CURVE / plain", fmt(row["ratio"], ".2f"), "(measured)",
                            "n/a"))
    sec.medians.update(curve_tps=m["curve"]["tps"], insecure_tps=m["insecure"]["tps"], curve_ratio=ratio)
    return sec


def pong_lines(pong: dict[str, Any]) -> list[str]:
    """The transport-alone table, as markdown lines."""
    lines = [f"the transport alone (one message in flight, {pong['n']:,} round trips, {pong['repeats']} repeats, "
             "medians, round trips per second):", "",
             "| frame | plain | CURVE | CURVE / plain |", "|---|---:|---:|---:|"]
    for size, row in pong["sizes"].items():
        label = f"{size} B" if size < 1024 else f"{size // 1024} KiB"
        lines.append(f"| {label} | {fmt(row['medians']['insecure'])} | {fmt(row['medians']['curve'])} | "
                     f"{fmt(row['ratio'], '.2f')} |")
    return lines
