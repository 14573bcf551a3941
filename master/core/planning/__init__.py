"""``bats.master.core.planning``: what the BaTS policies plan with: runtime estimates (:mod:`.estimate`), the knapsack planner
(:mod:`.planner`), seed 003's GA (:mod:`.ga`) and the §3.1 monitor (:mod:`.monitor`). Pure math.
The package itself imports nothing (numpy comes with the modules that use it), so the settings of a
policy can read its defaults without loading the planners."""

DEFAULT_MAX_RAISE = 0.2  # case (a) threshold, as a fraction of the schedule's reference budget
