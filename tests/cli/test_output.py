"""What the command line writes reaches its reader: a reader that closes the pipe early
(``bats-master results | head``) is not an error (no traceback, the command's own exit status),
and ``--plot`` writes its picture even when ``--plan-only`` ends the run at once."""

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


def test_plan_only_with_plot_writes_the_picture(tmp_path: Path):
    from helpers.configs import CONFIG

    (tmp_path / "clusters.toml").write_text(CONFIG)
    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.2"] * 40)
    run = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", "clusters.toml", "--plan-only",
                          "--plot", "options.png"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "drawn in options.png" in run.stdout
    assert (tmp_path / "options.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_show_iso_times_and_runtimes_to_the_millisecond(tmp_path: Path):
    import datetime
    import json

    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.1", "true"])
    assert subprocess.run([*MASTER, "--quiet", "--bag", str(bag)], cwd=tmp_path, timeout=120).returncode == 0
    out = subprocess.run([*MASTER, "results", "--state-dir", "bats-run"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60).stdout
    for row in map(json.loads, out.splitlines()):
        assert row["finished_at"].endswith("Z")
        assert datetime.datetime.fromisoformat(row["finished_at"].replace("Z", "+00:00")).year >= 2024
        assert row["runtime_s"] == round(row["runtime_s"], 3)
