"""The suite's layout: tests/<folder>/ mirrors the code (core, server, sim, state, views, cli,
provisioners, worker, common), with end-to-end runs in e2e/, the bench scripts' tests in bench/, the
built wheel's in packaging/ and the deploy recipes' in deploy/. Shared code is in tests/helpers/.

Markers say what a test file needs, so ``make test-fast`` (``-m "not e2e and not daemons and not
browser and not cloud"``) runs the unit tests alone: e2e (real processes), daemons (sshd, Grid
Engine, Slurm), browser (Chromium), cloud (moto, libcloud). They come from where a file is and what
it imports, never from a list of files: everything in e2e/, deploy/ and packaging/ is e2e, and a
file that imports one of :data:`IMPORTS`' modules (or a name from it) gets that marker. A file
whose needs its imports do not show says so itself (``pytestmark = pytest.mark.daemons``).

``make test-fast`` also loads the ``fast`` hypothesis profile: every property test runs at most
:data:`FAST_EXAMPLES` examples there (its own ``@settings`` count otherwise), so the unit tests take
well under a minute; ``make test`` runs the full counts.

``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadfile``), scheduled by
:class:`ByFile` (from :func:`pytest_xdist_make_scheduler`): a test file runs whole on one worker,
so its module-scoped fixtures (a moto server, a Debian root, a bench script's run) start once, and
the files marked ``daemons`` run together, one after another, on one worker: the single-node Grid
Engine and Slurm are one machine-wide queue each, which a test may start and stop, list and drain.
(xdist's own ``xdist_group`` marks do not group under pytest 9, whose node ids they cannot rename.)
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from hypothesis import settings

FOLDERS = {"e2e": "e2e", "deploy": "e2e", "packaging": "e2e"}
IMPORTS = {
    "e2e": ("subprocess", "multiprocessing", "pty", "helpers.runs", "helpers.faults", "helpers.hostile",
            "helpers.terminal", "helpers.netproxy", "helpers.backends", "helpers.daemons", "helpers.cloud_harness",
            "selenium"),
    "daemons": ("helpers.daemons", "helpers.backends"),
    "browser": ("selenium",),
    "cloud": ("helpers.cloud_harness", "moto", "libcloud"),
}
FAST_EXAMPLES = 5
SHARED_GROUP = "daemons"

settings.register_profile("fast", max_examples=FAST_EXAMPLES, deadline=None)


@functools.cache
def imported(path: Path) -> frozenset[str]:
    """The modules a test file imports, and ``module.name`` for each name it imports from one."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)


@functools.cache
def own_marks(path: Path) -> frozenset[str]:
    """The markers a test file gives itself: ``pytestmark = pytest.mark.NAME`` (or a list of them)."""
    marks: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark":
                    marks.add(sub.attr)
    return frozenset(marks)


def marks_of(path: Path, root: Path) -> set[str]:
    """The markers a test file gets from its folder and its imports (see the module docstring)."""
    marks = set()
    folder = path.relative_to(root).parts[0] if path.is_relative_to(root) else ""
    if folder in FOLDERS:
        marks.add(FOLDERS[folder])
    names = imported(path)
    for mark, modules in IMPORTS.items():
        if any(name == m or name.startswith(m + ".") for name in names for m in modules):
            marks.add(mark)
    return marks


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath / "tests"
    fast = config.getoption("hypothesis_profile", None) == "fast"
    for item in items:
        if item.path.suffix == ".py":
            for mark in sorted(marks_of(item.path, root)):
                item.add_marker(mark)
        if fast:
            _cap_examples(item)


def _cap_examples(item: pytest.Item) -> None:
    """A property test's own ``@settings(max_examples=N)`` wins over a profile: in the fast profile
    it is capped at FAST_EXAMPLES here (hypothesis keeps a test's settings on the test function)."""
    test = getattr(item, "obj", None)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is not None and own.max_examples > FAST_EXAMPLES:
        test._hypothesis_internal_use_settings = settings(own, max_examples=FAST_EXAMPLES)  # type: ignore[union-attr]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``--dist loadfile``: :class:`ByFile` (see the module docstring); other modes are xdist's."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByFile(LoadFileScheduling):
        """One test file per unit of work, and every ``daemons`` file in one unit, :data:`SHARED_GROUP`."""

        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            path = config.rootpath / file
            daemons = path.suffix == ".py" and "daemons" in marks_of(path, config.rootpath / "tests") | own_marks(path)
            return SHARED_GROUP if daemons else file

    return ByFile(config, log)  # type: ignore[arg-type]
