"""Build the worker-only wheel, ``bats_worker-VERSION-py3-none-any.whl``.

    python deploy/worker-wheel/build.py [--out DIR]      (``make worker-wheel``: DIR is dist/)

A worker machine needs ``bats.worker`` and the few ``bats.common`` modules it imports, on top of
pyzmq, msgpack and psutil; the full ``bats`` wheel would also pull numpy, scipy, matplotlib and rich.
This script copies worker/ and the import closure of its ``bats.*`` imports (read from the source with
:mod:`ast`, so a module the worker starts to import is never left out, and one it stops importing is
dropped) into a scratch tree beside this folder's pyproject.toml, then builds that tree with pip and
the setuptools of the running Python (offline, no build isolation: ``make install`` puts setuptools and
wheel in the venv). The worker importing a module of bats.master or bats.provisioners is an error here,
not a surprise on a machine.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# the distribution's packages and the repository folders they come from
FOLDERS = {"bats.worker": ROOT / "worker", "bats.common": ROOT / "common"}


def package_of(name: str) -> str | None:
    """Which of FOLDERS' packages module ``name`` is in (None: none of them)."""
    return next((p for p in FOLDERS if name == p or name.startswith(p + ".")), None)


def source(name: str) -> Path | None:
    """The source file of module or package ``name`` of FOLDERS (None: not a module there, e.g. the
    ``__version__`` of ``from bats.common import __version__``)."""
    package = package_of(name)
    if package is None:
        return None
    base = FOLDERS[package].joinpath(*name[len(package):].split(".")[1:])
    return next((f for f in (base / "__init__.py", base.with_suffix(".py")) if f.is_file()), None)


def imported(path: Path) -> set[str]:
    """The ``bats.*`` names ``path`` imports: ``import M`` gives M, ``from P import n`` gives P and P.n."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise SystemExit(f"{path}:{node.lineno}: a relative import (the worker imports bats.* by name)")
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    ours = {n for n in names if n.startswith("bats.")}
    stray = sorted(n for n in ours if package_of(n) is None)
    if stray:
        raise SystemExit(f"{path}: imports {', '.join(stray)}; the worker wheel holds "
                         f"{' and '.join(FOLDERS)} only")
    return ours


def closure() -> list[Path]:
    """Every file of worker/, and the bats.common modules they reach, with their packages' __init__."""
    todo = sorted(FOLDERS["bats.worker"].rglob("*.py"))
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen or "__pycache__" in path.parts:
            continue
        seen.add(path)
        for name in imported(path):
            parts = name.split(".")
            todo.extend(f for i in range(2, len(parts) + 1) if (f := source(".".join(parts[:i]))) is not None)
    return sorted(seen)


def stage(tree: Path) -> list[str]:
    """Copy the closure into ``tree`` as bats/worker/..., bats/common/...; returns the modules copied."""
    shutil.copy(HERE / "pyproject.toml", tree / "pyproject.toml")
    copied = []
    for path in closure():
        package, folder = next((p, f) for p, f in FOLDERS.items() if path.is_relative_to(f))
        target = tree.joinpath(*package.split("."), path.relative_to(folder))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
        copied.append(target.relative_to(tree).as_posix())
    for package, folder in FOLDERS.items():
        if (folder / "py.typed").exists():
            shutil.copy(folder / "py.typed", tree.joinpath(*package.split("."), "py.typed"))
    return copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the worker-only wheel (bats-worker).")
    parser.add_argument("--out", default=str(ROOT / "dist"), metavar="DIR", help="where the wheel goes (dist/)")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bats-worker-wheel-") as scratch:
        tree = Path(scratch, "bats-worker")
        tree.mkdir()
        stage(tree)
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                               "--no-index", "-w", str(out), str(tree)], capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            return 1
    built = sorted(out.glob("bats_worker-*.whl"), key=lambda p: p.stat().st_mtime)
    sys.stdout.write(f"{built[-1]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
