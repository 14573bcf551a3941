"""``bats-master``: the command line. The only place that prints.

    bats-master --bag FILE [--config FILE] [--state-dir DIR] [--retries N] [--task-timeout DUR] …
    bats-master --resume [--state-dir DIR]
    bats-master results [--state-dir DIR] [--failed] [--format jsonl|csv]
    bats-master status [--state-dir DIR] [--json]
    bats-master report [--state-dir DIR] [--html FILE]
    bats-master cleanup [--state-dir DIR]

Exit codes: 0 every task succeeded; 1 some task failed or did not run; 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import os
import random
import secrets
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bats.common import __version__, clock
from bats.common.config import Config, ConfigError

from ..state.bag import BagError, load_bag
from . import parsers
from .args import (
    CHOICE_FLAGS,
    UsageError,
    check_plot_path,
    choice_from_args,
    load_cluster_config,
)
from .output import emit, silence

EXIT_OK, EXIT_INCOMPLETE, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_STATE_DIR = parsers.DEFAULT_STATE_DIR
if TYPE_CHECKING:
    from ..state.events import EventLog

log = logging.getLogger("bats.master")
PROGRESS = "bats.progress"  # the run's routine reports (bats.master.views.live logs there too)
progress = logging.getLogger(PROGRESS)


class _Formatter(logging.Formatter):
    """``bats-master: message`` for what the run reports as it goes (progress, the plan, re-plans),
    ``bats-master: WARNING: message`` (or ERROR) for what needs the operator's eye."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            return f"bats-master: {record.levelname}: {text}"
        return f"bats-master: {text}"


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    logging.basicConfig(level=level, handlers=[handler])
    # the run's routine reports: shown unless --quiet, without a level
    logging.getLogger(PROGRESS).setLevel(logging.WARNING if quiet else logging.INFO)



def _settings(args: argparse.Namespace, stored: dict | None = None) -> dict:
    """Run settings: stored ones on --resume, overridden by flags given now."""
    settings = dict(stored or {"retries": 0, "task_timeout_s": None, "seed": secrets.randbits(32),
                               "workers": None, "choice": None})
    if args.retries is not None:
        if args.retries < 0:
            raise UsageError("--retries: must be 0 or more")
        settings["retries"] = args.retries
        settings["retries_given"] = True
    if args.max_machine_losses is not None:
        if args.max_machine_losses < 1:
            raise UsageError("--max-machine-losses: must be 1 or more")
        settings["max_machine_losses"] = args.max_machine_losses
    if args.task_timeout is not None:
        settings["task_timeout_s"] = args.task_timeout or None
    if args.seed is not None:
        settings["seed"] = args.seed
    if args.workers is not None:
        settings["workers"] = args.workers
    if getattr(args, "results", None):
        settings["results_dir"] = os.path.abspath(args.results)
    return settings


def _results_dir(settings: dict, config: Config) -> str | None:
    """``--results DIR``, made now (bad input when it cannot be), kept by the run's settings on --resume."""
    folder = settings.get("results_dir")
    if not folder:
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        probe = Path(folder) / f".bats-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--results {folder}: cannot write there: {exc.strerror or exc}") from None
    remote = [name for name, cl in config.clusters.items() if cl.provisioner != "local"]
    if remote:
        log.warning("--results %s: the machines of %s write the outputs where they run: the folder must be "
                    "shared with them at the same path", folder, ", ".join(remote))
    return folder


def _retries(settings: dict, config: Config) -> int:
    """How many times a failed task may run again: ``--retries N``, else ``[retry] attempts``, else 0."""
    if settings.get("retries_given") or config.retry.attempts is None:
        return int(settings["retries"])
    return config.retry.attempts


def _events_log(state_dir: str, session: int, header: dict) -> EventLog | None:
    """The session's events log (``bats-sim --replay``), or None when it cannot be opened: a
    diagnostic, so the run goes on without it."""
    from ..state.events import EventLog

    try:
        return EventLog.open(state_dir, session, header)
    except OSError as exc:
        log.error("%s: the events log cannot be opened (%s); the run goes on without it", state_dir,
                  exc.strerror or exc)
        return None


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


NO_CHOICE = f"no terminal to choose an option on: {CHOICE_FLAGS}"


