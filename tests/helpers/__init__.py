"""What the tests share: one place for each helper (``import helpers.runs`` etc.; ``tests/`` is on the
path through pytest's ``pythonpath``). No test file imports another test file.

- :mod:`.runs`: the master command, a free port, one ``wait_for``, results of a state dir, bags
- :mod:`.paths`: the repository's folders
- :mod:`.cores`: a core fed by hand (the BaTS unit tests' two clusters and driver)
- :mod:`.actions`: ``match(Dispatch, task=3)``, a partial action in an expected list
- :mod:`.strategies`: hypothesis strategies for random pools, and choosing an option in bats-sim
- :mod:`.budget`: the simulator's budget-ceiling check under faults (also bench/reliability.py)
- :mod:`.mixes`: seed 003's instance mixes
- :mod:`.configs`: inline TOML configs several tests run
- :mod:`.daemons`, :mod:`.backends`: sshd, Grid Engine and Slurm for the tests that need them
- :mod:`.cloud_harness`: moto's EC2 server and the cloud tests' helpers
- :mod:`.faults`: the fault-injection scenarios; :mod:`.netproxy`: a misbehaving network
- :mod:`.terminal`: a run on a pseudo-terminal; :mod:`.brute_force`: the planner's reference
- :mod:`.bench_scripts`: loading a bench/ script as a module
"""
