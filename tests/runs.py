"""What the end-to-end tests share: the master's command line, its exported results, and
killing worker processes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import psutil

MASTER = [sys.executable, "-m", "bats.master.cli"]


def results(state_dir: Path) -> list[dict]:
    """``bats-master results --state-dir``: one dict per task result."""
    out = subprocess.run([*MASTER, "results", "--state-dir", str(state_dir)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def kill_all(procs: list[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
