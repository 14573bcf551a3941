"""``bats.master.cli``: the command-line layer: the only code that prints. ``bats-master`` (:mod:`.commands`), what the
two commands share (:mod:`.args`), and how the operator's choice is asked for (:mod:`.choosing`)."""

from .commands import main

__all__ = ["main"]
