"""The config's ``[files]``: data a run ships to its machines and brings back.

    [files]
    inputs = ["ref.fa", "tools/score.py"]   # sent to every machine once (relative to the config file)
    setup = "python3 -m venv env && env/bin/pip install -q numpy"   # on each machine, before its first task
    outputs = ["result-{id}.txt", "plots/{id}.png"]   # per task, brought back to STATE_DIR/files/outputs/ID/
    max_output = "50MB"                     # the most one output file may hold (default 100MB)

How this works. Every machine has a files folder, ``$BATS_FILES`` in its tasks' environment (on a
local machine the run's ``STATE_DIR/files``; over ssh a folder in the host's ``log_dir``). The inputs
go to ``$BATS_FILES/inputs`` once per machine (their names, sizes and SHA-256 are the set's identity:
a host that has the same set already gets nothing). ``setup`` runs there with ``/bin/sh`` when a
machine is acquired, before its worker starts; if it fails the machine is given up and the error
names the setup, its exit status and the end of its output. Each task runs in its own folder
``$BATS_FILES/tasks/ID`` holding links to the inputs; when it ends, the files matching ``outputs``
(``{id}`` is the task's id) move to ``$BATS_FILES/outputs/ID``, and a file over ``max_output``
fails the task with a message saying so. Outputs of machines elsewhere are brought to the state dir
when the machine is released. Pure data here; the commands are :mod:`bats.master.state.files`'s.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_OUTPUT = 100 * 1000 * 1000
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_PATTERN = re.compile(r"^[A-Za-z0-9_.{}/-]+$")


@dataclass(frozen=True)
class FilesConfig:
    inputs: tuple[str, ...] = ()  # as the config says; absolute paths on this machine once resolved
    setup: str | None = None
    outputs: tuple[str, ...] = ()  # relative path patterns, {id} the task's id
    max_output: int = DEFAULT_MAX_OUTPUT  # bytes, per output file

    @property
    def used(self) -> bool:
        return bool(self.inputs or self.setup or self.outputs)

    def input_set(self) -> str:
        """The inputs' identity: a SHA-256 over their names and contents (a host holding the same
        set is sent nothing)."""
        digest = hashlib.sha256()
        for path in self.inputs:
            digest.update(os.path.basename(path).encode() + b"\0")
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            digest.update(b"\0")
        return digest.hexdigest()


def parse_size(text: Any) -> int:
    """``"50MB"``, ``"512KB"``, ``1000`` -> bytes (decimal units); ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    found = _SIZE.match(str(text)) if isinstance(text, str) else None
    if not found:
        raise ValueError(f"expected a size such as \"50MB\", \"512KB\" or 1000 (bytes), got {text!r}")
    value = float(found.group(1)) * 1000 ** " KMGT".index(found.group(2).upper() or " ")
    if value < 1:
        raise ValueError(f"must be at least 1 byte, got {text!r}")
    return int(value)


def resolved(files: FilesConfig, base_dir: str, where: str) -> FilesConfig:
    """``files`` with its inputs as absolute paths from ``base_dir`` (where the config was), each
    checked readable; ValueError naming ``where`` and the input otherwise."""
    inputs = []
    seen: dict[str, str] = {}
    for entry in files.inputs:
        path = os.path.normpath(os.path.join(base_dir, entry))
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise ValueError(f"{where} inputs: {entry}: not a readable file ({path})")
        name = os.path.basename(path)
        if name in seen:
            raise ValueError(f"{where} inputs: {entry} and {seen[name]} have one name; the machines keep inputs by name")
        seen[name] = entry
        inputs.append(path)
    return FilesConfig(tuple(inputs), files.setup, files.outputs, files.max_output)


def parse_files(where: str, raw: Any) -> FilesConfig:
    """The ``[files]`` table; ValueError with a one-line reason naming ``where``."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(raw) - {"inputs", "setup", "outputs", "max_output"})
    if unknown:
        raise ValueError(f"{where} {unknown[0]}: unknown key (expected inputs, setup, outputs and max_output)")
    inputs = _strings(f"{where} inputs", raw.get("inputs", []))
    setup = raw.get("setup")
    if setup is not None and (not isinstance(setup, str) or not setup.strip()):
        raise ValueError(f"{where} setup: expected a shell command, got {setup!r}")
    outputs = _strings(f"{where} outputs", raw.get("outputs", []))
    for pattern in outputs:
        if not _PATTERN.match(pattern) or pattern.startswith("/") or ".." in pattern.split("/"):
            raise ValueError(f"{where} outputs: {pattern!r}: a path inside the task's folder, of letters, digits, "
                             "'.', '_', '-', '/' and {id}")
    try:
        max_output = parse_size(raw.get("max_output", DEFAULT_MAX_OUTPUT))
    except ValueError as exc:
        raise ValueError(f"{where} max_output: {exc}") from None
    return FilesConfig(tuple(inputs), setup, tuple(outputs), max_output)


def _strings(where: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: expected a list of paths such as [\"data.csv\"], got {value!r}")
    return list(value)
