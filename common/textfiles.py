"""Reading the operator's small text files (config, price traces, runtime lists) with errors
that say where: ``FILE: cannot read: …`` or ``FILE:LINE: not valid UTF-8 (byte 0x..)``."""

from __future__ import annotations

import os
from collections.abc import Iterator


class UnreadableText(ValueError):
    """A text file that cannot be read; the message names ``FILE`` or ``FILE:LINE``."""


def read_utf8(path: str | os.PathLike[str], shown: str | None = None, *, bom: bool = False) -> str:
    """The file's text, or :class:`UnreadableText` (``shown``: the name the message uses;
    ``bom``: accept a leading byte-order mark)."""
    name = str(path) if shown is None else shown
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise UnreadableText(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UnreadableText(f"{name}:{line}: not valid UTF-8 (byte {data[exc.start]:#04x})"
                             f"{encoding_hint(data)}") from None


def encoding_hint(data: bytes) -> str:
    """A hint for an error message when ``data`` looks like UTF-16 or UTF-32 rather than UTF-8."""
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")) or (head and head.count(b"\0") * 4 >= len(head)):
        return "; the file looks like UTF-16 or UTF-32 text: save it as UTF-8"
    return ""


def csv_rows(path: str | os.PathLike[str], columns: str, error: type[ValueError]) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each row of a small comma-separated file whose rows are
    ``columns`` (e.g. ``"offset, price"``): blank lines and ``#`` comments skipped, fields
    stripped. An unreadable file or a row with another number of fields raises ``error`` with
    ``FILE`` or ``FILE:LINE``."""
    source = str(path)
    try:
        text = read_utf8(path)
    except UnreadableText as exc:
        raise error(str(exc)) from None
    width = len(columns.split(","))
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != width:
            raise error(f"{source}:{number}: expected '{columns}', got {len(fields)} field(s)")
        yield number, fields
