"""``python -m bats.worker``: the same as the ``bats-worker`` command (see :mod:`bats.worker.main`)."""

from bats.worker.main import main

if __name__ == "__main__":
    raise SystemExit(main())
