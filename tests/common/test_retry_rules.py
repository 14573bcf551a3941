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


@pytest.mark.parametrize(("table", "message"), [
    ('[retry]\nrules = [{ exit = 2 }]', "c.toml:2: [retry] rules[0] action: expected \"retry\" or \"fail\", got None"),
    ('[retry]\nrules = [{ cause = "lost", action = "fail" }]', "rules[0] cause: expected one of exit, signal, timeout"),
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
