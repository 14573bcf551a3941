"""What the two command lines (``bats-master``, ``bats-sim``) share: bad input is one line, exit 2,
and the clusters config comes from the same place."""

from __future__ import annotations

import argparse
from typing import NoReturn

from bats.common.config import Config, default_config, load_config
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


def load_cluster_config(path: str | None, workers: int | None) -> Config:
    """``--config FILE`` (validated against each provisioner's keys), or without one the default:
    one local cluster of ``--workers`` machines (one per core)."""
    if path is None:
        if workers is not None and workers < 1:
            raise UsageError("--workers: must be at least 1")
        return default_config(workers)
    if workers is not None:
        raise UsageError("--workers applies only without --config (set max in the config instead)")
    from bats import provisioners

    return load_config(path, provisioners.options_of)
