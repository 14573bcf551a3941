"""What the two command lines (``bats-master``, ``bats-sim``) share: bad input is one line, exit 2,
and the clusters config comes from the same place."""

from __future__ import annotations

import argparse
from typing import NoReturn

from bats.common.config import Config, default_config, load_config
from bats.common.durations import parse_duration


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def duration_arg(text: str) -> float:
    """An argparse ``type`` for durations: ``90``, ``"90s"``, ``"10m"``, ``"1h"``."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def load_cluster_config(path: str | None, workers: int | None) -> Config:
    """``--config FILE`` (validated against each provisioner's keys), or without one the default:
    one local cluster of ``--workers`` machines (one per core)."""
    if path is None:
        if workers is not None and workers < 1:
            raise UsageError("--workers: must be at least 1")
        return default_config(workers)
    if workers is not None:
        raise UsageError("--workers applies only without --config (set max in the config instead)")
    from bats import provisioners
    from bats.common.config import ConfigError

    config = load_config(path, provisioners.options_of)
    for name, cluster in config.clusters.items():  # what each provisioner checks beyond the key kinds
        try:
            provisioners.load(cluster.provisioner).check_config(cluster)
        except ValueError as exc:
            key, reason = exc.args if len(exc.args) == 2 else ("provisioner", str(exc))
            raise ConfigError(f"{config.source}: [clusters.{name}] {key}: {reason}") from None
    return config


# ---------------------------------------------------------------- BaTS's choice flags (both commands)
def add_choice_flags(p: argparse.ArgumentParser) -> None:
    """The flags that decide how BaTS spends money; ``bats-master`` and ``bats-sim`` share them."""
    g = p.add_argument_group("budget (BaTS)")
    g.add_argument("--policy", choices=("auto", "bats", "self", "adaptive", "offers"), default="auto",
                   help="bats: sample, offer options, run within budget; self: every machine, no budget; "
                        "adaptive: seed 001's host heuristic ([policy.adaptive]); offers (with --deadline): "
                        "split the bag across pools by composing their offers (seed 002, [policy.offers]); "
                        "auto (default): bats when some cluster has a price")
    g.add_argument("--deadline", type=_deadline_arg, metavar="DURATION",
                   help="after sampling, run the cheapest plan that finishes within DURATION of the start "
                        "(seed 004's ILP; [policy.deadline] interval)")
    g.add_argument("--schedule", metavar="CHOICE", type=schedule_arg,
                   help="after sampling, run this option: cheapest, fastest, an option id, or a budget "
                        "(budget:25, or '$25' quoted so the shell leaves it alone: the fastest option within it)")
    g.add_argument("--budget", type=_money_arg, metavar="AMOUNT",
                   help="run the fastest configuration within AMOUNT (sampling included, no options shown)")
    g.add_argument("--cushion", choices=("yes", "no"),
                   help="may spend the option's cushion for the rounding problem on top of the budget "
                        "(default no; asked on a terminal)")
    g.add_argument("--when-short", choices=("continue", "stop"), default="continue",
                   help="when the chance of ending within the money falls below 90 %% during the run and "
                        "nobody can be asked (no terminal): go on (default) or stop; on a terminal the run asks "
                        "whether to go on, stop or raise the budget by the amount it needs")
    g.add_argument("--plan-only", action="store_true", help="stop after sampling and showing the options")
    g.add_argument("--planner", choices=("exact", "ga"), default="exact",
                   help="the Pareto set of options: exact (default) or seed 003's genetic algorithm")
    g.add_argument("--no-speed-up", action="store_true",
                   help="a run ahead of its plan keeps its configuration (default: with the fastest schedule "
                        "or a budget, it moves to a faster one the budget left pays)")
    g.add_argument("--no-catch-up", action="store_true",
                   help="a run whose tasks take longer than planned keeps its configuration while its money "
                        "lasts (default: it adds the machines that end it by the chosen makespan, if the money "
                        "left pays them)")
    g.add_argument("--all-options", action="store_true",
                   help="show every option (default: at most 15 well spread, cheapest and fastest included)")
    g.add_argument("--no-sampling", action="store_true",
                   help="no separate sampling phase: sample inside the execution (needs --budget)")
    g.add_argument("--plot", metavar="FILE.png",
                   help="draw the options (makespan against cost, the Pareto front, the paper's four "
                        "schedules, the chosen one) in this PNG file")


def check_plot_path(path: str | None) -> None:
    """``--plot FILE``: its folder must exist (checked before anything runs)."""
    import os

    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"--plot {path}: no such folder {folder}")
    if os.path.isdir(path):
        raise UsageError(f"--plot {path}: is a folder; give a file name such as options.png")


def _deadline_arg(text: str) -> float:
    seconds = duration_arg(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than 0 seconds, got {text!r}")
    return seconds


def _money_arg(text: str) -> float:
    try:
        amount = float(text.strip().removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount of money such as 25 or 12.50, got {text!r}") from None
    if not (amount > 0 and amount < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive amount, got {text!r}")
    return amount


def schedule_arg(text: str) -> str:
    """``--schedule``: what can be judged before the options exist (the ids offered are checked
    once they are), so a bad value stops the run before anything is started or paid for."""
    value = text.strip().lower()
    if value in ("cheapest", "fastest"):
        return value
    if value.isdigit():
        if int(value) < 1:
            raise argparse.ArgumentTypeError(f"option ids start at 1, got {text!r}")
        return value
    for prefix in ("budget:", "$"):
        if value.startswith(prefix):
            amount = value[len(prefix):]
            try:
                number = float(amount)
            except ValueError:
                break
            if not (0 < number < float("inf")):
                raise argparse.ArgumentTypeError(f"a budget must be a positive amount, got {text!r}")
            return value
    raise argparse.ArgumentTypeError(f"expected cheapest, fastest, an option id or a budget such as budget:25, "
                                     f"got {text!r}")


CHOICE_FLAGS = ("pass --schedule cheapest|fastest|ID|budget:AMOUNT, --budget AMOUNT or --plan-only "
                "(or --policy self to run on every machine without a budget)")


def choice_from_args(args: argparse.Namespace, config: Config):
    """A :class:`bats.master.core.bats.policy.Choice` from the flags, checked for contradictions."""
    from ..core.bats.settings import Choice

    if args.budget is not None and args.schedule is not None:
        raise UsageError("--budget and --schedule both choose the plan; give one of them")
    if args.no_sampling and args.budget is None:
        raise UsageError("--no-sampling needs --budget (without a sampling phase there are no options to choose from)")
    if args.plan_only and args.budget is not None:
        raise UsageError("--plan-only shows the options after sampling; --budget skips them")
    if args.plan_only and args.schedule is not None:
        raise UsageError("--plan-only stops at the options and --schedule runs one of them: give one "
                         "(after --plan-only, --resume --schedule ID runs an option)")
    policy = args.policy
    deadline = getattr(args, "deadline", None)
    if policy == "offers":
        if deadline is None:
            raise UsageError("--policy offers needs --deadline DURATION (the pools make offers for a deadline)")
        if args.schedule or args.budget is not None or args.plan_only or args.no_sampling:
            raise UsageError("--policy offers has no options or budget: drop --schedule, --budget, --plan-only "
                             "and --no-sampling (its parameters are in [policy.offers])")
        if config.policy.offers.task_runtime_s is None:
            raise UsageError(f"{config.source}: [policy.offers] task_runtime: required with --policy offers "
                             "(the estimated runtime of one task, told to the pools)")
    elif deadline is not None:
        if policy not in ("auto", "bats") or args.schedule or args.budget is not None or args.no_sampling:
            raise UsageError("--deadline chooses the plan itself; it does not go with --policy self|adaptive, "
                             "--schedule, --budget or --no-sampling")
        policy = "deadline"
    if policy == "adaptive" and (args.schedule or args.budget is not None or args.plan_only or args.no_sampling):
        raise UsageError("--policy adaptive has no options or budget: drop --schedule, --budget, --plan-only "
                         "and --no-sampling (its parameters are in [policy.adaptive])")
    if policy == "auto":
        policy = "bats" if any(cl.price > 0 for cl in config.clusters.values()) else "self"
    if policy == "self" and (args.schedule or args.budget is not None or args.plan_only or args.no_sampling):
        raise UsageError("--schedule, --budget, --plan-only and --no-sampling apply to --policy bats "
                         "(every cluster here is free; add --policy bats to plan anyway)")
    return Choice(policy=policy, schedule=args.schedule, budget=args.budget, cushion=args.cushion == "yes",
                  plan_only=args.plan_only, planner=args.planner, all_options=args.all_options, deadline=deadline,
                  speed_up=not args.no_speed_up, catch_up=not args.no_catch_up,
                  when_short=getattr(args, "when_short", "continue") or "continue")
