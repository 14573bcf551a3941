"""What the two command lines (``bats-master``, ``bats-sim``) share: bad input is one line, exit 2."""

from __future__ import annotations

import argparse
from typing import NoReturn

from bats.common.durations import parse_duration


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def duration_arg(text: str) -> float:
    """An argparse ``type`` for durations: ``90``, ``"90s"``, ``"10m"``, ``"1h"``."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
