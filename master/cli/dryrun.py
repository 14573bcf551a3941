"""``bats-master --dry-run``: what a run would do, without spending anything or starting a machine.

It checks the bag, the config and the flags as a real start does, then asks the real BaTS core (the
same code, fed no machine) what it would sample: the machines each cluster's sampling phase acquires,
n_s and the replicated tasks, and what the sampling can cost at most (billed by the second or
minute, the bound of :mod:`bats.master.core.bats.sampling`; labelled an upper bound). When task runtimes are known, from an earlier run of the same bag in
``--state-dir`` (:mod:`bats.master.state.earlier`) or from ``--guess-runtime``, a second core plans
from them as a resumed run plans from an earlier session's sample, and its options table is shown:
the options the operator would choose from, priced by the same planner. Nothing is written.

With runtimes known, the sampling phase is also run in virtual time (:mod:`bats.master.sim.driver`, the
same core, every task taking its cluster's mean runtime), so the sampling cost shown is the one the
run would pay, not only its first ATUs. ``--budget`` pays for the sampling too (implicit sampling,
seed 000 Fig. 4): its line is the simulated run's, from the sampling to the option the money left buys
and whether the bag would end, so a budget the sampling eats is said to be short before it is spent.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random

from bats.common.config import Config
from bats.common.durations import format_duration, parse_duration

from ..state.bag import Bag
from .args import UsageError
from .output import emit


def parse_guess(text: str, config: Config) -> dict[str, float]:
    """``--guess-runtime``: ``30s`` for every cluster (divided by its speed: the ``speed`` key, or
    1/slowdown for an emulated local cluster, as bats-sim does) or ``fast=10s,slow=30s``."""
    from ..sim.driver import cluster_speed

    guesses: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, _, value = part.rpartition("=")
        try:
            seconds = parse_duration(value.strip())
        except ValueError as exc:
            raise UsageError(f"--guess-runtime {text}: {exc}") from None
        if not seconds > 0:
            raise UsageError(f"--guess-runtime {text}: a runtime must be longer than 0 seconds")
        if not name:
            guesses.update({n: seconds / cluster_speed(cl) for n, cl in config.clusters.items()
                            if n not in guesses})
        elif name.strip() in config.clusters:
            guesses[name.strip()] = seconds
        else:
            raise UsageError(f"--guess-runtime {text}: no cluster {name.strip()!r} in {config.source} "
                             f"(clusters: {', '.join(config.clusters)})")
    return guesses


def dry_run(args: argparse.Namespace, bag: Bag, config: Config, choice) -> int:
    """Print what the run would sample and, with runtimes, its options; exit 0."""
    from .. import core as c
    from ..core.bats.settings import Choice
    from ..core.billing import atus_begun
    from ..core.registry import build_core
    from ..views.options_table import money_places

    guesses = parse_guess(args.guess_runtime, config) if args.guess_runtime else {}
    lines = ["dry run: nothing is started and nothing is paid for",
             f"bag {args.bag}: {len(bag)} task(s); clusters from {config.source or 'the default local config'}"]
    if choice.policy == "self":
        machines = ", ".join(f"{cl.max} x {name}" for name, cl in config.clusters.items())
        emit("\n".join([*lines, f"policy self (every cluster is free): the bag would run on every machine "
                                f"({machines}); no sampling, no options"]))
        return 0
    core = build_core(bag.task_ids, config, random.Random(0), Choice(policy="bats"))
    asked = {a.cluster: a.n for a in core.handle(c.RunStarted(0.0)) if isinstance(a, c.Acquire)}
    sample_size = int(getattr(core, "sample_size", 0))
    lines.append(f"policy {choice.policy}: sampling n_s = {sample_size} task(s) of {len(bag)} (confidence "
                 f"{config.sampling.confidence:g}, error {config.sampling.error:g}), the first "
                 f"{min(7, len(bag))} run on every cluster; the sampled tasks are real work and are not run again")
    first = {name: n * atus_begun(0.001, config.clusters[name].atu_s, config.clusters[name].min_charge_s)
             * config.clusters[name].price for name, n in asked.items()}
    places = money_places(list(first.values()))
    lines.append("  cluster   machines  price/ATU     ATU  first ATU of each")
    for name, cl in config.clusters.items():
        lines.append(f"  {name:<9} {asked.get(name, 0):>8}  {cl.price:>9g}  {format_duration(cl.atu_s):>6}  "
                     f"{first.get(name, 0.0):>.{places}f}")
    lines.append(f"  sampling costs at least {sum(first.values()):.{places}f} (one ATU of every sampling machine; "
                 "more when the sample takes longer)")
    runtimes, said = _known_runtimes(args, bag, config, guesses)
    lines.extend(said)
    sampled = _simulated_sampling(bag, config, choice, runtimes) if choice.policy == "bats" else None
    if sampled is not None:
        lines.append(f"  sampling costs about {sampled:.{places}f} with these runtimes (simulated: every ATU "
                     "the sampling machines begin until the sample is complete)")
    if choice.policy == "bats":
        lines.append(_sampling_upper_bound(len(bag), sample_size, config, asked, runtimes, places))
    if choice.policy != "bats":
        lines.append(f"(--dry-run shows BaTS's options; the {choice.policy} plan is made once the sample is measured)")
    if choice.policy != "bats" or not runtimes:
        emit("\n".join(lines))
        return 0
    try:
        lines.extend(_options(bag, config, choice, runtimes, sample_size, sampled))
    except ValueError as exc:
        lines.append(f"no options: {exc}")
    emit("\n".join(lines))
    return 0


def _sampling_upper_bound(n_tasks: int, sample_size: int, config: Config, asked: dict[str, int],
                         runtimes: dict[str, list[float]], places: int) -> str:
    """The line that says the most sampling can spend to measure (:mod:`bats.master.core.bats.sampling`):
    billed by the second or minute on every cluster, each sampling machine's boot (its ``startup``) and
    first charge, plus the larger of what the machines spend while each cluster runs its share of the
    sample at the runtimes known and the bound itself (the cheapest execution of the bag: a sample
    slower than those runtimes closes there), plus the ATU each machine is in when it closes; the rest of sampling's money runs the bag's own tasks. With longer ATUs,
    no bound."""
    from ..core.bats.sampling import SAMPLING_BOUND
    from ..core.billing import atus_begun
    from ..core.planning.clusters import SHORT_ATU_S
    from ..core.planning.estimate import REPLICATED_TASKS

    if any(cl.atu_s > SHORT_ATU_S for cl in config.clusters.values()):
        return ("  sampling has no upper bound here: with an ATU longer than a minute it runs until every "
                "sampled task has ended (seed 000's sampling; each machine's first ATU is paid at once)")
    first = 0.0
    for name, n in asked.items():
        cl = config.clusters[name]
        boot = float(cl.options.get("startup", 0.0) or 0.0)
        first += n * atus_begun(boot, cl.atu_s, cl.min_charge_s) * cl.price
    begun = sum(n * config.clusters[name].price for name, n in asked.items())  # the ATU each is in at the close
    rest = "the rest of what it costs runs the bag's own tasks, which are not run again"
    if any(name not in runtimes for name in asked):
        return (f"  sampling spends at most {first + begun:.{places}f} to measure (boots as configured, first charges, "
                f"the ATU each machine is in when the sample closes) plus what they spend until every cluster has "
                f"ended two tasks, then up to {SAMPLING_BOUND:g} x the cheapest execution of the bag: an upper bound "
                f"in the bag's runtimes, --guess-runtime gives its figure; {rest}")
    mean = {name: sum(values) / len(values) for name, values in runtimes.items() if values}
    slots = {name: cl.slots or 1 for name, cl in config.clusters.items()}
    per_task = [mean[name] * cl.price / cl.atu_s / slots[name] for name, cl in config.clusters.items() if name in mean]
    cheapest = n_tasks * min(per_task) if per_task else 0.0
    # at these runtimes each cluster runs its share of the sample (its copies of the replicated tasks
    # and its part of the others) in this long; the machines' money meanwhile may all be measuring
    replicated = min(REPLICATED_TASKS, sample_size)
    share = replicated + max(0, sample_size - replicated) / max(1, len(asked))
    wait = max((math.ceil(share / (asked[name] * slots[name])) * mean[name] for name in asked if asked[name]),
               default=0.0)
    waiting = sum(n * wait * config.clusters[name].price / config.clusters[name].atu_s for name, n in asked.items())
    upper = first + max(waiting, SAMPLING_BOUND * cheapest) + begun
    return (f"  sampling spends at most {upper:.{places}f} to measure (an upper bound: its machines' boots and "
            f"first charges, then the more of what they spend while the sample runs at these runtimes, "
            f"{waiting:.{places}f}, and {SAMPLING_BOUND:g} x the cheapest execution of the bag, "
            f"{cheapest:.{places}f}, where a slower sample closes with its running tasks censored, and the ATU "
            f"each machine is in then); {rest}")


def _known_runtimes(args, bag: Bag, config: Config, guesses: dict[str, float]):
    """(runtimes per cluster, lines saying where they come from): the guesses, then an earlier run."""
    from ..state.earlier import EarlierRunError, earlier_runtimes

    runtimes: dict[str, list[float]] = {name: [seconds] for name, seconds in guesses.items()}
    said = []
    if guesses:
        said.append("runtimes guessed (--guess-runtime): " + ", ".join(
            f"{name} {format_duration(values[0])}" for name, values in runtimes.items()))
    missing = [name for name in config.clusters if name not in runtimes]
    if missing:
        try:
            earlier = earlier_runtimes(args.state_dir, bag.sha256)
        except EarlierRunError as exc:
            said.append(f"no earlier run to learn runtimes from: {exc}")
        else:
            used = [name for name in missing if name in earlier.runtimes]
            for name in used:
                runtimes[name] = earlier.runtimes[name]
            if used:
                said.append(f"runtimes measured by the run in {args.state_dir}: " + ", ".join(
                    f"{name} {format_duration(sum(runtimes[name]) / len(runtimes[name]))} "
                    f"({len(runtimes[name])} from its {earlier.source[name]})" for name in used))
    missing = [name for name in config.clusters if name not in runtimes]
    if missing and runtimes:
        said.append(f"no runtime known for {', '.join(missing)}: left out of the options "
                    f"(--guess-runtime {missing[0]}=DURATION adds it)")
    elif missing:
        said.append("the options need task runtimes: give --guess-runtime DURATION (or CLUSTER=DURATION,...), "
                    "or --state-dir of an earlier run of this bag")
    return runtimes, said


def _options(bag: Bag, config: Config, choice, runtimes: dict[str, list[float]], sample_size: int,
             sampled: float | None) -> list[str]:
    """The options the real core offers when it plans from ``runtimes`` after a sample of
    ``sample_size`` tasks, and which one the choice flags would take (``--budget``: the simulated
    run's choice, from what the budget has left after ``sampled``)."""
    from .. import core as c
    from ..core.bats.policy import BatsCore
    from ..core.bats.settings import Choice
    from ..core.planning.planner import spread
    from ..core.registry import build_core
    from ..views.options_table import core_profitability, format_options

    done = {task: "done" for task in list(bag.task_ids)[:min(sample_size, len(bag) - 1)]}
    options_choice = Choice(policy="bats", planner=choice.planner, all_options=choice.all_options)
    prior = {name: tuple(values) for name, values in runtimes.items()}
    core = build_core(bag.task_ids, config, random.Random(0), options_choice, prior_sample=prior, finished=done)
    actions = core.handle(c.RunStarted(0.0))
    offer = next((a for a in actions if isinstance(a, c.OfferOptions)), None)
    if offer is None:
        reasons = [a.reason for a in actions if isinstance(a, c.Finish)]
        return [f"no options: {reasons[0] if reasons else 'the planner found none'}"]
    shown = list(offer.options) if choice.all_options else spread(offer.options)
    lines = [format_options(shown, offer.estimates, offer.tasks, hidden=len(offer.options) - len(shown),
                            profit=core_profitability(core))]
    if isinstance(core, BatsCore) and choice.budget is not None:
        lines.extend(_budget_run(bag, config, choice, runtimes, offer.options, sampled))
    elif isinstance(core, BatsCore) and choice.schedule is not None:
        try:
            picked = core.choose(choice.schedule)
        except ValueError as exc:
            lines.append(f"the choice flags would stop the run: {exc}")
        else:
            same = [o.id for o in offer.options if o.machines == picked.machines]
            paid = f"; the sampling (about {sampled:g}) is paid apart" if sampled is not None else ""
            lines.append(f"--schedule {choice.schedule} would run "
                         f"{'option ' + str(same[0]) if same else 'the configuration'} ({_machines(picked.machines)}):"
                         f" about {format_duration(picked.makespan_s)} for {picked.cost:g}{paid}")
    return lines


def _machines(machines) -> str:
    return ", ".join(f"{n} x {name}" for name, n in machines.items() if n)


# A bag this long is simulated only up to the end of its sampling (the dry run stays quick).
SIMULATED_TASKS = 200_000


def _simulator(bag: Bag, config: Config, choice, runtimes: dict[str, list[float]], **changes):
    """A simulated run of the bag on ``config``, every task on a cluster taking that cluster's mean
    runtime from ``runtimes`` (the base runtime is 1 s, each cluster's speed its inverse); None when
    some cluster has no runtime."""
    from ..core.bats.settings import Choice
    from ..core.registry import build_core
    from ..sim.driver import Simulator

    if any(name not in runtimes for name in config.clusters):
        return None
    clusters = {}
    for name, cl in config.clusters.items():
        mean = sum(runtimes[name]) / len(runtimes[name])
        options = {key: value for key, value in cl.options.items() if key != "slowdown"}
        # a speed of exactly 1 means "ask slowdown" to the simulator: without slowdown it is 1 anyway
        clusters[name] = dataclasses.replace(cl, speed=1.0 / mean, options=options)
    simulated = dataclasses.replace(config, clusters=clusters)
    sim_choice = Choice(policy="bats", planner=choice.planner, cushion=choice.cushion, **changes)
    core = build_core(bag.task_ids, simulated, random.Random(0), sim_choice,
                      boot_timeout_s=config.master.boot_timeout_s, max_held=config.master.worker_capacity,
                      adaptive_prefetch=config.master.prefetch is None)
    return Simulator(core, simulated, [0.0] + [1.0] * max(bag.task_ids, default=0), choice=sim_choice)


def _simulated_sampling(bag: Bag, config: Config, choice, runtimes: dict[str, list[float]]) -> float | None:
    """What the sampling phase costs when tasks take the mean runtimes known (None if some cluster's
    runtime is unknown)."""
    sim = _simulator(bag, config, choice, runtimes, plan_only=True)
    if sim is None:
        return None
    sim.run()
    cost = sim.core.view().sampling_cost
    return None if cost is None else float(cost)


def _budget_run(bag: Bag, config: Config, choice, runtimes: dict[str, list[float]], offered,
                sampled: float | None) -> list[str]:
    """``--budget``: the run simulated with the known runtimes: the sampling it pays, the option the
    money left buys and how the run would end."""
    flag = f"--budget {choice.budget:g}"
    sim = _simulator(bag, config, choice, runtimes, budget=choice.budget,
                     plan_only=len(bag) > SIMULATED_TASKS)
    if sim is None:
        return [f"{flag}: the budget pays for the sampling too; give every cluster a runtime to see what is left"]
    finish = sim.run()
    report = sim.core.report(sim.now)
    sampling = report["cost"]["sampling"]
    selected = sim.core.view().selected
    if selected is None:
        return [f"{flag} would pay about {sampling:g} for the sampling and stop there: {finish.reason}"]
    same = [o.id for o in offered if o.machines == selected.machines]
    what = f"the configuration of option {same[0]}" if same else "the configuration"
    left = max(0.0, choice.budget - sampling)
    if selected.cost > left + 1e-9:
        lines = [f"{flag} would pay about {sampling:g} for the sampling; the {left:g} left pays for no configuration, "
                 f"so it would run {what} ({_machines(selected.machines)}) as far as the money goes"]
    else:
        lines = [f"{flag} would pay about {sampling:g} for the sampling, then run {what} "
                 f"({_machines(selected.machines)}) with the {left:g} left: about "
                 f"{format_duration(selected.makespan_s)} for {selected.cost:g}"]
    if len(bag) > SIMULATED_TASKS:
        return lines
    tasks = report["tasks"]
    if finish.status == "done":
        lines.append(f"  simulated: the bag ends in about {format_duration(report['makespan_s'])}, "
                     f"{report['cost']['total']:g} spent in all")
        return lines
    lines.append(f"  simulated: the run ends INCOMPLETE, {tasks['not_run']} of {tasks['total']} task(s) not run "
                 f"({report['cost']['total']:g} spent)")
    enough = _least_budget(bag, config, choice, runtimes, (sampled or sampling) + min((o.cost for o in offered), default=0.0))
    if enough is not None:
        lines.append(f"  a budget of {enough:g} would end the bag (simulated with the same runtimes)")
    return lines


def _least_budget(bag: Bag, config: Config, choice, runtimes: dict[str, list[float]], start: float) -> float | None:
    """The first of a few budgets from ``start`` up (10 % apart, rounded up to a whole amount) whose
    simulated run ends the bag; None when none of them does."""
    amount = float(math.ceil(start))
    for _ in range(8):
        sim = _simulator(bag, config, choice, runtimes, budget=amount)
        if sim is not None and sim.run().status == "done":
            return amount
        amount = float(math.ceil(amount * 1.1))
    return None
