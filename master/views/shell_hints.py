"""Which shell ran the tasks, and a hint when a failed task's command looks written for bash.

Tasks run with ``/bin/sh -c`` unless ``[master] shell`` names another shell; on Debian and Ubuntu
``/bin/sh`` is dash, where ``$RANDOM`` is empty and ``[[`` is "not found". A failed task whose
command uses such syntax is named in the summary with the shell that ran it. Pure text, no I/O.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from typing import Any

# constructs POSIX sh lacks (bash, ksh and zsh have them), each with the name the hint shows
BASH_ONLY: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("[[", re.compile(r"(^|[\s;&|(!])\[\[\s")),
    ("$RANDOM", re.compile(r"\$\{?RANDOM\b")),
    ("$BASH...", re.compile(r"\$\{?BASH(_[A-Z]+)?\b")),
    ("$PIPESTATUS", re.compile(r"\$\{?PIPESTATUS\b")),
    ("<(...)", re.compile(r"[<>]\(")),
    ("{a..b}", re.compile(r"\{-?\w+\.\.-?\w+(\.\.-?\d+)?\}")),
    ("&>", re.compile(r"&>")),
    ("function", re.compile(r"(^|[\s;&|])function\s+\w+")),
    ("source", re.compile(r"(^|[\s;&|])source\s")),
    ("declare/local -a", re.compile(r"(^|[\s;&|])(declare|typeset|shopt|mapfile|readarray)\s")),
    ("arrays", re.compile(r"\w+=\(|\$\{\w+\[")),
)
BASH_LIKE = frozenset({"bash", "ksh", "mksh", "zsh"})


def bash_only(command: str) -> str | None:
    """The first bash-only construct ``command`` uses (its name, e.g. ``[[``), None when it uses none."""
    for name, pattern in BASH_ONLY:
        if pattern.search(command):
            return name
    return None


def add_shell_hints(report: dict[str, Any], shell: str, command_of: Callable[[int], str]) -> None:
    """Put the tasks' shell in ``report`` (``shell``) and, when it is not bash-like, the failed tasks
    whose command uses bash-only syntax (``tasks.bash_syntax``: {id: construct}, at most 50)."""
    report["shell"] = shell
    if os.path.basename(shell) in BASH_LIKE:
        return
    found: dict[str, str] = {}
    for task in itertools.islice(report.get("tasks", {}).get("failed_ids") or (), 10_000):
        construct = bash_only(command_of(task))
        if construct is not None:
            found[str(task)] = construct
            if len(found) == 50:
                break
    if found:
        report["tasks"]["bash_syntax"] = found


def shell_lines(report: dict[str, Any]) -> list[str]:
    """The summary's line about the shell: only when some task failed."""
    tasks = report.get("tasks", {})
    if not tasks.get("failed"):
        return []
    shell = report.get("shell") or "/bin/sh"
    hinted = tasks.get("bash_syntax") or {}
    if not hinted:
        return [f"  shell     the tasks ran with {shell} -c ([master] shell chooses another)"]
    ids = list(hinted)
    shown = ", ".join(f"{task} ({hinted[task]})" for task in ids[:5]) + (f" and {len(ids) - 5} more"
                                                                         if len(ids) > 5 else "")
    return [f"  shell     the tasks ran with {shell} -c; failed task(s) {shown} use bash syntax: "
            "set [master] shell = \"bash\" in the config"]

