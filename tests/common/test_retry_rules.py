"""The config's [retry] rules: parsed with one-line errors naming the file and table, decided by the
first rule that matches an attempt's exit code and cause; a run on local workers retries exit 137
and a signal but not exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.runs import MASTER, results, write_bag

from bats.common.config import ConfigError, load_config
from bats.common.retry import RetryRules, cause_of, parse_retry
from bats.provisioners import options_of

RULES = """
[retry]
attempts = 2
rules = [
  { cause = "timeout", action = "retry" },
  { cause = "signal", action = "retry" },
  { exit = [137, "200-255"], action = "retry" },
  { exit = "1-127", action = "fail" },
]
"""


def test_the_first_matching_rule_decides_and_an_unmatched_failure_is_retried():
    rules = parse_retry("c.toml: [retry]", {"attempts": 2, "rules": [
        {"cause": "timeout", "action": "retry"}, {"exit": [137, "200-255"], "action": "retry"},
        {"exit": "1-127", "action": "fail"}, {"cause": "signal", "action": "fail"}]})
    assert rules.attempts == 2
    assert rules.decide(2, False) == "fail"
    assert rules.decide(137, False) == "retry"
    assert rules.decide(254, False) == "retry"
    assert rules.decide(128, False) == "retry"  # no rule: retried, as without rules
    assert rules.decide(-9, False) == "fail"  # killed by SIGKILL
    assert rules.decide(-9, True) == "retry"  # the timeout kills with SIGKILL too: its cause is the timeout
    assert (cause_of(1, False), cause_of(-15, False), cause_of(-9, True)) == ("exit", "signal", "timeout")
    assert RetryRules().decide(2, False) == "retry"


def test_only_a_rule_naming_the_lost_cause_decides_for_a_lost_machines_tasks():
    rules = parse_retry("c.toml: [retry]", {"rules": [
        {"action": "fail"}, {"cause": "lost", "action": "retry"}, {"cause": "lost", "action": "fail"}]})
    assert rules.decide_lost() == "retry"  # the first rule naming it; "any failure" is about exits
    assert rules.decide(-9, False) == "fail"  # and a lost-machine rule never matches an attempt that ended
    assert parse_retry("w", {"rules": [{"cause": "lost", "action": "retry"}]}).decide(2, False) == "retry"
    assert parse_retry("w", {"rules": [{"exit": 137, "action": "fail"}]}).decide_lost() is None


@pytest.mark.parametrize(("table", "message"), [
    ('[retry]\nrules = [{ exit = 2 }]', "c.toml:2: [retry] rules[0] action: expected \"retry\" or \"fail\", got None"),
    ('[retry]\nrules = [{ cause = "gone", action = "fail" }]', "rules[0] cause: expected one of exit, signal, timeout, lost"),
    ('[retry]\nrules = [{ cause = "lost", exit = 1, action = "fail" }]', "rules[0]: cause \"lost\" has no exit code"),
    ('[retry]\nrules = [{ exit = "9-2", action = "fail" }]', "rules[0] exit: expected exit codes such as 137"),
    ('[retry]\nattempts = -1', "[retry] attempts: expected a whole number 0 or more, got -1"),
    ('[retry]\ntries = 3', "[retry] tries: unknown key (expected attempts and rules)"),
    ('[retry]\nrules = [{ exit = 2, action = "fail", when = 1 }]', "rules[0] when: unknown key"),
])
def test_a_bad_rule_is_a_one_line_error_naming_the_file(tmp_path: Path, table: str, message: str):
    path = tmp_path / "c.toml"
    path.write_text(table + '\n[clusters.local]\nprovisioner = "local"\nmax = 1\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, options_of)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(path) in str(caught.value) or "c.toml" in str(caught.value)


def test_a_run_retries_exit_137_and_a_signal_but_not_exit_2(tmp_path: Path):
    (tmp_path / "c.toml").write_text(RULES + '\n[clusters.local]\nprovisioner = "local"\nmax = 2\n')
    write_bag(tmp_path / "tasks.txt", [
        "exit 2",
        "test -e m137 || { touch m137; exit 137; }",
        "test -e mkill || { touch mkill; kill -9 $$; }",
        "true",
    ])
    proc = subprocess.run([*MASTER, "--quiet", "--bag", "tasks.txt", "--config", "c.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr  # task 1 failed
    by_task = {r["id"]: r for r in results(tmp_path / "bats-run")}
    assert (by_task[1]["status"], by_task[1]["exit_code"], by_task[1]["attempts"]) == ("failed", 2, 1)
    assert (by_task[2]["status"], by_task[2]["attempts"]) == ("done", 2)
    assert (by_task[3]["status"], by_task[3]["attempts"]) == ("done", 2)
    assert by_task[4]["status"] == "done"


def _lost_run(tmp_path: Path, rules: str, poison: str) -> tuple[subprocess.CompletedProcess[str], dict[int, dict]]:
    (tmp_path / "c.toml").write_text(f"[retry]\n{rules}\n" + '[clusters.local]\nprovisioner = "local"\nmax = 2\n')
    commands = [f"echo {i}" for i in range(1, 7)]
    commands[2] = poison  # its shell's parent is the worker: killing it loses the machine under the task
    write_bag(tmp_path / "tasks.txt", commands)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", "tasks.txt", "--config", "c.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return proc, {r["id"]: r for r in results(tmp_path / "bats-run")}


def test_a_lost_machine_rule_fails_its_task_at_the_first_loss_on_real_workers(tmp_path: Path):
    proc, by_task = _lost_run(tmp_path, 'rules = [{ cause = "lost", action = "fail" }]',
                              "sleep 0.5; kill -9 $PPID; sleep 5")
    assert proc.returncode == 1, proc.stderr
    assert "task 3 was running on local-" in proc.stderr and "[retry] fails a lost machine's task" in proc.stderr
    assert (by_task[3]["status"], by_task[3]["attempts"]) == ("failed", 1)  # not run on a second machine
    assert all(by_task[i]["status"] == "done" for i in (1, 2, 4, 5, 6)), by_task


def test_a_lost_machine_retried_by_rule_counts_as_an_attempt_on_real_workers(tmp_path: Path):
    once = "test -e lost-once || { touch lost-once; sleep 0.5; kill -9 $PPID; sleep 5; }"
    proc, by_task = _lost_run(tmp_path, 'attempts = 1\nrules = [{ cause = "lost", action = "retry" }]', once)
    assert proc.returncode == 0, proc.stderr
    assert (by_task[3]["status"], by_task[3]["attempts"]) == ("done", 2)
    # with no attempt left, the same loss fails the task rather than sending it to another machine
    (tmp_path / "again").mkdir()
    proc, by_task = _lost_run(tmp_path / "again", 'attempts = 0\nrules = [{ cause = "lost", action = "retry" }]', once)
    assert proc.returncode == 1 and "past the 0 retries" in proc.stderr, proc.stderr
    assert (by_task[3]["status"], by_task[3]["attempts"]) == ("failed", 1)
