"""``python -m bats.worker``: the same as the ``bats-worker`` command (see :mod:`bats.worker.main`).

Started this way (as the ``local`` provisioner starts its workers), the process ends as soon as the
worker has left: its tasks are stopped, its ``bye`` sent and its socket closed by then, so the
interpreter's own teardown (tens of milliseconds, which a master waiting for its workers at the end
of every run waited too) is skipped once the logs and standard streams are flushed.
"""

import logging
import os
import sys

from bats.worker.main import main

if __name__ == "__main__":
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more can be said on it
            pass
    os._exit(code)
