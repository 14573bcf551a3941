"""The fault-injection suite: each scenario of ``tests/helpers/faults.py`` once, with real processes.

Each run is audited from its journal and report: no task without its result, no result counted
twice, the cost equal to the machines' recorded ATUs times the price, no budget overrun.
``bench/reliability.py`` runs the same scenarios many times for ``docs/reliability.md``. The
scenarios named ``(ssh)``/``(sge)`` start a real sshd or Grid Engine (``tests/helpers/backends.py``) and
are skipped where it is not installed (failed under ``BATS_REQUIRE_DAEMONS=1``, as in CI).
"""

from __future__ import annotations

import random

import pytest
from helpers import faults

pytestmark = pytest.mark.daemons  # the (ssh) and (sge) scenarios start an sshd and a Grid Engine


@pytest.mark.parametrize("name", list(faults.SCENARIOS))
def test_scenario_loses_nothing_and_counts_once(tmp_path, name):
    result = faults.SCENARIOS[name](tmp_path / "s", random.Random(7))
    assert result.lost == 0, result
    assert result.double == 0, result
    assert result.cost_matches, result
    assert result.overrun == 0, result
    assert result.status == "done", result
