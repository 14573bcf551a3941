"""``bats.master.core.offers``: ``--policy offers`` (seed 002): the bag split across pools by composing their offers."""
