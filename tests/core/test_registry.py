"""One name per policy: the registry, the cores' ``name`` and what the live figures call a run."""

from __future__ import annotations

import random

import pytest

from bats.common.config import default_config
from bats.master.core.bats.settings import Choice
from bats.master.core.registry import POLICIES, build_core


def test_every_policy_is_registered_under_its_own_name():
    assert sorted(POLICIES) == ["adaptive", "bats", "deadline", "offers", "self"]
    assert all(cls.name == name for name, cls in POLICIES.items())


@pytest.mark.parametrize("policy", ["self", "bats", "deadline", "adaptive"])
def test_build_core_builds_the_named_policy(policy):
    config = default_config()
    deadline = 3600.0 if policy == "deadline" else None
    core = build_core(range(1, 11), config, random.Random(1), Choice(policy=policy, deadline=deadline))
    assert core.name == policy and type(core) is POLICIES[policy]


def test_an_unknown_policy_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown policy 'nope' \\(policies: self, bats, deadline, adaptive, offers\\)"):
        build_core(range(1, 3), default_config(), random.Random(1), Choice(policy="nope"))


def test_offers_needs_a_deadline():
    with pytest.raises(ValueError, match="needs a deadline"):
        build_core(range(1, 3), default_config(), random.Random(1), Choice(policy="offers"))


@pytest.mark.parametrize("policy", ["self", "bats", "deadline", "adaptive"])
def test_every_core_has_a_typed_read_only_view(policy):
    import dataclasses

    from bats.master.core.view import CoreView

    deadline = 3600.0 if policy == "deadline" else None
    core = build_core(range(1, 11), default_config(), random.Random(1), Choice(policy=policy, deadline=deadline))
    view = core.view()
    assert isinstance(view, CoreView) and view.policy == policy
    assert view.phase == ("sampling" if policy in ("bats", "deadline") else "running")
    assert (view.deadline_s == 3600.0) if policy == "deadline" else view.deadline_s is None
    assert view.selected is None and not view.options
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.phase = "x"  # type: ignore[misc]


def test_a_plain_run_imports_no_policy_numpy_or_scipy(tmp_path):
    """What ``bats-master --bag`` loads to run a bag on local workers: no planner, no solver, no
    numpy (their imports were most of a short run's start-up); ``-X importtime`` lists every import."""
    import subprocess
    import sys

    bag = tmp_path / "tasks.txt"
    bag.write_text("true\n" * 3)
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "bats.master.cli", "--quiet", "--bag", str(bag),
                          "--state-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "bats.master.core.base" in imported  # the listing is there
    heavy = sorted(m for m in imported if m.split(".")[0] in ("numpy", "scipy")
                   or m.startswith(("bats.master.core.bats.policy", "bats.master.core.deadline",
                                    "bats.master.core.planning.planner")))
    assert heavy == []
