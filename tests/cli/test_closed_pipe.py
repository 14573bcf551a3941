"""A reader that closes the pipe early (``bats-master results | head``) is not an error: no
traceback, and the command's own exit status."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.runs import MASTER, write_bag


def _read_a_little_then_close(argv: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()  # as `head -c 100` does
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


def test_results_report_and_a_run_into_a_closed_pipe_end_quietly(tmp_path: Path):
    bag = write_bag(tmp_path / "tasks.txt", ["printf '%0400d' 0"] * 400)  # results far beyond a pipe's buffer
    code, err = _read_a_little_then_close([*MASTER, "--quiet", "--bag", str(bag)], tmp_path)
    assert code == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
    for command in (["results"], ["results", "--format", "csv"], ["report"]):
        code, err = _read_a_little_then_close([*MASTER, *command, "--state-dir", "bats-run"], tmp_path)
        assert code == 0 and "Traceback" not in err and "BrokenPipe" not in err, (command, err)