def _choice(args: argparse.Namespace, config: Config, settings: dict, resuming: bool) -> dict:
    """The BaTS choice from the flags (or, on --resume without choice flags, the stored one),
    checked before anything is started: no terminal and no choice is bad input."""
    given = any([args.policy != "auto", args.schedule, args.budget is not None, args.cushion is not None,
                 args.plan_only, args.no_sampling, args.planner != "exact", args.all_options,
                 args.deadline is not None, args.no_speed_up, args.no_catch_up])
    if resuming and not given and settings.get("choice"):
        return settings["choice"]
    choice = choice_from_args(args, config)
    check_plot_path(args.plot)
    if not choice.decided and not _interactive():
        raise UsageError(NO_CHOICE)
    return {"policy": choice.policy, "schedule": choice.schedule, "budget": choice.budget,
            "cushion": choice.cushion, "cushion_given": args.cushion is not None, "plan_only": choice.plan_only,
            "planner": choice.planner, "all_options": choice.all_options, "deadline": choice.deadline,
            "speed_up": choice.speed_up, "catch_up": choice.catch_up}


def _prepare(args: argparse.Namespace, bind: Callable[[Config, Any], Any]):
    """Open or create the run: returns (journal, bag, config, settings, bind(config, keys)).

    On a new run everything is checked and ``bind`` (the master's socket) is called before anything
    is written to the state dir, so bad input never leaves a half-started run behind."""
    from ..state.journal import Journal

    state_dir = Path(args.state_dir)
    bag_copy = state_dir / "bag.txt"
    config_copy = state_dir / "config.toml"
    if args.resume:
        if state_dir.is_dir():
            _lock(state_dir)  # before reading anything: a live master's run is not resumed twice
        journal = Journal.open(state_dir)
        try:
            moved = clock.continue_from(journal.meta.get("clock"))  # before anything of this session is stamped
            if moved is not None and abs(moved) > 1.0:
                log.warning("the wall clock moved %+.0f s against the run's since it started; the run keeps its "
                            "own clock", -moved)
            lost = journal.lost_results()
            if lost:
                raise UsageError(
                    f"{journal.path}: {lost} result(s) committed by the run are missing (its write-ahead log, "
                    f"{journal.path.name}-wal, was deleted or damaged since): restore it, or delete "
                    f"{journal.path.name}-mark to run those tasks again")
            settings = _settings(args, journal.meta.get("settings"))
            bag = load_bag(bag_copy)
            if journal.meta.get("bag_sha256") not in (None, bag.sha256):
                raise UsageError(f"{bag_copy}: changed since the run started (its sha256 is not the journal's); "
                                 "the run's tasks are its lines as they were: restore the file, or start a new run")
            if args.bag is not None and load_bag(args.bag).sha256 != bag.sha256:
                raise UsageError(f"{args.bag}: differs from the bag of the run in {state_dir}; "
                                 "resume without --bag, or start a new run with another --state-dir")
            if args.config is not None:
                raise UsageError("--config cannot change on --resume; the run keeps the config it started with")
            expected = journal.meta.get("config_sha256")
            if config_copy.exists():
                if expected is not None and _sha256(config_copy) != expected:
                    raise UsageError(f"{config_copy}: changed since the run started (its sha256 is not the "
                                     "journal's); restore it, or start a new run")
                config = load_cluster_config(str(config_copy), args.workers)
            elif expected is not None or journal.meta.get("config_path"):
                raise UsageError(f"{config_copy}: missing; the run started with a config "
                                 f"({journal.meta.get('config_path')}) and does not go on without it")
            else:
                config = load_cluster_config(None, settings.get("workers"))
            _check_installed(config)
            settings["choice"] = _choice(args, config, settings, resuming=True)
            _preflight(config, _config_dir(journal.meta, config))
            _results_dir(settings, config)
            journal.set_meta("settings", settings)
            bound = bind(config, _run_keys(args, state_dir, config))
        except BaseException:
            journal.close()
            raise
        return journal, bag, config, settings, bound
    if args.retry_failed:
        raise UsageError("--retry-failed goes with --resume (it re-runs the failed tasks of the run in --state-dir)")
    if not args.bag:
        raise UsageError("--bag FILE is required (or --resume to continue a run)")
    bag = load_bag(args.bag)
    settings = _settings(args)
    config = load_cluster_config(args.config, args.workers)
    _check_installed(config)
    settings["choice"] = _choice(args, config, settings, resuming=False)
    _preflight(config, _config_dir({"config_path": args.config}, config))
    _results_dir(settings, config)
    if (state_dir / "journal.sqlite").exists():
        raise UsageError(f"{state_dir}: holds a run already; pass --resume to continue it "
                         "or choose another --state-dir")
    if state_dir.exists() and not state_dir.is_dir():
        raise UsageError(f"{state_dir}: cannot use as --state-dir: a file is in the way")
    keys = _run_keys(args, None, config)
    bound = bind(config, keys)
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{state_dir}: cannot write the state dir: {exc.strerror or exc}") from None
    _lock(state_dir)  # two fresh starts on one state dir: the second stops here, writing nothing
    if (state_dir / "journal.sqlite").exists():  # the first one won the race
        raise UsageError(f"{state_dir}: holds a run already; pass --resume to continue it "
                         "or choose another --state-dir")
    meta = {"bag_path": os.path.abspath(args.bag), "bag_sha256": bag.sha256, "tasks": len(bag),
            "config_path": os.path.abspath(args.config) if args.config else None,
            "config_sha256": _sha256(Path(args.config)) if args.config else None,
            "settings": settings, "started_at": clock.now(), "clock": clock.mark(), "version": __version__}
    # The copies go first: once the journal exists, --resume relies on them.
    try:
        _write_private(bag_copy, b"\n".join(bag.lines) + b"\n")
        if args.config:
            _write_private(config_copy, Path(args.config).read_bytes())
        else:  # left by an earlier start that failed; --resume would take it for this run's config
            config_copy.unlink(missing_ok=True)
        if keys is not None:
            _replace_keys(state_dir, keys)
    except OSError as exc:
        raise UsageError(f"{state_dir}: cannot write the state dir: {exc.strerror or exc}") from None
    journal = Journal.create(state_dir, secrets.token_hex(8), meta)
    return journal, bag, config, settings, bound


