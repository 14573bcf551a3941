"""The cores of the other seeds' policies (issue 5), built from the config and the flags:
``--deadline`` (:mod:`bats.master.core.deadline.policy`, seed 004), ``--policy adaptive``
(:mod:`bats.master.core.adaptive.policy`, seed 001) and ``--policy offers --deadline``
(:mod:`bats.master.core.offers.policy`, seed 002). :func:`bats.master.core.bats.policy.build_core` hands
these policies over to :func:`build_policy_core`."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from bats.common.config import Config
from bats.master import core as c

from .bats.settings import BatsSettings, Choice


def build_policy_core(task_ids: Iterable[int], config: Config, rng: random.Random, choice: Choice,
                      **kwargs: Any) -> c.Core:
    if choice.policy == "deadline":
        from .deadline.policy import DeadlineCore, DeadlineSettings

        if choice.deadline is None:
            raise ValueError("the deadline policy needs a deadline")
        settings = BatsSettings(sampling=config.sampling, monitor_interval_s=config.monitor_interval_s,
                                release_margin_s=config.release_margin_s)
        deadline = DeadlineSettings(choice.deadline, config.policy.deadline.interval_s, choice.plan_only)
        return DeadlineCore(task_ids, config.clusters, rng, settings, deadline, **kwargs)
    if choice.policy == "adaptive":
        from .adaptive.policy import AdaptiveCore, AdaptiveSettings

        adaptive = AdaptiveSettings.from_config(config)
        return AdaptiveCore(task_ids, config.clusters, rng, adaptive, **kwargs)
    if choice.policy == "offers":
        from .offers.policy import OffersCore, OffersSettings

        if choice.deadline is None:
            raise ValueError("the offers policy needs a deadline")
        return OffersCore(task_ids, config.clusters, rng, OffersSettings.from_config(config, choice.deadline), **kwargs)
    raise ValueError(f"unknown policy {choice.policy!r}")
