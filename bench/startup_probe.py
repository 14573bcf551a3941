"""Measure, in a fresh process, what ``bats-master`` does with a bag before its first dispatch.

    python bench/startup_probe.py BAG STATE_DIR

The steps mirror ``bats.master.cli.commands._prepare`` and the start of ``run``: load the bag, create the
journal in STATE_DIR, write the bag copy ``bag.txt``, build the core and hand it ``RunStarted``.
Prints one JSON object: the seconds those steps took (``seconds``; imports are timed apart in
``import_s``), the peak RSS of this process (``peak_rss_mib``, from ``getrusage``) and its RSS
before the bag was read (``rss_before_mib``, for scale).
"""

from __future__ import annotations

import json
import os
import random
import resource
import secrets
import sys
import time
from pathlib import Path


def _current_rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> int:
    bag_path, state_dir = sys.argv[1], Path(sys.argv[2])
    t0 = time.perf_counter()
    from bats.common import __version__
    from bats.common.config import default_config
    from bats.master.core import Core, RunStarted
    from bats.master.state.bag import load_bag
    from bats.master.state.journal import Journal

    import_s = time.perf_counter() - t0
    rss_before = _current_rss_mib()

    steps: dict[str, float] = {}
    start = mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        steps[name] = round(now - mark, 4)
        mark = now

    bag = load_bag(bag_path)
    lap("load_bag")
    config = default_config(2)
    meta = {"bag_path": os.path.abspath(bag_path), "bag_sha256": bag.sha256, "tasks": len(bag),
            "config_path": None, "settings": {"retries": 0, "task_timeout_s": None, "seed": 1, "workers": 2},
            "started_at": time.time(), "version": __version__}
    journal = Journal.create(state_dir, secrets.token_hex(8), meta)
    lap("journal_create")
    (state_dir / "bag.txt").write_bytes(b"\n".join(bag.lines) + b"\n")
    lap("write_bag_copy")
    core = Core(bag.task_ids, config.clusters, random.Random(1))
    lap("core_init")
    actions = core.handle(RunStarted(time.time()))
    lap("run_started")
    seconds = time.perf_counter() - start

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    journal.close()
    print(json.dumps({
        "tasks": len(bag), "seconds": round(seconds, 4), "steps": steps, "import_s": round(import_s, 4),
        "peak_rss_mib": round(peak, 1), "rss_before_mib": round(rss_before, 1),
        "first_actions": [type(a).__name__ for a in actions],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
