"""The live view's estimated finish right after the choice: the plan's machines, not the sampling's
rate (the sampling machines' tasks and the plan's are different work at different speeds)."""

from __future__ import annotations

import random
import types

import numpy as np
from helpers.configs import CONFIG

from bats.common.config import load_config
from bats.master import core as c
from bats.master.core.bats.settings import Choice
from bats.master.core.registry import build_core
from bats.master.sim.driver import Simulator
from bats.master.sim.runtimes import parse_runtimes
from bats.master.views.live import snapshot
from bats.provisioners import options_of


class Chose(Exception):
    pass


class StopAtTheChoice(Simulator):
    """Runs until the options are answered, then stops: the core has just begun its execution."""

    def _do_offer(self, action: c.OfferOptions) -> None:
        super()._do_offer(action)
        raise Chose


def test_the_estimated_finish_after_the_choice_is_the_plans(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    config = load_config(path, options_of)
    choice = Choice(policy="bats", schedule="fastest")
    core = build_core(range(1, 301), config, random.Random(1), choice)
    runtimes = parse_runtimes("normal:3s,0.3s").sample(np.random.default_rng(1), 300)
    sim = StopAtTheChoice(core, config, [0.0, *runtimes.tolist()], choice=choice)
    try:
        sim.run()
    except Chose:
        pass
    view = core.view()
    assert view.phase == "executing" and view.plan_end
    server = types.SimpleNamespace(core=core, chooser=None, journal=types.SimpleNamespace(run_id="r"), session=1,
                                   stop_reason=None)
    now = sim.now
    naive = snapshot(server, 0.0, 0, now=now)  # the whole session's rate: the sampling's
    snap = snapshot(server, 0.0, 0, now=now, executing_since=(now, core.done + core.failed))
    planned = max(view.plan_end.values())
    assert abs(snap["estimated_finish_at"] - planned) < 1e-6  # until the plan's machines have each ended a task
    assert abs(naive["estimated_finish_at"] - planned) > 1.0  # what it said before
