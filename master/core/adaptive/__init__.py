"""``bats.master.core.adaptive``: ``--policy adaptive`` (seed 001): how many hosts a bag needs, adapted as it runs."""
