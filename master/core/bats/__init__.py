"""``bats.master.core.bats``: ``--policy bats`` (seed 000): sampling, the options, and budget-controlled execution."""