def _lock(state_dir: Path) -> None:
    from ..state.lock import StateDirBusy, UnsafeStateDir, check_state_dir, lock_state_dir

    try:
        check_state_dir(state_dir)  # another user's dir, or links planted in it: refused, never used
        lock_state_dir(state_dir)
    except (StateDirBusy, UnsafeStateDir) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{state_dir}: cannot lock the state dir: {exc.strerror or exc}") from None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, readable by this user only (0600), replacing what was there."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _check_installed(config: Config) -> None:
    from bats import provisioners

    try:
        provisioners.check_installed([cl.provisioner for cl in config.clusters.values()])
    except KeyError as exc:
        raise UsageError(f"{config.source}: {exc.args[0]}") from None


def _config_dir(meta: dict, config: Config) -> str:
    """Where relative paths of the config (an ssh hosts_file, a key) start: the directory of the
    config as the operator gave it, also on --resume (which reads the state dir's copy)."""
    original = meta.get("config_path") or config.source
    return os.path.dirname(os.path.abspath(original)) if original else os.getcwd()


def _preflight(config: Config, config_dir: str) -> None:
    """Each cluster's provisioner checks it can work here (its commands on PATH, its files read),
    before anything is started or written: a problem is bad input naming the file, table and key."""
    from bats import provisioners
    from bats.provisioners.base import ProvisionerConfigError

    _files(config, config_dir)
    for name, cluster in config.clusters.items():
        try:
            provisioners.load(cluster.provisioner).preflight(cluster, config_dir)
        except ProvisionerConfigError as exc:
            raise UsageError(f"{config.source}: [clusters.{name}] {exc}") from None
    shell = config.master.shell
    local = [name for name, cluster in config.clusters.items() if cluster.provisioner == "local"]
    if local and shutil.which(shell) is None:  # every task would fail with 127
        raise UsageError(f"{config.source}: [master] shell {shell!r}: not found on this machine, where the "
                         f"workers of {', '.join(local)} run the tasks")


def _files(config: Config, config_dir: str):
    """``[files]`` with its inputs found from the config's folder (bad input when one cannot be read)."""
    from bats.common.files import resolved

    if config.files.used:
        other = [f"{name} ({cl.provisioner})" for name, cl in config.clusters.items()
                 if cl.provisioner not in FILES_PROVISIONERS]
        if other:
            raise UsageError(f"{config.source}: [files]: ships files to local, ssh and ec2 machines only, not to "
                             f"{', '.join(other)}")
        no_bucket = [name for name, cl in config.clusters.items()
                     if cl.provisioner == "ec2" and not cl.options.get("files_s3")]
        if no_bucket:
            raise UsageError(f"{config.source}: [clusters.{no_bucket[0]}] files_s3: required with [files] (where "
                             "the inputs and outputs pass, \"s3://bucket/prefix\")")
    try:
        return resolved(config.files, config_dir, f"{config.source}: [files]")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


