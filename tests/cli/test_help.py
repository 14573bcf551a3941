"""``--help`` stands for a man page: every option of the three commands and of bats-master's
subcommands has help text, bats-master's usage line names its subcommands, ``python -m bats`` names
and runs the three commands, and ``bats-master completion bash`` is a bash script made from the
same parsers (checked by bash itself)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

import pytest

from bats.master.cli import parsers
from bats.master.cli.completion import bash_script, command_parsers, options_of

HIDDEN = {("bats-worker", "--token")}  # kept for old images only; a token on the command line is visible in ps


@pytest.mark.parametrize("name", sorted(command_parsers()))
def test_every_option_has_help_text(name):
    parser = command_parsers()[name]
    assert parser.description, name
    for action in parser._actions:
        option = action.option_strings[-1] if action.option_strings else action.dest
        if (name, option) in HIDDEN:
            assert action.help == argparse.SUPPRESS
            continue
        assert action.help and action.help != argparse.SUPPRESS and len(action.help) > 8, (name, option)


def test_the_usage_line_names_the_subcommands():
    usage = parsers.run_parser().format_usage()
    for sub in parsers.SUBCOMMANDS:
        assert sub in usage
    assert "--resume [--retry-failed]" in usage and "--dry-run" in usage
    assert set(parsers.subcommand_parsers()) == set(parsers.SUBCOMMANDS)


def _python_m_bats(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bats", *args], capture_output=True, text=True, timeout=60)


def test_python_m_bats_names_and_runs_the_three_commands():
    shown = _python_m_bats()
    assert shown.returncode == 0
    for word in ("bats-master", "bats-sim", "bats-worker", "master", "sim", "worker"):
        assert word in shown.stdout
    assert _python_m_bats("master", "--version").stdout.strip() == "bats 0.1.0"
    assert "--runtimes" in _python_m_bats("sim", "--help").stdout
    assert "--server-key" in _python_m_bats("bats-worker", "--help").stdout
    wrong = _python_m_bats("mastr")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "unknown command 'mastr'" in wrong.stderr


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> str:
    out = subprocess.run([sys.executable, "-m", "bats.master.cli", "completion", "bash"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == bash_script()
    path = tmp_path_factory.mktemp("completion") / "bats.bash"
    path.write_text(out.stdout)
    return str(path)


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@needs_bash
def test_bash_accepts_the_completion_script_and_it_lists_every_option(script):
    assert subprocess.run(["bash", "-n", script], timeout=30).returncode == 0
    text = open(script).read()
    for parser in command_parsers().values():
        for option in options_of(parser):
            assert option in text
    assert "--token " not in text  # the hidden option is not proposed


def _complete(script: str, *words: str) -> list[str]:
    """What the script proposes for the command line ``words`` (the last one being completed)."""
    line = " ".join(f"'{w}'" for w in words)
    program = (f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
               '_bats_complete; printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return sorted(filter(None, out.stdout.splitlines()))


@needs_bash
def test_the_script_completes_subcommands_options_and_choices(script, tmp_path):
    assert _complete(script, "bats-master", "--re") == ["--report", "--results", "--resume", "--retries",
                                                        "--retry-failed"]
    assert _complete(script, "bats-master", "re") == ["report", "results"]
    assert _complete(script, "bats-master", "results", "--format", "") == ["csv", "jsonl"]
    assert _complete(script, "bats-master", "results", "--f") == ["--failed", "--format"]
    assert _complete(script, "/usr/local/bin/bats-sim", "--pol") == ["--policy"]
    assert _complete(script, "bats-sim", "--policy", "a") == ["adaptive", "auto"]
    assert _complete(script, "bats-worker", "--log-level", "W") == ["WARNING"]
    assert _complete(script, "bats-master", "completion", "") == ["bash", "zsh"]
    assert _complete(script, "bats-master", "--schedule", "") == ["budget:", "cheapest", "fastest"]
    assert _complete(script, "bats-sim", "--schedule", "f") == ["fastest"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_loads_the_completion_and_completes_schedule_values(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bats.master.cli", "completion", "zsh"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "bats.zsh"
    path.write_text(out.stdout)
    # bashcompinit's wrapper calls the function with ksharrays set (bash's 0-based arrays), as here
    program = (f"source {path}; setopt ksharrays; COMP_WORDS=(bats-master --schedule ''); COMP_CWORD=2; "
               '_bats_complete; print -l -- "${COMPREPLY[@]}"; complete -p bats-master')
    done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=30,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sorted(lines[:3]) == ["budget:", "cheapest", "fastest"]  # zsh itself then matches what was typed
    assert lines[3] == "complete -o default -F _bats_complete bats-master"  # registered for the command


def test_the_zsh_script_is_the_bash_one_behind_bashcompinit():
    from bats.master.cli.completion import zsh_script

    text = zsh_script()
    assert "bashcompinit" in text and bash_script() in text


def test_completion_for_another_shell_is_bad_input():
    out = subprocess.run([sys.executable, "-m", "bats.master.cli", "completion", "fish"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.startswith("bats-master: error: argument shell: invalid choice: 'fish'")
