"""The bag file: one shell command per line; a task's id is its line number (1-based).

Blank lines and lines whose first non-blank character is ``#`` are skipped. The whole file is
read as bytes and kept as one list of lines, so a million-task bag loads in well under a second
and the commands are only decoded when a task is handed out.
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass
from pathlib import Path

from bats.common.textfiles import encoding_hint

MAX_LINE_BYTES = 64 * 1024


class BagError(ValueError):
    """A bag that cannot be run; the message reads ``FILE:LINE: reason``."""


@dataclass
class Bag:
    path: str
    lines: list[bytes]  # every line of the file, index = line number - 1
    task_ids: array  # line numbers of the lines that are tasks, ascending
    sha256: str

    def __len__(self) -> int:
        return len(self.task_ids)

    def command(self, task_id: int) -> str:
        return self.lines[task_id - 1].strip().decode("utf-8")


def load_bag(path: str | Path) -> Bag:
    """Read and check a bag file; raise :class:`BagError` on the first problem."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise BagError(f"{name}:0: is a directory, not a bag file") from None
    except OSError as exc:
        raise BagError(f"{name}:0: cannot read: {exc.strerror or exc}") from None
    nul = data.find(b"\0")
    if nul >= 0:
        where = data.count(b"\n", 0, nul) + 1
        raise BagError(f"{name}:{where}: contains a NUL byte{encoding_hint(data)}")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = data.count(b"\n", 0, exc.start) + 1
        raise BagError(f"{name}:{where}: not valid UTF-8 (byte {data[exc.start]:#04x}){encoding_hint(data)}") from None
    if data.startswith(b"\xef\xbb\xbf"):  # a byte-order mark some editors write
        data = data[3:]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if b"\r" in data:  # CRLF line ends are fine; a carriage return anywhere else is not
        for number, line in enumerate(lines, 1):
            if b"\r" in line[:-1]:
                raise BagError(f"{name}:{number}: carriage return inside a line "
                               "(old Mac line endings? save the bag with LF or CRLF line ends)")
    task_ids = array("l")
    append = task_ids.append
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_BYTES:
            raise BagError(f"{name}:{number}: line of {len(line)} bytes exceeds the {MAX_LINE_BYTES}-byte limit")
        stripped = line.strip()
        if stripped and not stripped.startswith(b"#"):
            append(number)
    if not task_ids:
        raise BagError(f"{name}:{len(lines)}: the bag holds no tasks (only blank or # lines)")
    # The hash is that of the file as the run keeps it (STATE_DIR/bag.txt: no BOM, a final newline),
    # so the original, with or without its last newline, still matches the copy on --resume.
    digest = hashlib.sha256(data)
    if not data.endswith(b"\n"):
        digest.update(b"\n")
    return Bag(path=name, lines=lines, task_ids=task_ids, sha256=digest.hexdigest())
