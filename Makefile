# The two newcomer commands: `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench paper compare reliability execution-study install clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# reinstall when the package metadata changes
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	rm -rf bats-run/demo
	$(VENV)/bin/bats-master --bag examples/tasks.txt --state-dir bats-run/demo
	@echo "results: $(VENV)/bin/bats-master results --state-dir bats-run/demo"

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/run.py

# the BaTS paper's Table 1 and Table 2 next to ours: docs/paper-reproduction.md (about half a minute);
# seed 003's Tables 2-5 (Pareto fronts, exact and GA): docs/pareto-reproduction.md (about half a minute)
paper: $(STAMP)
	$(PY) bench/paper.py
	$(PY) bench/paper_pareto.py

# every policy (BaTS's four schedules, Pareto options, deadline ILP, adaptive, self-scheduling, a fixed
# pool, offers) on seed 000's five scenarios and seed 003's three workloads: docs/policies.md (about a minute)
compare: $(STAMP)
	$(PY) bench/compare.py

# fault injection (real processes and the simulator) and the cost of encryption: docs/reliability.md
# (about 8 minutes with the ssh and Grid Engine scenarios)
reliability: $(STAMP)
	$(PY) bench/reliability.py

# does the execution keep the chosen option's promise? random pools in the simulator: docs/execution-study.md
execution-study: $(STAMP)
	$(PY) bench/execution_study.py --pools 200 --max-tasks 2000 --out docs/execution-study.md

clean:
	rm -rf $(VENV) bats-run build *.egg-info
