"""A state directory belongs to one master at a time and to its user: a second master is refused
naming the pid that holds it, an edited bag or config (or a deleted config) is refused on --resume,
and the run's files are private (directories 0700, files 0600)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import psutil
from helpers.runs import MASTER, wait_for

CONFIG = """
[clusters.local]
provisioner = "local"
max = 2
"""


def start(tmp_path: Path, commands: list[str]) -> tuple[subprocess.Popen, Path]:
    bag = tmp_path / "tasks.txt"
    bag.write_text("\n".join(commands) + "\n")
    config = tmp_path / "clusters.toml"
    config.write_text(CONFIG)
    proc = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, tmp_path / "bats-run"


def master(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MASTER, "--quiet", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_a_second_master_on_a_live_state_dir_is_refused_naming_the_holder(tmp_path):
    proc, state = start(tmp_path, ["sleep 3"] * 4)
    try:
        wait_for(lambda: (state / "journal.sqlite").exists(), 30, "the run to start")
        second = master(tmp_path, "--resume", "--state-dir", str(state))
        assert second.returncode == 2
        assert f"in use by another bats-master (pid {proc.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        fresh = master(tmp_path, "--bag", str(tmp_path / "tasks.txt"), "--state-dir", str(state))
        assert fresh.returncode == 2 and "holds a run already" in fresh.stderr
    finally:
        assert proc.wait(timeout=120) == 0
    # once the first master is gone, the state dir is free again
    done = master(tmp_path, "--resume", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr


def test_the_run_is_private_and_an_edited_bag_or_config_is_refused_on_resume(tmp_path):
    proc, state = start(tmp_path, ["true"] * 3)
    assert proc.wait(timeout=120) == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for name in ("journal.sqlite", "bag.txt", "config.toml"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name
    bag = state / "bag.txt"
    original = bag.read_bytes()
    bag.write_bytes(original.replace(b"true", b"echo x", 1))
    edited = master(tmp_path, "--resume", "--state-dir", str(state))
    assert edited.returncode == 2 and "bag.txt: changed since the run started" in edited.stderr
    bag.write_bytes(original)
    config = state / "config.toml"
    config.write_text(CONFIG.replace("max = 2", "max = 9"))
    changed = master(tmp_path, "--resume", "--state-dir", str(state))
    assert changed.returncode == 2 and "config.toml: changed since the run started" in changed.stderr
    config.unlink()
    missing = master(tmp_path, "--resume", "--state-dir", str(state))
    assert missing.returncode == 2 and "config.toml: missing" in missing.stderr
    assert not psutil.Process().children(recursive=True)
