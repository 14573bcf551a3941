"""``python -m bats.master.sim``: the same as ``bats-sim`` (:mod:`bats.master.cli.sim`)."""

from ..cli.sim import main

raise SystemExit(main())
