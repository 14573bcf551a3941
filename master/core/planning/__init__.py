"""What the BaTS policies plan with: runtime estimates (:mod:`.estimate`), the knapsack planner
(:mod:`.planner`), seed 003's GA (:mod:`.ga`) and the §3.1 monitor (:mod:`.monitor`). Pure math."""
