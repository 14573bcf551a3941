"""The inputs of a generated document, as one hash its header records, so a test can tell a stale
document from a fresh one without regenerating it.

How this works. A generator (``bench/compare.py``, ``bench/paper.py``, ``bench/paper_pareto.py``)
is fed by its own source, the modules it imports and the data files it reads. :func:`sources` finds
the modules statically: it follows every ``import`` in the script (inside functions too), and in each
module it reaches, as long as the module lies under :data:`ROOTS`, the code that decides the figures:
the policy cores, the planner, the billing, the simulator, the config and the bench helpers. The
command line, the server, the views, the provisioners, the worker and the wire format
(:data:`LEFT_OUT`) are not followed: they print and carry, they do not compute the figures. Each Python file enters the hash as its syntax tree with
the docstrings dropped (a comment, a docstring or a reformatting changes nothing); each data file
(:data:`DATA`) as its bytes; then the arguments the script ran with (those that change the output:
``--out`` and ``--quiet`` do not). :func:`line` is the header line; :func:`recorded` reads it back.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"bats.master": "master", "bats.common": "common", "bats.provisioners": "provisioners",
                "bats.worker": "worker", "bats": "bats"}  # pyproject's package-dir
# what the figures depend on: the modules of these folders and files are followed and hashed
ROOTS = ("master/core", "master/sim", "master/driver.py", "master/choosing.py", "common", "bench")
# modules those import that carry or check data without computing a figure: the wire format (the
# config reads one limit from it) and the shipping of [files]
LEFT_OUT = ("common/protocol.py", "common/files.py")
DATA = ("deploy/examples/paper/*.toml",)  # the scenarios the generators read
PREFIX = "<!-- inputs sha256:"
QUIET_ARGS = ("--out", "-q", "--quiet")  # arguments that change where and how, not what


def _file_of(module: str) -> Path | None:
    """The source file of a ``bats.*`` module or a bench neighbour; None for anything else."""
    for package, folder in sorted(PACKAGE_DIRS.items(), key=lambda kv: -len(kv[0])):
        if module == package or module.startswith(package + "."):
            rest = module[len(package):].lstrip(".").replace(".", "/")
            base = REPO / folder / rest if rest else REPO / folder
            for candidate in (base.with_suffix(".py") if rest else None, base / "__init__.py"):
                if candidate is not None and candidate.is_file():
                    return candidate
            return None
    candidate = REPO / "bench" / f"{module.split('.')[0]}.py"
    return candidate if candidate.is_file() else None


def _module_of(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    for package, folder in PACKAGE_DIRS.items():
        if parts and parts[0] == folder and package != "bats":
            return ".".join([package, *parts[1:]])
    return ".".join(parts[1:] if parts and parts[0] == "bench" else parts)


def _in_roots(path: Path) -> bool:
    rel = path.relative_to(REPO).as_posix()
    return rel not in LEFT_OUT and any(rel == root or rel.startswith(root + "/") for root in ROOTS)


def _imports(path: Path) -> Iterable[str]:
    """Every module ``path`` imports (absolute names, relative ones resolved; ``from X import Y``
    also yields ``X.Y``, which may be a module)."""
    here = _module_of(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def sources(script: Path) -> list[Path]:
    """``script`` and every module under :data:`ROOTS` it reaches by imports, sorted."""
    seen: set[Path] = set()
    todo = [script.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            found = _file_of(name)
            if found is not None and found not in seen and _in_roots(found):
                todo.append(found)
    return sorted(seen)


def _code(path: Path) -> bytes:
    """A Python file as it runs: its syntax tree without docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False).encode()


def arguments(argv: Sequence[str]) -> list[str]:
    """The arguments that change a document's content (``--out FILE`` and ``-q`` dropped)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--out":
            skip = True
            continue
        if arg.startswith("--out=") or arg in QUIET_ARGS:
            continue
        kept.append(arg)
    return kept


def fingerprint(script: Path, argv: Sequence[str] = ()) -> tuple[str, int, int]:
    """(the hash, how many Python files, how many data files) for ``script`` run with ``argv``."""
    digest = hashlib.sha256()
    code = sources(script)
    data = sorted({p for pattern in DATA for p in REPO.glob(pattern)})
    for path in code:
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + _code(path) + b"\0")
    for path in data:
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(json.dumps(arguments(argv)).encode())
    return digest.hexdigest(), len(code), len(data)


def line(script: str | Path, argv: Sequence[str]) -> str:
    """The header line recording a document's inputs."""
    value, code, data = fingerprint(Path(script), argv)
    args = " ".join(arguments(argv)) or "none"
    return (f"{PREFIX}{value} (bench/fingerprint.py: {Path(script).name} and the {code - 1} modules it imports "
            f"from {', '.join(ROOTS)}; {data} files {', '.join(DATA)}; arguments: {args}) -->")


def recorded(text: str) -> str | None:
    """The hash a document's header records, or None."""
    for row in text.splitlines():
        if row.startswith(PREFIX):
            return row[len(PREFIX):].split(" ", 1)[0]
    return None
