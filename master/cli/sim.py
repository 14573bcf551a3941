"""``bats-sim``: a bag of N simulated tasks through the master's core in virtual time.

    bats-sim --config CLUSTERS.toml --tasks N --runtimes SPEC [--seed S] [--report FILE] …

How this works. The flags are read as ``bats-master`` reads its own (:mod:`.args`), the runtimes
are drawn and the run simulated by :func:`bats.master.sim.driver.simulate`, and the report is
written and summed up on stdout as ``bats-master`` does (:mod:`bats.master.views.report`). Exit
status: 0 when every task succeeded (or ``--plan-only`` stopped after the options), 1 when the run
ended incomplete or was interrupted, 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import time
from collections.abc import Sequence

from .. import core as c
from ..sim.driver import DEFAULT_TICK_S, simulate
from .args import (
    CHOICE_FLAGS,
    OneLineArgumentParser,
    UsageError,
    add_choice_flags,
    choice_from_args,
    duration_arg,
    load_cluster_config,
)

log = logging.getLogger("bats.sim")

EXIT_OK, EXIT_INCOMPLETE, EXIT_BAD_INPUT = 0, 1, 2

NO_CHOICE = f"the clusters have prices, so BaTS needs a choice: {CHOICE_FLAGS}"



def build_parser() -> argparse.ArgumentParser:
    """The ``bats-sim`` argument parser."""
    from bats.common import __version__

    p = OneLineArgumentParser(
        prog="bats-sim",
        description="Run a bag of N simulated tasks through the BaTS master's core in virtual time.",
        epilog="Runtime specs (durations: bare number = seconds, or 90s, 15m, 1h): normal:MEAN,SD "
               "levy:SCALE,MAX mdb bimodal:SHORT,LONG,SHARE fewlong:SHORT,LONG,K "
               "shape:heavy|wide|stragglers|stages|powerlaw|spiky,MEAN fixed:T file:PATH.",
    )
    p.add_argument("--config", metavar="FILE",
                   help="clusters config (TOML), as for bats-master; a cluster's speed divides runtimes")
    p.add_argument("--workers", type=int, metavar="N", help="with no --config: machines of the default local cluster")
    p.add_argument("--tasks", type=int, metavar="N", help="tasks in the bag (required unless --replay)")
    p.add_argument("--runtimes", metavar="SPEC", help="task runtime distribution (see below; required unless --replay)")
    p.add_argument("--replay", metavar="STATE_DIR",
                   help="feed the events a real run recorded to a fresh core and check it takes the same actions "
                        "(exit 0), else print the first difference (exit 1)")
    p.add_argument("--seed", type=int, help="seed for runtimes and task order (default: random, in the report)")
    p.add_argument("--retries", type=int, default=0, metavar="N", help="re-run a failed task up to N times (default 0)")
    p.add_argument("--fail-rate", type=float, default=0.0, metavar="P",
                   help="probability that a task attempt fails (default 0)")
    p.add_argument("--tick", type=duration_arg, default=DEFAULT_TICK_S, metavar="DURATION",
                   help="virtual time between the core's Tick events (default 60s)")
    p.add_argument("--report", metavar="FILE", help="write report.json here")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no summary on stdout (an incomplete run still says why, in one line on stderr)")
    p.add_argument("--version", action="version", version=f"bats {__version__}")
    add_choice_flags(p)
    return p



def replay(state_dir: str, quiet: bool = False) -> int:
    """``--replay STATE_DIR``: every session the run recorded, replayed (:mod:`bats.master.sim.replay`)."""
    from pathlib import Path

    from bats.common.config import ConfigError

    from ..sim.replay import core_for
    from ..sim.replay import replay as replay_sessions
    from ..state.bag import BagError, load_bag
    from ..state.events import EVENTS_NAME, EventLogError, read

    state = Path(state_dir)
    path = state / EVENTS_NAME
    if not path.is_file():
        raise UsageError(f"--replay {state_dir}: no {EVENTS_NAME} there (a run records one from this version on)")
    try:
        bag = load_bag(state / "bag.txt")
    except BagError as exc:
        raise UsageError(f"--replay: {exc}") from None
    config_copy = state / "config.toml"

    def make_core(header: dict) -> c.Core:
        try:
            config = load_cluster_config(str(config_copy) if config_copy.is_file() else None, header.get("workers"))
        except ConfigError as exc:
            raise UsageError(f"--replay {state_dir}: {exc}") from None
        return core_for(bag.task_ids, config, header)

    same = True
    try:
        for outcome in replay_sessions(read(path), make_core):
            if outcome.divergence is not None:
                same = False
                print(f"bats-sim: the replay differs at {outcome.divergence.describe()}")
            elif not quiet:
                print(f"session {outcome.session}: {outcome.events} events, the same actions")
    except EventLogError as exc:
        raise UsageError(f"--replay: {exc}") from None
    return EXIT_OK if same else EXIT_INCOMPLETE


def run(args: argparse.Namespace) -> int:
    if args.replay is not None:
        return replay(args.replay, args.quiet)
    if args.tasks is None or args.runtimes is None:
        raise UsageError("--tasks and --runtimes are required (or --replay STATE_DIR)")
    from ..core.planning.planner import spread
    from ..sim.runtimes import MIN_RUNTIME_S, parse_runtimes
    from ..views.options_table import core_profitability, format_options
    from ..views.report import add_analysis, summary, write_report
    from .args import check_plot_path

    if args.tasks < 1:
        raise UsageError("--tasks: must be at least 1")
    if args.retries < 0:
        raise UsageError("--retries: must be 0 or more")
    if not 0.0 <= args.fail_rate <= 1.0:
        raise UsageError("--fail-rate: must be between 0 and 1")
    if args.tick <= 0:
        raise UsageError("--tick: must be longer than 0 seconds")
    distribution = parse_runtimes(args.runtimes)
    clamped = getattr(distribution, "clamped_share", None)
    if clamped is not None and clamped() >= 0.001:
        log.warning("--runtimes %s: about %.0f%% of the runtimes fall below %g s and are drawn again "
                    "(the bag's mean is higher than asked)", args.runtimes, 100 * clamped(), MIN_RUNTIME_S)
    config = load_cluster_config(args.config, args.workers)
    choice = choice_from_args(args, config)
    check_plot_path(args.plot)
    if not choice.decided:
        raise UsageError(NO_CHOICE)
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    started = time.perf_counter()
    sim = simulate(config, args.tasks, distribution, seed, retries=args.retries, tick_s=args.tick,
                   fail_rate=args.fail_rate, choice=choice)
    wall = time.perf_counter() - started
    report = sim.report({"seed": seed, "runtimes": args.runtimes, "config": config.source})
    core = sim.core  # the execution phase's makespan: from the choice to the last result
    end = core.last_finish_at if core.remaining == 0 else sim.now
    add_analysis(report, getattr(core, "execution_started_at", None), end)
    if sim.plan_s is not None:
        report["timings"] = {"plan_s": sim.plan_s}
    report_path = "(not written; add --report FILE)"
    if args.report:
        try:
            write_report(report, args.report)
            report_path = args.report
        except OSError as exc:
            log.error("cannot write the report %s: %s", args.report, exc.strerror or exc)
            report_path = "(not written)"
    if not args.quiet:
        core = sim.core
        from ..core.bats.policy import BatsCore

        if isinstance(core, BatsCore) and core.options:
            estimates = {name: (e["mean_s"], e["sd_s"]) for name, e in report["estimates"].items()}
            shown = core.options if choice.all_options else spread(core.options)
            print(format_options(shown, estimates, core.tasks_at_plan, hidden=len(core.options) - len(shown),
                                 profit=core_profitability(core), slots=core.cluster_slots))
            if sys.stdout.isatty():
                from ..views.plots import text_plot

                print("\n" + text_plot(core.options))
        print(summary(report, report_path))
        print(f"  simulated {sim.events} events in {wall:.2f} s wall (seed {seed})")
    _plot(args.plot, sim.core)
    planned_only = choice.plan_only and bool(getattr(sim.core, "options", None))  # as bats-master --plan-only
    ok = sim.finish is not None and (sim.finish.status == "done" or planned_only)
    if not ok and args.quiet:  # no summary, but an exit status of 1 says why in one line
        tasks = report["tasks"]
        print(f"bats-sim: {report['status']}: {report['reason']} ({tasks['done']} done, {tasks['failed']} failed, "
              f"{tasks['not_run']} not run, of {tasks['total']})", file=sys.stderr)
    return EXIT_OK if ok else EXIT_INCOMPLETE


def _plot(path: str | None, core: c.Core) -> None:
    """``--plot FILE.png``: the options offered, the chosen one circled."""
    view = core.view()
    options = view.options
    if not path:
        return
    if not options:
        log.warning("--plot %s: no options were offered (no sampling phase), nothing drawn", path)
        return
    from ..views.plots import write_options_png

    selected = view.selected
    try:
        write_options_png(path, options, chosen=selected.id if selected else None, tasks=view.tasks_at_plan)
    except OSError as exc:
        log.error("--plot %s: cannot write the picture: %s", path, exc.strerror or exc)


def main(argv: Sequence[str] | None = None) -> int:
    from bats.common.config import ConfigError

    from ..sim.runtimes import RuntimeSpecError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        level = logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING
        logging.basicConfig(level=level, format="bats-sim: %(levelname)s: %(message)s", stream=sys.stderr)
        return run(args)
    except RuntimeSpecError as exc:
        return _bad_input(f"--runtimes: {exc}")
    except (UsageError, ConfigError) as exc:
        return _bad_input(str(exc))
    except KeyboardInterrupt:
        print("bats-sim: interrupted", file=sys.stderr)
        return EXIT_INCOMPLETE


def _bad_input(message: str) -> int:
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    print(f"bats-sim: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