FILES_PROVISIONERS = ("local", "ssh", "ec2")  # the back ends that carry [files] (common/files.py)


def _endpoints(config: Config) -> tuple[str, str | None]:
    listen = config.master.listen
    if listen is None:
        listen = "tcp://127.0.0.1:*" if config.all_local else "tcp://0.0.0.0:*"
    return listen, config.master.advertise


def _run_keys(args: argparse.Namespace, state_dir: Path | None, config: Config):
    """The run's CurveZMQ keys: new for a new run (``state_dir`` None), the stored ones on --resume
    (made now for a run started without them); None with ``--insecure``, which only loopback allows."""
    from ..server import security
    listen, _advertise = _endpoints(config)
    if args.insecure:
        if not security.is_loopback(listen):
            raise UsageError(f"--insecure: only for a loopback listen address, not {listen} "
                             "(machines elsewhere must connect with CurveZMQ)")
        log.warning("--insecure: connections to %s are NOT encrypted or authenticated by key; "
                    "use it only for testing on this machine", listen)
        return None
    if state_dir is not None and (state_dir / security.SECRET_FILE).exists():
        return security.load_keys(state_dir)
    keys = security.new_keys()
    if state_dir is not None:
        security.save_keys(state_dir, keys)
    return keys


def _replace_keys(state_dir: Path, keys) -> None:
    """Write a new run's keys (over any left by an earlier start that failed before its journal)."""
    from ..server import security
    (state_dir / security.SECRET_FILE).unlink(missing_ok=True)
    security.save_keys(state_dir, keys)


def _bind(config: Config, keys):
    import zmq

    from ..server.loop import bind_router

    listen, _advertise = _endpoints(config)
    try:
        return (*bind_router(listen, keys), keys)
    except zmq.ZMQError as exc:
        raise UsageError(f"{config.source}: [master] listen: cannot bind {listen}: {exc}") from None


