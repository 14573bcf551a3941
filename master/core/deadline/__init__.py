"""``bats.master.core.deadline``: ``--deadline`` (seed 004): the cheapest plan that meets a deadline, an integer linear program."""
