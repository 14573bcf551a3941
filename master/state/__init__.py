"""``bats.master.state``: the state directory: the bag file (:mod:`.bag`), the SQLite journal that makes a run resumable
(:mod:`.journal`), what a killed session left running (:mod:`.leftovers`), and the results export
(:mod:`.results`)."""