def _dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: every check a start makes, then what would be sampled and the options
    (:mod:`.dryrun`); nothing is bound, written, started or paid for."""
    from .dryrun import dry_run

    if args.resume:
        raise UsageError("--dry-run shows what a new run would do; it does not go with --resume")
    if not args.bag:
        raise UsageError("--dry-run needs --bag FILE (and --config FILE for priced clusters)")
    bag = load_bag(args.bag)
    config = load_cluster_config(args.config, args.workers)
    _check_installed(config)
    choice = choice_from_args(args, config)
    _preflight(config, _config_dir({"config_path": args.config}, config))
    return dry_run(args, bag, config, choice)


def run(args: argparse.Namespace) -> int:
    if args.guess_runtime is not None and not args.dry_run:
        raise UsageError("--guess-runtime goes with --dry-run (a real run measures the runtimes)")
    if args.dry_run:
        return _dry_run(args)
    dashboard = _dashboard(args.dashboard)  # first: a port in use is bad input before the run starts
    journal, bag, config, settings, (_context, sock, bound, auth, keys) = _prepare(args, _bind)
    # imported only now, so that bad input is reported without loading the runtime
    from bats import provisioners
    from bats.provisioners.base import Bootstrap, ProvisionerError

    from ..core.registry import build_core
    from ..server.loop import Server
    from ..views.live import LiveView, Watch
    from ..views.report import build_report, summary, write_report
    from ..views.shell_hints import add_shell_hints
    from .choosing import FlagChooser, TerminalChooser

    try:
        finished = journal.finished_tasks()
        if args.retry_failed:
            finished = _retry_failed(finished, len(bag), args.state_dir)
        if args.resume and len(finished) >= len(bag):
            sock.close(linger=0)
            if auth is not None:
                auth.stop()
            if dashboard is not None:
                dashboard.close()
            return _nothing_to_resume(args)
        _listen, advertise = _endpoints(config)
        if advertise is None:
            advertise = bound.replace("0.0.0.0", _host_address())
        session = journal.add_session(clock.now())
        files = _files(config, _config_dir(journal.meta, config))
        bootstrap = Bootstrap(master_endpoint=advertise, run_id=journal.run_id, session=session,
                              heartbeat_s=config.master.heartbeat_s, log_dir=str(Path(args.state_dir) / "logs"),
                              state_dir=args.state_dir, config_dir=_config_dir(journal.meta, config),
                              task_shell=config.master.shell,
                              files=files if files.used else None,
                              server_key=keys.public_text if keys is not None else None)
        try:
            plugins = {name: provisioners.load(cl.provisioner)(cl, bootstrap) for name, cl in config.clusters.items()}
        except (ProvisionerError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        if session > 1:
            _terminate_leftovers(journal, config, plugins, session)
        config = _resolve_slots(config, plugins)
        choice = _resumed_choice(journal, settings["choice"], session)
        prior_sample = _prior_sample(journal, choice, session)
        built = {"seed": settings["seed"], "choice": choice, "prior_sample": prior_sample,
                 "retries": _retries(settings, config), "boot_timeout_s": config.master.boot_timeout_s,
                 "max_machine_losses": settings.get("max_machine_losses", 2), "finished": finished,
                 "max_held": config.master.worker_capacity, "adaptive_prefetch": config.master.prefetch is None}
        core = build_core(bag.task_ids, config, random.Random(built["seed"]), built["choice"],
                          prior_sample=prior_sample, retries=built["retries"], boot_timeout_s=built["boot_timeout_s"],
                          max_machine_losses=built["max_machine_losses"], finished=finished,
                          max_held=built["max_held"], adaptive_prefetch=built["adaptive_prefetch"])
        events = _events_log(args.state_dir, session, {**built, "workers": settings.get("workers"),
                                                       "slots": {name: cl.slots for name, cl in config.clusters.items()}})
        if finished:
            progress.info(
                "resuming %s (session %d): %d of %d tasks already finished", args.state_dir, session,
                len(finished), len(bag))
        view = None if args.quiet else LiveView(log_every_s=_log_every(core))
        from ..views.money import earlier

        watch = Watch(clock.now(), core.done + core.failed, view, _control(args.state_dir, journal.run_id),
                      earlier_run=earlier(journal.meta, journal.machines(), session))
        if dashboard is not None:
            dashboard.figures = watch.current
        chooser = None
        if choice.policy == "bats":
            from ..views.option_ids import OptionIds

            ids = OptionIds(journal.meta.get("option_ids"))  # the ids shown by earlier sessions still hold
            chooser = (TerminalChooser(choice, settings["choice"].get("cushion_given", False), ids=ids)
                       if not choice.decided else FlagChooser(choice, ids=ids))
            chooser.on_ids = lambda record: journal.set_meta("option_ids", record)
            if view is not None:
                chooser.before_show = view.pause  # the table and prompt replace the live view
            chooser.plot_path = args.plot
        from ..state.files import FilesBag
        from ..state.outputs import OutputsBag

        results_dir = settings.get("results_dir")  # checked by _prepare
        server_bag = FilesBag.around(bag, files) if files.used else bag  # the commands as the workers get them
        if results_dir:
            server_bag = OutputsBag.around(server_bag, results_dir)
        server = Server(core, server_bag, config, journal, plugins, sock, session,
                        task_timeout_s=settings["task_timeout_s"], on_tick=watch, chooser=chooser,
                        secure=keys is not None, keep_machines=args.keep_machines,
                        door=auth.door if auth is not None else None, events=events)
        try:
            finish = server.run()
        finally:
            if events is not None:
                events.close()
            watch.close()
            if dashboard is not None:
                dashboard.close()
            sock.close(linger=0)
            if auth is not None:
                auth.stop()
        report = build_report(core, finish, journal, config, session, clock.now(), args.state_dir)
        add_shell_hints(report, config.master.shell, bag.command)
        if chooser is not None:
            chooser.wait_for_plot()
        _redraw_plot(args.plot, core)
        if server.plan_s is not None:
            report["timings"] = {"plan_s": server.plan_s}
        report_path = args.report or str(Path(args.state_dir) / "report.json")
        try:
            write_report(report, report_path)
        except OSError as exc:
            log.error("cannot write the report %s: %s", report_path, exc.strerror or exc)
            report_path = "(not written)"
    finally:
        saved = _close_journal(journal)
    emit(summary(report, report_path))  # a closed pipe (`| head`) does not fail a run that succeeded
    seen = core.view()
    planned_only = choice.plan_only and bool(seen.options or seen.plan)
    return EXIT_OK if (finish.status == "done" or planned_only) and saved else EXIT_INCOMPLETE


def _retry_failed(finished: dict[int, str], tasks: int, state_dir: str) -> dict[int, str]:
    """``--retry-failed``: the tasks that failed count as not run, so they run again; each keeps
    one result in the journal (the latest), so nothing is counted twice."""
    failed = sum(status == "failed" for status in finished.values())
    if not failed:
        left = tasks - len(finished)
        progress.info("%s: no task of this run failed: nothing to retry%s", state_dir,
                      f"; resuming the {left} task(s) not run yet" if left > 0 else "")
        return finished
    progress.info("%s: retrying %d failed task(s)", state_dir, failed)
    return {task: status for task, status in finished.items() if status != "failed"}


def _nothing_to_resume(args: argparse.Namespace) -> int:
    """``--resume`` of a run whose every task has a result: no session is added, nothing is
    started, the report stays as it was (its makespan and cost are the run's); its summary is shown."""
    from ..views.html_report import ReportError, load_report
    from ..views.report import summary

    progress.info("%s: every task of this run has its result already; nothing to resume", args.state_dir)
    try:
        report = load_report(args.state_dir)
    except ReportError as exc:
        log.warning("%s; 'bats-master results' lists the results", exc)
        return EXIT_OK
    emit(summary(report, str(Path(args.state_dir) / "report.json")))
    return EXIT_OK if report.get("status") == "done" else EXIT_INCOMPLETE


def _prior_sample(journal, choice, session: int) -> dict[str, tuple[float, ...]] | None:
    """The sample an earlier session measured, for a BaTS run that stopped before its choice (say
    after ``--plan-only``) or during its execution: planned from again, not paid for twice (a chosen
    plan goes on with its budget left, :func:`_resumed_choice`). None when there is none."""
    sample = journal.meta.get("sample")
    if session <= 1 or choice.policy != "bats" or not isinstance(sample, dict):
        return None
    sets = sample.get("sets")
    if not isinstance(sets, dict):
        return None
    try:
        return {str(name): tuple(float(v) for v in values) for name, values in sets.items() if values}
    except (TypeError, ValueError):
        log.warning("the journal's sample is damaged; sampling again")
        return None


def _resumed_choice(journal, stored: dict, session: int):
    """The choice for this session. A run resumed after its plan was chosen goes on with that
    plan's budget, less what earlier sessions spent on it: implicit sampling, no new options."""
    from ..core.bats.settings import Choice

    choice = Choice(policy=stored["policy"], schedule=stored.get("schedule"), budget=stored.get("budget"),
                    cushion=stored.get("cushion", False), plan_only=stored.get("plan_only", False),
                    planner=stored.get("planner", "exact"), all_options=stored.get("all_options", False),
                    deadline=stored.get("deadline"), speed_up=stored.get("speed_up", True),
                    catch_up=stored.get("catch_up", True))
    if session <= 1 or choice.policy != "bats":
        return choice
    plan = journal.meta.get("plan")
    since = plan["session"] if plan else 1  # a plan's budget counts from the session that chose it
    earlier = sum(row["cost"] for row in journal.machines() if since <= row["session"] < session)
    if plan:  # the budget paid everything but the sampling phase of a plan chosen after it
        paid = earlier - (0.0 if plan["implicit"] else plan.get("sampling_cost") or 0.0)
        total = plan["budget"] + plan["cushion"]
    elif choice.budget is not None:
        paid, total = earlier, choice.budget
    else:
        return choice  # stopped before a plan was chosen: sample and offer again
    left = total - paid
    progress.info("resuming within the run's budget: %.2f left of %.2f", max(0.0, left), total)
    # the plan's budget: it speeds up as the chosen schedule did (fastest and budgets only)
    speeds_up = choice.speed_up and (not plan or plan.get("label") in ("fastest", "budget"))
    return Choice(policy="bats", budget=max(left, 1e-9), cushion=False, speed_up=speeds_up,
                  catch_up=choice.catch_up)


def _dashboard(port: int | None):
    if port is None:
        return None
    from ..views.dashboard import Dashboard

    if not 0 <= port <= 65535:
        raise UsageError(f"--dashboard {port}: not a port number (0 to 65535; 0 picks a free one)")
    try:
        dashboard = Dashboard(port, lambda: None)
    except OSError as exc:
        raise UsageError(f"--dashboard {port}: cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    print(f"bats-master: dashboard on {dashboard.url}", file=sys.stderr, flush=True)
    return dashboard


def _log_every(core) -> float:
    """Without a terminal: one progress line per BaTS monitoring interval (every few seconds
    when there is no budget to monitor)."""
    from ..views.live import LOG_EVERY_S

    return core.view().monitor_interval_s or LOG_EVERY_S


def _control(state_dir: str, run_id: str):
    """The socket ``bats-master status`` asks; a run goes on without it if it cannot be made."""
    import zmq

    from ..views.status import ControlServer

    try:
        return ControlServer(state_dir, run_id)
    except (zmq.ZMQError, OSError) as exc:
        log.warning("'bats-master status' will not answer for this run: %s", exc)
        return None


def _redraw_plot(path: str | None, core) -> None:
    """``--plot``: once the run is over, draw the options again, the chosen one circled (also after
    ``--plan-only``, when the drawing made at the offer may not have finished before the exit)."""
    view = core.view()
    options, selected = view.options, view.selected
    if not path or not options:
        return
    from ..views.plots import write_options_png

    try:
        write_options_png(path, options, chosen=selected.id if selected is not None else None,
                          tasks=core.tasks_at_plan)
    except OSError as exc:
        log.error("--plot %s: cannot write the picture: %s", path, exc.strerror or exc)
def _resolve_slots(config: Config, plugins: dict) -> Config:
    """``slots = "auto"`` becomes the CPUs a back end says its machines have (an EC2 instance type's
    vCPUs) before any is acquired, so the options are planned with them; where it cannot say, the
    worker's reported CPUs decide when each machine joins (the planner learns them from the first)."""
    resolved = {}
    for name, cluster in config.clusters.items():
        if cluster.slots is not None:
            continue
        try:
            cpus = plugins[name].machine_cpus()
        except Exception as exc:  # a back end's failure here only defers the answer to the hello
            log.warning("cluster %s: slots = \"auto\": the back end could not say how many CPUs its machines "
                        "have (%s); each machine's worker will", name, exc)
            continue
        if cpus is not None:
            progress.info("cluster %s: slots = \"auto\": %d per machine", name, cpus)
            resolved[name] = dataclasses.replace(cluster, slots=cpus)
    if not resolved:
        return config
    return dataclasses.replace(config, clusters={**config.clusters, **resolved})


def _terminate_leftovers(journal, config: Config, plugins: dict, session: int) -> None:
    """A resumed run first terminates the machines earlier sessions left running (a master that
    crashed could not) and charges them in the journal (:mod:`bats.master.state.leftovers`)."""
    from ..state.leftovers import bill_leftovers, settle_earlier_sessions

    found_by_cluster = {}
    for name, plugin in plugins.items():
        try:
            found = plugin.cleanup()
        except Exception as exc:
            log.error("cluster %s: looking for machines left running failed: %s; "
                      "run 'bats-master cleanup' once it answers", name, exc)
            continue
        if found:
            log.warning("cluster %s: terminated %d machine(s) an earlier session left running: %s",
                        name, len(found), ", ".join(sorted(found)))
        found_by_cluster[name] = found
    bill_leftovers(journal, config, found_by_cluster, clock.now(), session)
    settle_earlier_sessions(journal, session, set(found_by_cluster), config)


def cleanup(argv: Sequence[str]) -> int:
    """``bats-master cleanup``: terminate what the run in --state-dir left running (cloud machines,
    ssh workers, batch jobs), and charge it in the journal."""
    from bats.provisioners.base import Bootstrap

    from ..state.journal import Journal
    from ..state.leftovers import bill_leftovers

    args = parsers.cleanup_parser().parse_args(argv)
    state_dir = Path(args.state_dir)
    config_copy = state_dir / "config.toml"
    with Journal.open(state_dir) as journal:
        if not config_copy.exists():
            print(f"run {journal.run_id} used local workers only: nothing to clean up")
            return EXIT_OK
        config = load_cluster_config(str(config_copy), None)
        _check_installed(config)
        # relative paths in the config (an ssh key, a hosts file) start where the run's config was
        bootstrap = Bootstrap(master_endpoint="", run_id=journal.run_id, session=0,
                              config_dir=_config_dir(journal.meta, config))
        status, found = _clean_clusters(config, bootstrap)
        added = bill_leftovers(journal, config, found, clock.now(), journal.sessions()[-1][0] + 1)
    if added:
        print(f"charged {added:.4f} more to the run for the time those machines were left running")
    return status


def _clean_clusters(config: Config, bootstrap) -> tuple[int, dict[str, dict[str, str]]]:
    """``cleanup`` of every cluster, saying what each terminated; (exit status, found per cluster)."""
    from bats import provisioners
    from bats.provisioners.base import ProvisionerError

    status = EXIT_OK
    found_by_cluster = {}
    for name, cl in config.clusters.items():
        try:
            plugin = provisioners.load(cl.provisioner)(cl, bootstrap)
            try:
                found = plugin.cleanup()
            finally:
                plugin.close()  # an ssh connection kept open for later commands, say
        except (ProvisionerError, ValueError) as exc:
            said = str(exc) if str(exc).startswith(f"cluster {name}: ") else f"cluster {name}: {exc}"
            print(f"bats-master: error: {said}", file=sys.stderr)
            status = EXIT_INCOMPLETE
            continue
        except Exception as exc:  # the cloud's own error: one line, go on with the other clusters
            print(f"bats-master: error: cluster {name}: cleanup failed: {exc}".replace("\n", " "), file=sys.stderr)
            status = EXIT_INCOMPLETE
            continue
        listed = ", ".join(sorted(found)) if found else "nothing left"
        print(f"cluster {name} ({cl.provisioner}): terminated {len(found)}: {listed}")
        found_by_cluster[name] = found
    return status, found_by_cluster


def _close_journal(journal) -> bool:
    """Commit and close; a failure (disk full) is reported, not raised: the report is already
    written, and the tasks whose results were not saved run again after ``--resume``."""
    from ..state.journal import JournalError

    try:
        journal.close()
    except JournalError as exc:
        log.error("%s; those tasks run again after --resume", exc)
        return False
    return True


def _host_address() -> str:
    import socket

    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def results(argv: Sequence[str]) -> int:
    from ..state.results import export_results

    args = parsers.results_parser().parse_args(argv)
    if args.output:
        with open(args.output, "w", newline="") as out:
            count = export_results(args.state_dir, out, failed_only=args.failed, fmt=args.format)
        print(f"{count} result(s) written to {args.output}", file=sys.stderr)
    else:
        export_results(args.state_dir, sys.stdout, failed_only=args.failed, fmt=args.format)
    return EXIT_OK


def status(argv: Sequence[str]) -> int:
    """Exit 0 with the figures of the run going on; 1 with one line saying why there are none."""
    import json

    from ..views.live import status_text
    from ..views.status import StatusError, ask

    args = parsers.status_parser().parse_args(argv)
    try:
        figures = ask(args.state_dir)
    except StatusError as exc:
        print(f"bats-master status: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    print(json.dumps(figures, indent=2) if args.json else status_text(figures, args.state_dir))
    return EXIT_OK


def report_command(argv: Sequence[str]) -> int:
    from ..views.html_report import ReportError, load_report, write_html
    from ..views.report import summary

    args = parsers.report_parser().parse_args(argv)
    try:
        report = load_report(args.state_dir)
        if args.html:
            write_html(args.state_dir, args.html)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    emit(summary(report, str(Path(args.state_dir) / "report.json")))
    if args.html:
        print(f"  html      {args.html}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    from ..server.security import KeyFileError
    from ..state.journal import JournalError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "results":
            _setup_logging(0, True)
            return results(argv[1:])
        if argv and argv[0] == "report":
            _setup_logging(0, True)
            return report_command(argv[1:])
        if argv and argv[0] == "status":
            _setup_logging(0, True)
            return status(argv[1:])
        if argv and argv[0] == "cleanup":
            _setup_logging(0, True)
            return cleanup(argv[1:])
        if argv and argv[0] == "completion":
            from .completion import bash_script, zsh_script

            shell = parsers.completion_parser().parse_args(argv[1:]).shell
            emit(zsh_script() if shell == "zsh" else bash_script(), end="")
            return EXIT_OK
        args = parsers.run_parser().parse_args(argv)
        _setup_logging(args.verbose, args.quiet)
        return run(args)
    except BrokenPipeError:  # e.g. `bats-master results | head`: the reader has what it wanted
        silence()
        return EXIT_OK
    except (UsageError, BagError, ConfigError, JournalError, KeyFileError) as exc:
        # one line, whatever the message quotes (a file name may hold a newline)
        message = str(exc).replace("\r", "\\r").replace("\n", "\\n")
        print(f"bats-master: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("bats-master: interrupted", file=sys.stderr)
        return EXIT_INCOMPLETE


if __name__ == "__main__":
    sys.exit(main())


