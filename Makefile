# The two newcomer commands: `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo demo-bats test test-fast lint bench paper compare reliability execution-study execution-study-500 install clean worker-wheel \
	worker-wheelhouse

$(PY):
	$(PYTHON) -m venv $(VENV)

# The editable install is setuptools' strict mode: build/__editable__.* holds a link to every module,
# which type checkers and editors can follow. Its bytecode is written at install, as a wheel's is (with
# PYTHONDONTWRITEBYTECODE set, every command would otherwise compile its modules again: 0.2 s of each start). A module added or removed needs a new link tree, so the
# install is redone when the list of modules changes (MODULES is rewritten only when it differs).
MODULES := $(VENV)/.modules
CODE := common master provisioners worker bats
$(shell mkdir -p $(VENV); find $(CODE) -name '*.py' | sort > $(MODULES).new; \
        cmp -s $(MODULES).new $(MODULES) || mv $(MODULES).new $(MODULES); rm -f $(MODULES).new; \
        ls -d build/__editable__.* >/dev/null 2>&1 || rm -f $(STAMP))

$(STAMP): pyproject.toml setup.py $(MODULES) | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' --config-settings editable_mode=strict
	$(PY) -m compileall -q build/__editable__.*/bats >/dev/null
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	rm -rf bats-run/demo
	$(VENV)/bin/bats-master --bag examples/tasks.txt --state-dir bats-run/demo
	@echo "results: $(VENV)/bin/bats-master results --state-dir bats-run/demo"

# BaTS itself on three emulated clouds (examples/local-clouds.toml): a dry run with a runtime guess, then the
# sampling, the options table, the choice made by --schedule (the fastest option within 30) and the budget
# kept (about a minute)
demo-bats: $(STAMP)
	rm -rf bats-run/demo-bats
	$(VENV)/bin/bats-master --dry-run --bag examples/demo-tasks.txt --config examples/local-clouds.toml \
		--guess-runtime 1s --schedule budget:30
	$(VENV)/bin/bats-master --bag examples/demo-tasks.txt --config examples/local-clouds.toml \
		--state-dir bats-run/demo-bats --schedule budget:30 --cushion yes
	@echo "the run's page: $(VENV)/bin/bats-master report --state-dir bats-run/demo-bats --html demo-bats.html"

# two workers (pytest-xdist): most tests wait on real processes, sleeps and sockets rather than compute;
# each test file stays on one worker, and the files marked daemons share one (tests/conftest.py)
test: $(STAMP)
	$(PY) -m pytest -q --durations=15 -n 2 --dist loadfile

# the unit tests alone (no processes, daemons, browser or cloud stand-ins): under a minute
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not e2e and not daemons and not browser and not cloud" --hypothesis-profile=fast

# ruff over the code folders, the tests and the bench scripts; mypy over the code
lint: $(STAMP)
	$(VENV)/bin/ruff check $(CODE) tests bench
	$(VENV)/bin/mypy

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

# does the execution keep the chosen option's promise? random pools in the simulator, billed by the hour
# (docs/execution-study.md) and per second or per minute (docs/execution-study-fine.md); a few
# minutes on 2 cores (the full study's 500 pools: see docs/execution-study.md). Measured with --jobs 1
# side by side with the code before the ways chosen after the offer ran from one run's offer and the
# planner reused its candidates (same load, same tables): the 20 fine pools 114 s of CPU against 183 s,
# the first 4 hourly pools 32 s against 45 s
execution-study: $(STAMP)
	$(PY) bench/execution_study.py --pools 60 --max-tasks 3000 --out docs/execution-study.md
	$(PY) bench/execution_study.py --pools 20 --max-tasks 1500 --billing fine --out docs/execution-study-fine.md

# the same at the scale the promise is judged on: 500 pools billed per second or minute (bags of 200-3,000
# tasks) and 500 by the hour (bags of up to 1,500 tasks, to fit the time): docs/execution-study-fine-500.md
# and docs/execution-study-500.md; about two hours on 2 idle cores
execution-study-500: $(STAMP)
	$(PY) bench/execution_study.py --pools 500 --max-tasks 3000 --billing fine --out docs/execution-study-fine-500.md
	$(PY) bench/execution_study.py --pools 500 --max-tasks 1500 --no-history --out docs/execution-study-500.md

# the worker alone for machine images: dist/bats_worker-VERSION-py3-none-any.whl, needing pyzmq, msgpack and
# psutil only (deploy/worker-wheel/, deploy/README.md)
worker-wheel: $(STAMP)
	$(PY) deploy/worker-wheel/build.py --out dist

# wheels of the worker wheel's three dependencies for this venv's Python, so tests/packaging/ can install it
# in a fresh venv offline (needs the package index once; .ci/run does it)
worker-wheelhouse: $(STAMP)
	$(PY) -m pip download --quiet --only-binary=:all: --dest $(VENV)/wheelhouse pyzmq msgpack psutil

clean:
	rm -rf $(VENV) bats-run build dist *.egg-info .mypy_cache .ruff_cache
