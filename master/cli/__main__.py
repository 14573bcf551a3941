"""``python -m bats.master.cli``: the same as ``bats-master``."""

from .commands import main

raise SystemExit(main())
