"""Files that appear whole or not at all: written beside their final name, flushed to disk, then
renamed (or, for a file that must never be overwritten, hard-linked) into place. A reader, or a
``--resume`` after a crash mid-write, finds the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_beside(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> Path:
    """``data`` in a new file next to ``path`` (created with ``mode``, flushed to disk); its name.
    The caller moves it into place (:func:`os.replace`, or :func:`os.link` to refuse an existing file)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return temporary


def replace_whole(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``path`` so that a reader sees the old file or the new one, never half of either."""
    os.replace(write_beside(path, data, mode), path)
