"""Files written whole or not at all (common/atomic.py)."""

from __future__ import annotations

import os
import stat

import pytest

from bats.common.atomic import replace_whole, write_beside


def test_a_file_is_replaced_whole_with_its_mode_and_nothing_is_left_beside(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    replace_whole(target, b"new", 0o600)
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["report.json"]


def test_a_file_written_beside_can_be_linked_into_place_only_where_none_is(tmp_path):
    target = tmp_path / "secret"
    target.write_text("first")
    written = write_beside(target, b"second")
    assert written.parent == tmp_path and written.name.startswith(".secret.") and written.read_bytes() == b"second"
    with pytest.raises(FileExistsError):
        os.link(written, target)
    assert target.read_text() == "first"


def test_a_write_that_fails_leaves_no_file_beside(tmp_path, monkeypatch):
    def refuse(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", refuse)
    with pytest.raises(OSError, match="No space"):
        replace_whole(tmp_path / "report.json", b"x")
    assert os.listdir(tmp_path) == []
