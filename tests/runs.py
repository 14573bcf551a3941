"""What the end-to-end tests share: the master's command line, its exported results, killing
worker processes, and waiting for something to happen."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
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


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    """``predicate()``'s first true value, polled every 50 ms; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
