"""``--results DIR``: every task's whole stdout and stderr, kept as ``DIR/ID/stdout`` and ``DIR/ID/stderr``
(ID the task's line number in the bag, as GNU parallel's ``--results`` keeps one folder per job).

How this works. The journal keeps the last 64 KiB of each stream, as the worker sends them. With
``--results`` the command each worker receives is the task's command wrapped in a few lines of POSIX
shell: the command runs in a subshell (an ``exit`` in it ends only the subshell) with its streams
going to files named after the wrapper's pid in ``DIR/ID``; when it ends, the files are renamed over
``stdout`` and ``stderr`` (whole: a reader never sees half a file, and the attempt that ended last,
normally the one recorded, is the one kept) and their tails are written to the real streams, so the
journal and ``bats-master results`` still hold them. The wrapper exits with the command's status. A
task killed by a signal N then exits 128 + N, as from any shell, where without ``--results`` the
worker reports -N (the ``[retry]`` rules see ``exit = 137``, not ``cause = "signal"``).

The files are written where the task runs: for ``local`` clusters that is this machine, and for
machines elsewhere ``DIR`` must be a folder they share with this one (an NFS mount at the same
path). Nothing here does I/O: :class:`OutputsBag` only rewrites the commands.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from bats.common.protocol import OUTPUT_TAIL_BYTES

from .bag import Bag


def wrapped(command: str, task_id: int, results_dir: str) -> str:
    """``command`` as it runs with ``--results``: see the module docstring."""
    folder = shlex.quote(f"{results_dir.rstrip('/') or '/'}/{task_id}")
    return "\n".join([
        f"bats_d={folder}",
        'mkdir -p "$bats_d" || { echo "bats: --results: cannot make $bats_d" >&2; exit 125; }',
        "(",
        command,
        ') >"$bats_d/.stdout.$$" 2>"$bats_d/.stderr.$$"',
        "bats_rc=$?",
        'mv -f "$bats_d/.stdout.$$" "$bats_d/stdout"; mv -f "$bats_d/.stderr.$$" "$bats_d/stderr"',
        f'tail -c {OUTPUT_TAIL_BYTES} "$bats_d/stdout"; tail -c {OUTPUT_TAIL_BYTES} "$bats_d/stderr" >&2',
        "exit $bats_rc",
    ])


@dataclass
class OutputsBag(Bag):
    """A bag whose commands keep their whole output in ``results_dir`` (an absolute path)."""

    results_dir: str = ""
    inner: Bag | None = None  # the bag whose commands are wrapped (itself a wrapper, say [files]')

    @classmethod
    def around(cls, bag: Bag, results_dir: str) -> OutputsBag:
        return cls(bag.path, bag.lines, bag.task_ids, bag.sha256, results_dir, bag)

    def command(self, task_id: int) -> str:
        inner = self.inner.command(task_id) if self.inner is not None else super().command(task_id)
        return wrapped(inner, task_id, self.results_dir)
