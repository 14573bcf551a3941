"""The task commands of a run with ``[files]`` (:mod:`bats.common.files`): each runs in its own folder
beside the machine's inputs, and the outputs its patterns name are kept for the master.

How this works. :func:`wrapped` puts a few lines of POSIX shell around a task's command: make
``$BATS_FILES/tasks/ID.PID`` (the wrapper's pid: two attempts of one task never share a folder), link
every input into it, run the command there in a subshell, then move each output the patterns name
(``{id}`` replaced) to ``$BATS_FILES/outputs/ID/`` (whole, by rename; a later attempt's replaces an
earlier one's), refusing a file over ``max_output`` (the task then fails, saying which file and the
limit), upload them where the machine has a ``$BATS_FILES/push`` (a cloud machine's, written by
:mod:`bats.worker.s3files`: a failed upload fails the task), and remove the task's folder. The exit
status is the command's. No I/O here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from bats.common.files import FilesConfig

from .bag import Bag


def wrapped(command: str, task_id: int, files: FilesConfig) -> str:
    """``command`` as it runs with ``[files]``: see the module docstring."""
    outputs = " ".join(shlex.quote(p.replace("{id}", str(task_id))) for p in files.outputs)
    lines = [
        'cd "$BATS_FILES" 2>/dev/null || { echo "bats: [files]: this machine has no files folder '
        '(BATS_FILES=$BATS_FILES)" >&2; exit 125; }',
        f'bats_w="$BATS_FILES/tasks/{task_id}.$$"',
        'rm -rf "$bats_w"; mkdir -p "$bats_w" && cd "$bats_w" || exit 125',
        'for bats_f in "$BATS_FILES"/inputs/*; do if [ -e "$bats_f" ]; then ln -s "$bats_f" .; fi; done',
        "(",
        command,
        ")",
        "bats_rc=$?",
    ]
    if outputs:
        lines += [
            f'bats_o="$BATS_FILES/outputs/{task_id}"; bats_big=',
            f"for bats_f in {outputs}; do",
            '  if [ -f "$bats_f" ]; then',
            f'    if [ "$(wc -c < "$bats_f")" -gt {files.max_output} ]; then bats_big="$bats_big $bats_f"; continue; fi',
            '    mkdir -p "$bats_o/$(dirname "$bats_f")" && mv -f "$bats_f" "$bats_o/$bats_f"',
            "  fi",
            "done",
            'if [ -n "$bats_big" ]; then',
            f'  echo "bats: [files] output(s)$bats_big larger than max_output ({files.max_output} bytes): not kept" >&2',
            "  if [ $bats_rc -eq 0 ]; then bats_rc=1; fi",
            "fi",
            # a cloud machine uploads them before the result is sent (bats.worker.s3files)
            f'if [ -x "$BATS_FILES/push" ] && [ -d "$bats_o" ]; then "$BATS_FILES/push" {task_id} || '
            f'{{ echo "bats: [files] the outputs of task {task_id} were not uploaded" >&2; '
            "if [ $bats_rc -eq 0 ]; then bats_rc=1; fi; }; fi",
        ]
    lines += ['cd "$BATS_FILES" && rm -rf "$bats_w"', "exit $bats_rc"]
    return "\n".join(lines)


@dataclass
class FilesBag(Bag):
    """A bag whose commands run in their own folder beside the inputs and keep their outputs."""

    files: FilesConfig = FilesConfig()
    inner: Bag | None = None

    @classmethod
    def around(cls, bag: Bag, files: FilesConfig) -> FilesBag:
        return cls(bag.path, bag.lines, bag.task_ids, bag.sha256, files, bag)

    def command(self, task_id: int) -> str:
        inner = self.inner.command(task_id) if self.inner is not None else super().command(task_id)
        return wrapped(inner, task_id, self.files)
