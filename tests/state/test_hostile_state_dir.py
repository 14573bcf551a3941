"""A state dir someone else prepared is refused with one line, never used: a real master on a
directory made first (mode 0777, another user's, a link for ``master.lock`` to a file of the
operator's, a link for ``logs`` to a folder the other user reads)."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest
from helpers.runs import run_master, write_bag

OTHER_UID = 65534  # nobody: the files need not belong to a user that can log in


def _start(tmp_path, state):
    bag = write_bag(tmp_path / "tasks.txt", ["true"] * 3)
    return run_master(["--bag", str(bag), "--state-dir", str(state), "--workers", "1"], tmp_path, timeout=120)


def _refused(result, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_a_state_dir_writable_by_others_is_refused(tmp_path):
    state = tmp_path / "run"
    state.mkdir()
    state.chmod(0o777)
    _refused(_start(tmp_path, state), str(state), "writable by other users", "777")
    assert os.listdir(state) == []  # nothing written


def test_a_linked_lock_is_refused_and_the_file_it_points_to_untouched(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("the operator's data\n")
    state = tmp_path / "run"
    state.mkdir(mode=0o700)
    (state / "master.lock").symlink_to(precious)
    _refused(_start(tmp_path, state), "master.lock", "symbolic link")
    assert precious.read_text() == "the operator's data\n"


def test_linked_logs_are_refused_and_nothing_lands_in_the_other_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "run"
    state.mkdir(mode=0o700)
    (state / "logs").symlink_to(elsewhere, target_is_directory=True)
    _refused(_start(tmp_path, state), "logs", "symbolic link")
    assert os.listdir(elsewhere) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory of another user needs root")
def test_another_users_state_dir_is_refused(tmp_path):
    state = tmp_path / "run"
    state.mkdir(mode=0o700)
    os.chown(state, OTHER_UID, OTHER_UID)
    _refused(_start(tmp_path, state), "belongs to another user")
    assert os.listdir(state) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_another_users_journal_in_the_operators_dir_is_refused(tmp_path):
    state = tmp_path / "run"
    state.mkdir(mode=0o700)
    (state / "journal.sqlite-wal").write_bytes(b"")
    os.chown(state / "journal.sqlite-wal", OTHER_UID, OTHER_UID)
    _refused(_start(tmp_path, state), "journal.sqlite-wal", "another user")


def test_a_fresh_state_dir_is_private(tmp_path):
    state = tmp_path / "run"
    result = _start(tmp_path, state)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "master.lock").stat().st_mode) == 0o600


def test_a_deleted_wal_is_found_on_resume_not_run_again_silently(tmp_path):
    """Results committed since the last checkpoint live in the WAL: with it deleted after a crash,
    ``--resume`` says how many are missing instead of running those tasks again."""
    import signal
    import subprocess

    from helpers.runs import MASTER, results, wait_for

    bag = write_bag(tmp_path / "tasks.txt", ["sleep 0.2"] * 40)
    state = tmp_path / "run"
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--state-dir", str(state), "--workers", "2"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = state / "journal.sqlite-mark"

    def committed() -> int:
        # read-only: neither 'bats-master results' nor a writable connection, which checkpoint the
        # WAL into the main file when they close (and the journal's own mark is not looked at here,
        # so that the run is the same on code that keeps none)
        try:
            with sqlite3.connect(f"file:{state / 'journal.sqlite'}?mode=ro", uri=True, timeout=1) as db:
                return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        except sqlite3.Error:
            return 0

    try:
        wait_for(lambda: committed() >= 6, 60, "a few results")
    finally:
        master.send_signal(signal.SIGKILL)
        master.wait()
    (state / "journal.sqlite-wal").unlink()
    (state / "journal.sqlite-shm").unlink(missing_ok=True)
    resumed = run_master(["--resume", "--state-dir", str(state)], tmp_path)
    _refused(resumed, "result(s) committed by the run are missing", "journal.sqlite-wal")
    assert f"{int(mark.read_text())} result(s) committed" in resumed.stderr
    mark.unlink()  # the operator accepts running them again
    again = run_master(["--resume", "--state-dir", str(state)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(r["id"] for r in results(state)) == list(range(1, 41))


def test_the_operators_own_folders_made_under_a_loose_umask_are_made_private(tmp_path):
    from bats.master.state.lock import check_state_dir

    state = tmp_path / "run"
    state.mkdir(mode=0o755)
    state.chmod(0o755)  # readable by others, as an older version left it: fine, made private
    (state / "logs").mkdir()
    (state / "logs").chmod(0o775)  # umask 002
    (state / "logs" / "local-s1-1.log").write_text("")
    check_state_dir(state)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "logs").stat().st_mode) == 0o700
    (state / "logs" / "planted").symlink_to(tmp_path)
    with pytest.raises(Exception, match="symbolic link"):
        check_state_dir(state)
