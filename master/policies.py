"""The cores of the other seeds' policies (issue 5), built from the config and the flags:
``--deadline`` (:mod:`bats.master.deadline_core`, seed 004), ``--policy adaptive``
(:mod:`bats.master.adaptive_core`, seed 001) and ``--policy offers --deadline``
(:mod:`bats.master.offers_core`, seed 002). :func:`bats.master.bats_core.build_core` hands
these policies over to :func:`build_policy_core`."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from bats.common.config import Config
from bats.master import core as c
from bats.master.bats_events import BatsSettings, Choice


def build_policy_core(task_ids: Iterable[int], config: Config, rng: random.Random, choice: Choice,
                      **kwargs: Any) -> c.Core:
    if choice.policy == "deadline":
        from bats.master.deadline_core import DeadlineCore, DeadlineSettings

        if choice.deadline is None:
            raise ValueError("the deadline policy needs a deadline")
        settings = BatsSettings(sampling=config.sampling, monitor_interval_s=config.monitor_interval_s,
                                release_margin_s=config.release_margin_s)
        deadline = DeadlineSettings(choice.deadline, config.policy.deadline.interval_s, choice.plan_only)
        return DeadlineCore(task_ids, config.clusters, rng, settings, deadline, **kwargs)
    if choice.policy == "adaptive":
        from bats.master.adaptive_core import AdaptiveCore, AdaptiveSettings

        adaptive = AdaptiveSettings.from_config(config)
        return AdaptiveCore(task_ids, config.clusters, rng, adaptive, **kwargs)
    if choice.policy == "offers":
        from bats.master.offers_core import OffersCore, OffersSettings

        if choice.deadline is None:
            raise ValueError("the offers policy needs a deadline")
        return OffersCore(task_ids, config.clusters, rng, OffersSettings.from_config(config, choice.deadline), **kwargs)
    raise ValueError(f"unknown policy {choice.policy!r}")
