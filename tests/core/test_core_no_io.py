"""The core folder does no I/O: no module under ``master/core/`` imports a library that opens a
socket or a file, reads a clock or starts a process, and importing the whole brain loads none."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "master" / "core"
FORBIDDEN = {"zmq", "socket", "time", "subprocess", "boto3", "libcloud", "asyncio", "os", "sqlite3", "threading",
             "shutil", "pathlib", "io", "urllib", "http", "select", "signal", "psutil", "datetime"}
# the planner and the estimates get no randomness either: only the policies take a seeded Random
NO_RANDOM = {"planning/estimate.py", "planning/planner.py"}
MODULES = sorted(str(p.relative_to(CORE)) for p in CORE.rglob("*.py"))


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_walk_sees_every_policy_and_the_planning():
    assert {"base.py", "events.py", "actions.py", "billing.py", "bats/policy.py", "deadline/policy.py",
            "adaptive/policy.py", "offers/policy.py", "planning/planner.py"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_core_module_imports_no_io(module):
    forbidden = FORBIDDEN | ({"random"} if module in NO_RANDOM else set())
    assert not imported_roots(CORE / module) & forbidden


def test_importing_the_whole_core_loads_no_io_library():
    """SciPy's optimiser (the deadline ILP's HiGHS) loads ``socket`` and ``subprocess`` for itself; the
    check counts what importing the core loads beyond that."""
    names = ", ".join(f"bats.master.core.{m[:-3].replace('/', '.')}".removesuffix(".__init__") for m in MODULES)
    io = "('zmq', 'socket', 'subprocess', 'boto3', 'libcloud', 'sqlite3')"
    code = (f"import sys, scipy.optimize; before = {{m for m in {io} if m in sys.modules}}; import {names}; "
            f"print(sorted(m for m in {io} if m in sys.modules and m not in before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
