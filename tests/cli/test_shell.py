"""``[master] shell``: the shell the workers run tasks with (``/bin/sh`` by default), carried to them
in the welcome; a failed task written for bash is named in the summary with the shell that ran it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.runs import MASTER, write_bag

from bats import provisioners
from bats.common.config import ConfigError, load_config
from bats.master.views.shell_hints import add_shell_hints, bash_only, shell_lines

BASH_TASK = 'x=0; [[ $x -eq 0 ]] && echo "bash $RANDOM"'


@pytest.mark.parametrize("command, construct", [
    ("[[ -f x ]] && echo y", "[["),
    ("echo $RANDOM", "$RANDOM"),
    ("echo ${RANDOM}", "$RANDOM"),
    ("diff <(sort a) <(sort b)", "<(...)"),
    ("for i in {1..5}; do echo $i; done", "{a..b}"),
    ("make &> log", "&>"),
    ("source env.sh; run", "source"),
    ("a=(1 2 3); echo ${a[1]}", "arrays"),
])
def test_bash_only_syntax_is_recognised(command, construct):
    assert bash_only(command) == construct


@pytest.mark.parametrize("command", ["echo hi", "[ -f x ] && echo y", "sleep 0.2 > out 2>&1",
                                     "echo $((1 + 2))", "x=$(date); echo \"$x\"", "test -n \"$HOME\""])
def test_posix_commands_get_no_hint(command):
    assert bash_only(command) is None


def test_hints_only_for_failed_tasks_and_not_under_bash():
    commands = {1: "echo $RANDOM", 2: "true", 3: "[[ 1 ]]"}
    report = {"tasks": {"failed": 2, "failed_ids": [1, 2]}}
    add_shell_hints(report, "/bin/sh", commands.__getitem__)
    assert report["shell"] == "/bin/sh" and report["tasks"]["bash_syntax"] == {"1": "$RANDOM"}
    assert "failed task(s) 1 ($RANDOM) use bash syntax" in shell_lines(report)[0]
    under_bash = {"tasks": {"failed": 2, "failed_ids": [1, 3]}}
    add_shell_hints(under_bash, "/usr/bin/bash", commands.__getitem__)
    assert "bash_syntax" not in under_bash["tasks"]
    assert shell_lines(under_bash) == ["  shell     the tasks ran with /usr/bin/bash -c ([master] shell chooses another)"]
    assert shell_lines({"tasks": {"failed": 0}, "shell": "/bin/sh"}) == []


@pytest.mark.parametrize("value", ["", "bash -e", "ba\nsh", 3, "a;b"])
def test_a_shell_that_is_not_one_word_is_refused(tmp_path, value):
    path = tmp_path / "c.toml"
    path.write_text(f"[master]\nshell = {json.dumps(value)}\n[clusters.a]\nprovisioner = \"local\"\nmax = 1\n")
    with pytest.raises(ConfigError, match=r"c\.toml:2: \[master\] shell: "):
        load_config(path, provisioners.options_of)


def _run(tmp_path: Path, name: str, config: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "c.toml").write_text(config + '[clusters.local]\nprovisioner = "local"\nmax = 1\n')
    bag = write_bag(folder / "tasks.txt", ["true", BASH_TASK])
    proc = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", "c.toml"], cwd=folder,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return proc, json.loads((folder / "bats-run" / "report.json").read_text())


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_configured_shell_runs_the_tasks(tmp_path):
    proc, report = _run(tmp_path, "bash", '[master]\nshell = "bash"\n')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["shell"] == "bash" and report["tasks"]["done"] == 2
    if os.path.basename(os.path.realpath("/bin/sh")) == "bash":
        pytest.skip("/bin/sh is bash here: the default shell runs bash syntax too")
    proc, report = _run(tmp_path, "sh", "")
    assert proc.returncode == 1
    assert report["shell"] == "/bin/sh" and report["tasks"]["bash_syntax"] == {"2": "[["}
    assert ('shell     the tasks ran with /bin/sh -c; failed task(s) 2 ([[) use bash syntax: '
            'set [master] shell = "bash" in the config') in proc.stdout
