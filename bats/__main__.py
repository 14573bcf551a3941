"""``python -m bats``: bats-master, bats-sim and bats-worker from one entry point
(:mod:`bats.master.cli.toplevel`)."""

from bats.master.cli.toplevel import main

raise SystemExit(main())
