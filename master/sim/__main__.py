"""``python -m bats.master.sim``: the same as ``bats-sim``."""

from .driver import main

raise SystemExit(main())
