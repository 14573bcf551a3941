"""The argument parsers of ``bats-master`` and its subcommands: every option with its help text, the
subcommands named in the usage line (``tests/cli/test_help.py`` walks them, and ``bats-master
completion bash`` is generated from them)."""

from __future__ import annotations

import argparse

from bats.common import __version__

from .args import OneLineArgumentParser, add_choice_flags, duration_arg

DEFAULT_STATE_DIR = "bats-run"
SUBCOMMANDS = ("results", "status", "report", "cleanup", "completion")
STATE_DIR_HELP = f"the run's state directory (default ./{DEFAULT_STATE_DIR})"


def run_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="bats-master",
        usage=("%(prog)s --bag FILE [--config FILE] [--state-dir DIR] [options]\n"
               "       %(prog)s --resume [--retry-failed] [--state-dir DIR] [options]\n"
               "       %(prog)s --dry-run --bag FILE [--config FILE] [--guess-runtime DURATION] [options]\n"
               f"       %(prog)s {{{','.join(SUBCOMMANDS)}}} [--help] ..."),
        description="Run a bag of shell tasks (one per line) on local or rented machines.",
        epilog="Subcommands: results (export the results), status (the live figures of a run), report (a "
               "run's summary, --html), cleanup (terminate what a killed run left running), completion bash "
               "(a bash completion script for bats-master, bats-sim and bats-worker); each has --help. "
               "Exit codes: 0 every task succeeded, 1 some task failed or did not run, 2 bad input.",
    )
    p.add_argument("--bag", metavar="FILE", help="the bag: one shell command per line")
    p.add_argument("--config", metavar="FILE", help="clusters config (TOML); default: local workers, one per core")
    p.add_argument("--state-dir", metavar="DIR", default=DEFAULT_STATE_DIR,
                   help=f"where the journal, outputs and report live (default ./{DEFAULT_STATE_DIR})")
    p.add_argument("--resume", action="store_true", help="continue the run in --state-dir without re-running finished tasks")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: run the tasks whose result was a failure (nonzero exit, timeout) again, "
                        "as well as those not run yet; each task keeps one result, its latest")
    p.add_argument("--retries", type=int, metavar="N", help="re-run a failed task up to N times on another machine (default: [retry] attempts "
                   "in the config, else 0); the config's [retry] rules choose which failures, by exit code and cause")
    p.add_argument("--max-machine-losses", type=int, metavar="N",
                   help="a task that was on N machines that were lost (it may be what kills them) is recorded "
                        "failed and not run again; machines lost together count against none (default 2)")
    p.add_argument("--task-timeout", type=duration_arg, metavar="DURATION",
                   help="kill a task after this long and count it failed (e.g. 90s, 10m)")
    p.add_argument("--report", metavar="FILE", help="where to write report.json (default STATE_DIR/report.json)")
    p.add_argument("--results", metavar="DIR",
                   help="keep every task's whole stdout and stderr as DIR/ID/stdout and DIR/ID/stderr (ID: its line "
                        "number); machines other than local ones need DIR shared with this one")
    p.add_argument("--workers", type=int, metavar="N", help="with no --config: local workers to start (default: one per core)")
    p.add_argument("--seed", type=int, help="seed for the random task order (default: random, recorded in the journal)")
    p.add_argument("--insecure", action="store_true",
                   help="plain TCP without CurveZMQ encryption; only for a loopback [master] listen address")
    p.add_argument("--keep-machines", action="store_true",
                   help="on Ctrl-C/SIGTERM leave the machines running instead of releasing them (they keep costing)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--version", action="version", version=f"bats {__version__}")
    p.add_argument("--dashboard", type=int, metavar="PORT",
                   help="serve a read-only page with the live figures on http://127.0.0.1:PORT/ (0: a free port)")
    p.add_argument("--dry-run", action="store_true",
                   help="spend nothing and start nothing: show what would be sampled and, with runtimes from an "
                        "earlier run of the same bag in --state-dir or --guess-runtime, the options and their cost")
    p.add_argument("--guess-runtime", metavar="DURATION|CLUSTER=DURATION,...",
                   help="with --dry-run: the task runtime to plan with, for every cluster (divided by its speed "
                        "key, or 1/slowdown for an emulated local cluster) or per cluster (fast=10s,slow=30s)")
    add_choice_flags(p)
    return p


def results_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(prog="bats-master results", description="Export task results from a run's journal.")
    p.add_argument("--state-dir", metavar="DIR", default=DEFAULT_STATE_DIR, help=STATE_DIR_HELP)
    p.add_argument("--failed", action="store_true", help="only tasks that failed")
    p.add_argument("--format", choices=("jsonl", "csv"), default="jsonl",
                   help="one JSON object per line (default) or CSV with a header row")
    p.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    return p


def status_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(prog="bats-master status",
                              description="Show the live figures of the run going on in a state dir.")
    p.add_argument("--state-dir", metavar="DIR", default=DEFAULT_STATE_DIR, help=STATE_DIR_HELP)
    p.add_argument("--json", action="store_true", help="the figures as JSON (the dashboard's)")
    return p


def report_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(prog="bats-master report",
                              description="Show a finished run's summary; --html writes a page with its plots.")
    p.add_argument("--state-dir", metavar="DIR", default=DEFAULT_STATE_DIR, help=STATE_DIR_HELP)
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page (figures inlined) here")
    return p


def cleanup_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(prog="bats-master cleanup",
                              description="Terminate what a run left running: cloud machines (found by their tags), "
                                          "ssh workers and sge/slurm jobs (found by the run id).")
    p.add_argument("--state-dir", metavar="DIR", default=DEFAULT_STATE_DIR, help=STATE_DIR_HELP)
    return p


def completion_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(prog="bats-master completion",
                              description="Print a shell completion script for bats-master, bats-sim and "
                                          "bats-worker, made from their options: "
                                          "source <(bats-master completion bash) (or zsh)")
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in (bash or zsh)")
    return p


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name."""
    return {"results": results_parser(), "status": status_parser(), "report": report_parser(),
            "cleanup": cleanup_parser(), "completion": completion_parser()}
