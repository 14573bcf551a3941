"""One name per policy, and the core a run asks for.

``--policy`` (and ``--deadline``) name a policy; :data:`POLICIES` maps each name to its core class,
whose ``name`` attribute is the same word, so the command line, the report, ``status`` and the
dashboard all say the same thing of a run: ``self`` (:class:`~.base.Core`, plain self-scheduling),
``bats`` (seed 000, :mod:`.bats`), ``deadline`` (seed 004, :mod:`.deadline`), ``adaptive`` (seed 001,
:mod:`.adaptive`) and ``offers`` (seed 002, :mod:`.offers`). :func:`build_core` builds the core from
the config and the flags.

A policy's module is imported only when a run asks for it (or :data:`POLICIES` is read at that
name): a plain run needs neither numpy's planners nor scipy's solver, and starts without them.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from bats.common.config import Config

from .base import Core

if TYPE_CHECKING:
    from .bats.settings import Choice

# --policy word -> (module under bats.master.core, class)
_WHERE = {"self": (".base", "Core"), "bats": (".bats.policy", "BatsCore"),
          "deadline": (".deadline.policy", "DeadlineCore"), "adaptive": (".adaptive.policy", "AdaptiveCore"),
          "offers": (".offers.policy", "OffersCore")}


class _Policies(Mapping[str, type[Core]]):
    """--policy word -> core class, each class imported the first time it is looked up."""

    def __getitem__(self, name: str) -> type[Core]:
        module, cls = _WHERE[name]
        found: type[Core] = getattr(importlib.import_module(module, __package__), cls)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)


POLICIES: Mapping[str, type[Core]] = _Policies()


def policy_name(core: Core) -> str:
    """The ``--policy`` word of a core."""
    return core.name


def build_core(task_ids: Iterable[int], config: Config, rng: random.Random, choice: Choice,
               prior_sample: dict[str, tuple[float, ...]] | None = None, **kwargs: Any) -> Core:
    """The core ``choice.policy`` names, set up from the config and the flags (a BaTS run resumed
    before its choice plans from ``prior_sample``, the sample an earlier session measured)."""
    kwargs.setdefault("max_machines", config.master.max_machines)
    kwargs.setdefault("retry_rules", config.retry)
    if choice.policy not in POLICIES:
        raise ValueError(f"unknown policy {choice.policy!r} (policies: {', '.join(POLICIES)})")
    if choice.policy == "self":
        return Core(task_ids, config.clusters, rng, **kwargs)
    from .bats.settings import BatsSettings

    if choice.policy == "bats":
        from .bats.policy import BatsCore

        settings = BatsSettings(sampling=config.sampling, monitor_interval_s=config.monitor_interval_s,
                                release_margin_s=config.release_margin_s, budget=choice.budget,
                                cushion_accepted=choice.cushion, planner=choice.planner,
                                monitor_interval_auto=config.master.monitor_interval_s is None,
                                prior_sample=prior_sample, speed_up=choice.speed_up,
                                catch_up=choice.catch_up)
        return BatsCore(task_ids, config.clusters, rng, settings, **kwargs)
    if choice.policy == "deadline":
        if choice.deadline is None:
            raise ValueError("the deadline policy needs a deadline")
        settings = BatsSettings(sampling=config.sampling, monitor_interval_s=config.monitor_interval_s,
                                release_margin_s=config.release_margin_s)
        from .deadline.policy import DeadlineCore, DeadlineSettings

        deadline = DeadlineSettings(choice.deadline, config.policy.deadline.interval_s, choice.plan_only)
        return DeadlineCore(task_ids, config.clusters, rng, settings, deadline, **kwargs)
    if choice.policy == "adaptive":
        from .adaptive.policy import AdaptiveCore, AdaptiveSettings

        return AdaptiveCore(task_ids, config.clusters, rng, AdaptiveSettings.from_config(config), **kwargs)
    if choice.deadline is None:
        raise ValueError("the offers policy needs a deadline")
    from .offers.policy import OffersCore, OffersSettings

    return OffersCore(task_ids, config.clusters, rng, OffersSettings.from_config(config, choice.deadline), **kwargs)
