"""``bats.master``: the master, which runs a bag of tasks on machines it rents: the core that decides
(:mod:`.core`), the drivers that make it happen (:mod:`.server`, :mod:`.sim`, their base :mod:`.driver`,
and the choosing interface :mod:`.choosing`), the state directory (:mod:`.state`), what people see
(:mod:`.views`) and the command line (:mod:`.cli`, the only code that prints)."""
