"""``--results DIR``: each task's whole stdout and stderr in DIR/ID/, beside the journal's 64 KiB tails;
exit codes unchanged, an ``exit`` in a command ending only the command, a retried task's last attempt
kept. (Over ssh: tests/provisioners/test_provisioner_ssh.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.runs import MASTER, results, write_bag

pytestmark = pytest.mark.e2e


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MASTER, "--quiet", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_every_task_keeps_its_whole_output(tmp_path: Path):
    write_bag(tmp_path / "tasks.txt", [
        "seq 1 200000",  # about 1.3 MB: more than the 64 KiB tail the journal keeps
        "echo to-err >&2; echo to-out; exit 3",
        "for i in 1 2 3; do echo $i; done; exit 0",
        "test -e again || { touch again; echo first; exit 9; }; echo second",  # retried: the last attempt kept
        "printf 'no newline'",
    ])
    done = _run(tmp_path, "--bag", "tasks.txt", "--workers", "2", "--retries", "1", "--results", "out")
    assert done.returncode == 1, done.stderr  # task 2 failed
    out = tmp_path / "out"
    whole = "".join(f"{i}\n" for i in range(1, 200001))
    assert (out / "1" / "stdout").read_text() == whole and (out / "1" / "stderr").read_text() == ""
    assert (out / "2" / "stdout").read_text() == "to-out\n" and (out / "2" / "stderr").read_text() == "to-err\n"
    assert (out / "3" / "stdout").read_text() == "1\n2\n3\n"
    assert (out / "4" / "stdout").read_text() == "second\n"
    assert (out / "5" / "stdout").read_text() == "no newline"
    assert sorted(p.name for p in out.iterdir()) == ["1", "2", "3", "4", "5"]
    assert not [p for p in out.rglob(".*")]  # no temporary file left
    by_id = {r["id"]: r for r in results(tmp_path / "bats-run")}
    assert [by_id[i]["exit_code"] for i in range(1, 6)] == [0, 3, 0, 0, 0]
    assert by_id[1]["stdout"] == whole[-64 * 1024:]  # the journal's tail, as without --results
    assert by_id[2]["stderr"] == "to-err\n" and by_id[4]["attempts"] == 2


def test_a_results_folder_that_cannot_be_written_is_bad_input(tmp_path: Path):
    write_bag(tmp_path / "tasks.txt", ["true"])
    (tmp_path / "file").write_text("")
    done = _run(tmp_path, "--bag", "tasks.txt", "--workers", "1", "--results", "file/out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--results" in done.stderr and "cannot write there" in done.stderr
    assert not (tmp_path / "bats-run").exists()
