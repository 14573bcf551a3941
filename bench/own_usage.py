"""Run a command and write its own wall time, CPU time and peak RSS to a JSON file.

    python bench/own_usage.py OUT.json COMMAND [ARG ...]

Why a process of its own: Linux carries a process's peak RSS (``ru_maxrss``) over an exec, and a
child made by fork or vfork starts with the resident size of the process it was made from. A
command that ``bench/run.py`` starts itself therefore reports at least what ``run.py`` held at that
moment: late in ``make bench`` that is over 100 MiB, and benchmark 12's 50,000-task ``bats-sim``
was reported at 111 MiB where its own peak is under 80. Started from this small interpreter, the
command's peak is its own (a few MiB of this launcher are the floor). Exit status: the command's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    out, command = argv[0], argv[1:]
    t0 = time.perf_counter()
    proc = subprocess.Popen(command)  # stdin, stdout and stderr: this launcher's own
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = proc.returncode = os.waitstatus_to_exitcode(status)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}, f)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
