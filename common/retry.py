"""Which failed task attempts run again: the config's ``[retry]`` rules, decided by exit code and cause.

How this works. ``--retries N`` (or ``[retry] attempts``) is how many times a task may fail and still
run again. The rules say which failures deserve it; the first rule that matches an attempt decides,
and a failure no rule matches is retried (as without rules):

    [retry]
    attempts = 3
    rules = [
      { cause = "timeout", action = "retry" },     # --task-timeout cut it off
      { cause = "signal", action = "retry" },      # killed by a signal (the OOM killer: SIGKILL)
      { exit = [137, "200-255"], action = "retry" },
      { exit = "1-127", action = "fail" },         # the command's own error: running it again will not help
      { cause = "lost", action = "retry" },        # its machine was lost: counts as one of the attempts
    ]

A rule has an ``action`` (``retry`` or ``fail``) and conditions, all of which must hold: ``exit``
(exit codes and ranges ``"A-B"``, one or a list) and ``cause``: ``exit`` (it exited non-zero),
``signal`` (it was killed by a signal: the worker reports signal N as exit code -N), ``timeout``,
or ``lost``: the machine running it was lost (it stopped answering, its host went away, a spot
interruption). Only a rule naming ``cause = "lost"`` decides for a lost machine's tasks (they have no
exit code): ``fail`` records them failed at once, ``retry`` runs them again while the attempts last
(the loss counts as one). Without such a rule they go back to the bag whatever the attempts, until
the quarantine (``--max-machine-losses``) takes a task that keeps taking its machines down. Pure
data and matching, shared by the config and the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CAUSES = ("exit", "signal", "timeout", "lost")
ACTIONS = ("retry", "fail")


def cause_of(exit_code: int, timed_out: bool) -> str:
    """The cause of a failed attempt: ``timeout``, ``signal`` (a negative exit code) or ``exit``."""
    if timed_out:
        return "timeout"
    return "signal" if exit_code < 0 else "exit"


@dataclass(frozen=True)
class RetryRule:
    action: str  # "retry" or "fail"
    exit_codes: tuple[tuple[int, int], ...] = ()  # inclusive ranges; empty: any exit code
    cause: str | None = None  # one of CAUSES; None: any cause

    def matches(self, exit_code: int, timed_out: bool) -> bool:
        if self.cause == "lost":  # an attempt that ended has an exit code: its machine was not lost
            return False
        if self.cause is not None and self.cause != cause_of(exit_code, timed_out):
            return False
        return not self.exit_codes or any(low <= exit_code <= high for low, high in self.exit_codes)

    def describe(self) -> str:
        parts = []
        if self.exit_codes:
            parts.append("exit " + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in self.exit_codes))
        if self.cause is not None:
            parts.append(f"cause {self.cause}")
        return f"{' and '.join(parts) or 'any failure'}: {self.action}"


@dataclass(frozen=True)
class RetryRules:
    attempts: int | None = None  # [retry] attempts; None: --retries (default 0) decides
    rules: tuple[RetryRule, ...] = ()

    def decide(self, exit_code: int, timed_out: bool) -> str:
        """``retry`` or ``fail`` for a failed attempt (the first matching rule; none: ``retry``)."""
        for rule in self.rules:
            if rule.matches(exit_code, timed_out):
                return rule.action
        return "retry"

    def decide_lost(self) -> str | None:
        """``retry`` or ``fail`` for a task whose machine was lost under it (the first rule naming
        ``cause = "lost"``); None when no rule does (it goes back to the bag, as without rules)."""
        for rule in self.rules:
            if rule.cause == "lost":
                return rule.action
        return None


def parse_retry(where: str, raw: Any) -> RetryRules:
    """The ``[retry]`` table; ValueError with a one-line reason naming ``where`` (the file and table)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(raw) - {"attempts", "rules"})
    if unknown:
        raise ValueError(f"{where} {unknown[0]}: unknown key (expected attempts and rules)")
    attempts = raw.get("attempts")
    if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0):
        raise ValueError(f"{where} attempts: expected a whole number 0 or more, got {attempts!r}")
    rules_raw = raw.get("rules", [])
    if not isinstance(rules_raw, list):
        raise ValueError(f"{where} rules: expected a list of tables such as {{ exit = 137, action = \"retry\" }}")
    rules = tuple(_rule(f"{where} rules[{i}]", entry) for i, entry in enumerate(rules_raw))
    return RetryRules(attempts, rules)


def _rule(where: str, raw: Any) -> RetryRule:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a table such as {{ exit = 137, action = \"retry\" }}")
    unknown = sorted(set(raw) - {"exit", "cause", "action"})
    if unknown:
        raise ValueError(f"{where} {unknown[0]}: unknown key (expected exit, cause and action)")
    action = raw.get("action")
    if action not in ACTIONS:
        raise ValueError(f"{where} action: expected \"retry\" or \"fail\", got {action!r}")
    cause = raw.get("cause")
    if cause is not None and cause not in CAUSES:
        raise ValueError(f"{where} cause: expected one of {', '.join(CAUSES)}, got {cause!r}")
    if cause == "lost" and "exit" in raw:
        raise ValueError(f"{where}: cause \"lost\" has no exit code (its task never ended); drop exit")
    codes = raw.get("exit", [])
    codes = codes if isinstance(codes, list) else [codes]
    return RetryRule(action, tuple(_codes(f"{where} exit", c) for c in codes), cause)


def _codes(where: str, value: Any) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, str):
        low, sep, high = value.strip().partition("-")
        if not sep:  # "137"
            high = low
        try:
            first, last = int(low), int(high)
        except ValueError:
            first, last = 1, 0
        if first <= last:
            return first, last
    raise ValueError(f"{where}: expected exit codes such as 137, \"1-127\" or [2, \"200-255\"], got {value!r}")
