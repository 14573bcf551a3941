"""Bad input: every case exits 2 with one line on stderr naming where the problem is, no traceback.

The cases run the real command line (``python -m bats.master.cli``) in a subprocess; each one must
fail before any worker starts. One real run (module fixture) provides a state dir that holds a
finished run, for the cases about ``--resume`` and about not losing earlier work.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bats.common.config import ConfigError, load_config
from bats.common.durations import parse_duration
from bats.master.state.bag import MAX_LINE_BYTES, BagError, load_bag

TIMEOUT_S = 30
PREFIX = "bats-master: error: "
GOOD_BAG = "echo one\necho two\n"
LOCAL = '[clusters.a]\nprovisioner = "local"\nmax = 1\n'


def cli(*args: str, cwd: Path, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bats.master.cli", *args], cwd=cwd, check=False,
                          capture_output=True, text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a run that failed on bad input (and the checks every case shares)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(PREFIX), lines[0]
    assert proc.stdout == ""
    return lines[0][len(PREFIX):]


def assert_names(message: str, *parts: str) -> None:
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


# ------------------------------------------------------------------- cases in a fresh directory

DIR = object()  # a file entry that is a directory


@dataclass(frozen=True)
class Case:
    files: dict[str, Any]  # name -> bytes, str or DIR, written into an empty directory first
    args: list[str]
    fragments: list[str]  # the message must hold each
    starts: str = ""  # the message must start with this
    kept: dict[str, str] = field(default_factory=dict)  # files that must be left as they were


BAG_RUN = ["--bag", "bag.txt", "--workers", "1", "--state-dir", "run"]
CONFIG_RUN = ["--bag", "bag.txt", "--config", "clusters.toml", "--state-dir", "run"]
CASES: dict[str, Case] = {}

BAG_CASES = {
    # name: (bag content, or None for no file; fragments)
    "missing": (None, ["bag.txt:0:", "cannot read"]),
    "directory": (DIR, ["bag.txt:0:", "directory"]),
    "zero-bytes": (b"", ["bag.txt:0:", "no tasks"]),
    "only-comments": (b"# one\n\n   \n  # two\n", ["bag.txt:4:", "no tasks"]),
    "only-bom": (b"\xef\xbb\xbf\n", ["bag.txt:1:", "no tasks"]),
    "nul-byte": (b"echo a\necho \0b\necho c\n", ["bag.txt:2:", "NUL"]),
    "long-line": (b"echo a\n# fine\necho " + b"x" * MAX_LINE_BYTES + b"\n", ["bag.txt:3:", "limit"]),
    "long-comment": (b"#" + b"x" * (MAX_LINE_BYTES + 1), ["bag.txt:1:", "limit"]),
    "invalid-utf8": (b"echo a\r\necho a\n\necho \xff\xfe\n", ["bag.txt:4:", "UTF-8"]),
    "utf16": ("echo a\n".encode("utf-16"), ["bag.txt:1:", "UTF-16"]),
    "utf16-no-bom": ("echo a\n".encode("utf-16-le"), ["bag.txt:1:", "NUL", "save it as UTF-8"]),
    "utf32": ("echo a\n".encode("utf-32"), ["bag.txt:1:", "UTF-32"]),
    "latin1": ("echo a\necho caf\u00e9\n".encode("latin-1"), ["bag.txt:2:", "UTF-8", "0xe9"]),
    "old-mac-line-ends": (b"echo a\recho b\recho c\r", ["bag.txt:1:", "carriage return"]),
    "cr-mid-line": (b"echo a\r\necho \rb\r\n", ["bag.txt:2:", "carriage return"]),
    "nul-late": (b"echo a\n" * 1000 + b"\0", ["bag.txt:1001:", "NUL"]),
}
for _name, (_content, _fragments) in BAG_CASES.items():
    CASES[f"bag-{_name}"] = Case({} if _content is None else {"bag.txt": _content}, BAG_RUN, _fragments,
                                 starts="bag.txt:")

CONFIG_CASES = {
    # name: (config text or bytes; fragments besides the file name)
    "unknown-key": (LOCAL + 'colour = "red"\n', ["[clusters.a]", "colour", "unknown key"]),
    "unknown-master-key": ('[master]\nport = 5\n' + LOCAL, ["[master]", "port", "unknown key"]),
    "sampling-confidence-1": ('[sampling]\nconfidence = 1.0\n' + LOCAL, ["[sampling]", "confidence", "between 0 and 1"]),
    "sampling-error-string": ('[sampling]\nerror = "a quarter"\n' + LOCAL, ["[sampling]", "error"]),
    "sampling-workers-zero": ('[sampling]\ninitial_workers = 0\n' + LOCAL, ["[sampling]", "initial_workers"]),
    "sampling-unknown-key": ('[sampling]\nsize = 30\n' + LOCAL, ["[sampling]", "size", "unknown key"]),
    "sampling-not-a-table": ('sampling = 3\n' + LOCAL, ["[sampling]", "must be a table"]),
    "monitor-interval-zero": ('[master]\nmonitor_interval = 0\n' + LOCAL, ["[master]", "monitor_interval"]),
    "release-margin-bad": ('[master]\nrelease_margin = "soon"\n' + LOCAL, ["[master]", "release_margin"]),
    "max-string": ('[clusters.a]\nprovisioner = "local"\nmax = "4"\n', ["[clusters.a]", "max"]),
    "max-bool": ('[clusters.a]\nprovisioner = "local"\nmax = true\n', ["[clusters.a]", "max"]),
    "max-float": ('[clusters.a]\nprovisioner = "local"\nmax = 2.5\n', ["[clusters.a]", "max"]),
    "max-zero": ('[clusters.a]\nprovisioner = "local"\nmax = 0\n', ["[clusters.a]", "max", "at least 1"]),
    "max-missing": ('[clusters.a]\nprovisioner = "local"\n', ["[clusters.a]", "max", "required"]),
    "price-negative": (LOCAL + "price = -0.5\n", ["[clusters.a]", "price"]),
    "price-string": (LOCAL + 'price = "cheap"\n', ["[clusters.a]", "price"]),
    "price-inf": (LOCAL + "price = inf\n", ["[clusters.a]", "price"]),
    "price-huge-int": (LOCAL + "price = 1" + "0" * 400 + "\n", ["[clusters.a]", "price"]),
    "atu-parsecs": (LOCAL + 'atu = "5 parsecs"\n', ["[clusters.a]", "atu", "parsecs"]),
    "atu-zero": (LOCAL + "atu = 0\n", ["[clusters.a]", "atu"]),
    "atu-negative": (LOCAL + "atu = -60\n", ["[clusters.a]", "atu"]),
    "atu-nan": (LOCAL + "atu = nan\n", ["[clusters.a]", "atu"]),
    "atu-bool": (LOCAL + "atu = true\n", ["[clusters.a]", "atu"]),
    "atu-date": (LOCAL + "atu = 1979-05-27\n", ["[clusters.a]", "atu"]),
    "atu-huge-int": (LOCAL + "atu = 1" + "0" * 400 + "\n", ["[clusters.a]", "atu"]),
    "provisioner-missing": ("[clusters.a]\nmax = 1\n", ["[clusters.a]", "provisioner", "required"]),
    "provisioner-not-string": ("[clusters.a]\nprovisioner = 5\nmax = 1\n", ["[clusters.a]", "provisioner"]),
    "provisioner-unknown": ('[clusters.a]\nprovisioner = "nope"\nmax = 1\n', ["[clusters.a]", "provisioner", "nope"]),
    "local-option-type": (LOCAL + 'slowdown = "fast"\n', ["[clusters.a]", "slowdown"]),
    "local-option-negative": (LOCAL + "startup = -1\n", ["[clusters.a]", "startup"]),
    "duplicate-key": (LOCAL + "max = 2\n", ["not valid TOML", "line 4"]),
    "duplicate-table": (LOCAL + LOCAL, ["not valid TOML", "line 4"]),
    "invalid-toml": ("[clusters.a\nmax = 1\n", ["not valid TOML", "line 1"]),
    "integer-too-long": (LOCAL + "price = 1" + "0" * 5000 + "\n", ["not valid TOML"]),
    "not-utf8": (LOCAL.encode() + b"# caf\xe9\n", ["clusters.toml:4:", "UTF-8"]),
    "cluster-not-a-table": ("[clusters]\nx = 5\n", ["[clusters.x]", "table"]),
    "clusters-not-a-table": ("clusters = 5\n", ["clusters"]),
    "no-clusters": ('[master]\nheartbeat = "1s"\n', ["clusters"]),
    "master-not-a-table": ("master = 5\n" + LOCAL, ["[master]", "table"]),
    "unknown-top-level-table": (LOCAL + "[extra]\nx = 1\n", ["[extra]", "unknown"]),
    "liveness-below-heartbeat": ('[master]\nheartbeat = "10s"\nliveness = "5s"\n' + LOCAL,
                                 ["[master]", "liveness"]),
    "liveness-equals-heartbeat": ("[master]\nheartbeat = 3\nliveness = 3\n" + LOCAL, ["[master]", "liveness"]),
    "heartbeat-zero": ("[master]\nheartbeat = 0\n" + LOCAL, ["[master]", "heartbeat"]),
    "boot-timeout-zero": ("[master]\nboot_timeout = 0\n" + LOCAL, ["[master]", "boot_timeout"]),
    "listen-not-endpoint": ('[master]\nlisten = "localhost"\n' + LOCAL, ["[master]", "listen"]),
    "key-with-newline": (LOCAL + '"x\\ny" = 1\n', ["[clusters.a]", "'x\\ny'", "unknown key"]),
    "cluster-with-newline": ('[clusters."a\\nb"]\nprovisioner = "local"\nmax = 0\n',
                             ["[clusters.'a\\nb']", "a cluster name is"]),
    "utf16": (LOCAL.encode("utf-16"), ["clusters.toml:1:", "UTF-16"]),
    "latin1": (LOCAL.encode() + "# caf\u00e9\n".encode("latin-1"), ["clusters.toml:4:", "UTF-8"]),
    "nul-byte": (LOCAL.encode() + b'colour = "r\0d"\n', ["clusters.toml:4:", "not valid TOML"]),
    "long-line": (LOCAL + "# " + "x" * 70_000 + "\n", ["clusters.toml:4:", "limit"]),
    "huge-file": (LOCAL + ("# " + "x" * 1000 + "\n") * 1100, ["more than a config file may hold"]),
    "duplicate-cluster-key-later": (LOCAL + '\n[clusters.b]\nprovisioner = "local"\nmax = 1\nmax = 3\n',
                                    ["clusters.toml:8:", "not valid TOML"]),
    "second-cluster-unknown-provisioner": (LOCAL + '\n[clusters.b]\nmax = 1\nprovisioner = "ec9"\n',
                                           ["clusters.toml:7:", "[clusters.b]", "ec9"]),
    "retry-rule-bad-action": (LOCAL + '\n[retry]\nrules = [{ exit = 2, action = "maybe" }]\n',
                              ["[retry] rules[0] action", "maybe"]),
}
# Where the line is known, the message starts FILE:LINE: (the key's line, else its table's)
CONFIG_LINES = {
    "unknown-key": 4, "unknown-master-key": 2, "provisioner-unknown": 2, "provisioner-not-string": 2,
    "duplicate-key": 4, "duplicate-table": 4, "invalid-toml": 1, "price-string": 4, "max-zero": 3,
    "local-option-type": 4, "atu-parsecs": 4, "provisioner-missing": 1, "not-utf8": 4, "utf16": 1,
    "liveness-below-heartbeat": 3, "listen-not-endpoint": 2, "sampling-unknown-key": 2,
}
# Only the master's socket finds this one: checked on the command line, not by load_config.
UNBINDABLE = ('[master]\nlisten = "tcp://no-such-interface.invalid:5"\n' + LOCAL,
              ["[master]", "listen", "cannot bind"])
PROVISIONER_CHECKS = {  # the local provisioner's check_config, beyond the key kinds load_config checks
    "local-metadata-url-not-http": (LOCAL + 'metadata_url = "169.254.169.254"\n', ["[clusters.a]", "metadata_url", "http://"]),
    "local-notice-poll-zero": (LOCAL + 'metadata_url = "http://127.0.0.1:9"\nnotice_poll = 0\n', ["[clusters.a]", "notice_poll"]),
}
for _name, (_text, _fragments) in {**CONFIG_CASES, "listen-unbindable": UNBINDABLE, **PROVISIONER_CHECKS}.items():
    CASES[f"config-{_name}"] = Case({"bag.txt": GOOD_BAG, "clusters.toml": _text}, CONFIG_RUN, _fragments,
                                    starts=f"clusters.toml:{CONFIG_LINES[_name]}:" if _name in CONFIG_LINES
                                    else "clusters.toml")
CASES["config-missing"] = Case({"bag.txt": GOOD_BAG}, CONFIG_RUN, ["cannot read"], starts="clusters.toml:")
CASES["config-directory"] = Case({"bag.txt": GOOD_BAG, "clusters.toml": DIR}, CONFIG_RUN, ["cannot read"],
                                 starts="clusters.toml:")

FLAG_CASES = {
    # name: (arguments; fragments)
    "task-timeout-garbage": ([*BAG_RUN, "--task-timeout", "soon"], ["--task-timeout", "soon"]),
    "task-timeout-negative": ([*BAG_RUN, "--task-timeout", "-5"], ["--task-timeout"]),
    "task-timeout-unit": ([*BAG_RUN, "--task-timeout", "5 parsecs"], ["--task-timeout"]),
    "retries-negative": ([*BAG_RUN, "--retries", "-1"], ["--retries"]),
    "retries-not-int": ([*BAG_RUN, "--retries", "many"], ["--retries"]),
    "workers-zero": ([*BAG_RUN, "--workers", "0"], ["--workers"]),
    "workers-negative": ([*BAG_RUN, "--workers", "-2"], ["--workers"]),
    "workers-with-config": ([*CONFIG_RUN, "--workers", "2"], ["--workers"]),
    "seed-not-int": ([*BAG_RUN, "--seed", "x"], ["--seed"]),
    "unknown-flag": ([*BAG_RUN, "--budget", "5"], ["--budget"]),
    "no-bag": (["--workers", "1", "--state-dir", "run"], ["--bag"]),
    "empty-bag-name": (["--bag", "", "--state-dir", "run"], ["--bag"]),
    "bag-missing-value": (["--state-dir", "run", "--bag"], ["--bag"]),
    "results-bad-format": (["results", "--format", "xml"], ["--format", "xml"]),
    "resume-no-state-dir": (["--resume", "--state-dir", "run"], ["run"]),
    "shell-missing-here": ([*CONFIG_RUN], ["[master] shell", "/no/such/shell", "not found on this machine"]),
    "plan-only-with-schedule": ([*CONFIG_RUN, "--plan-only", "--schedule", "fastest"], ["--plan-only", "--schedule"]),
}
for _name, (_args, _fragments) in FLAG_CASES.items():
    _config = '[master]\nshell = "/no/such/shell"\n' + LOCAL if _name == "shell-missing-here" else LOCAL
    CASES[f"flag-{_name}"] = Case({"bag.txt": GOOD_BAG, "clusters.toml": _config}, _args, _fragments)
CASES["flag-resume-empty-state-dir"] = Case({"run": DIR}, ["--resume", "--state-dir", "run"], ["run"])
CASES["flag-state-dir-is-a-file"] = Case({"bag.txt": GOOD_BAG, "run": "not a dir"}, BAG_RUN, ["run"],
                                         kept={"run": "not a dir"})


def _run_case(root: Path, case: Case) -> subprocess.CompletedProcess[str]:
    root.mkdir()
    for name, content in case.files.items():
        if content is DIR:
            (root / name).mkdir()
        else:
            (root / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return cli(*case.args, cwd=root)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case's run, started all at once: one interpreter per case is most of this file's time."""
    base = tmp_path_factory.mktemp("cases")
    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1)) as pool:
        futures = {name: pool.submit(_run_case, base / name, case) for name, case in CASES.items()}
        return {name: (base / name, future.result()) for name, future in futures.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(outcomes, name):
    case = CASES[name]
    root, proc = outcomes[name]
    message = error_line(proc)
    assert message.startswith(case.starts), message
    assert_names(message, *case.fragments)
    for path, text in case.kept.items():
        assert (root / path).read_text() == text
    if not case.kept and name != "flag-resume-empty-state-dir":
        assert not (root / "run").exists()  # nothing half-started: fixing the input and rerunning works


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_bag_without_permission(tmp_path):
    bag = tmp_path / "bag.txt"
    bag.write_text(GOOD_BAG)
    bag.chmod(0)
    message = error_line(cli(*BAG_RUN, cwd=tmp_path))
    assert_names(message, "bag.txt:0:", "cannot read")


# ------------------------------------------------- a state dir with a finished run (one real run)

# A BOM, CRLF line endings, a comment, a blank line and no final newline: tasks are lines 1 and 4.
ODD_BAG = b"\xef\xbb\xbfecho one\r\n# comment\r\n\r\necho two"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A state dir holding a finished run of ODD_BAG, made by the real master and one local worker."""
    root = tmp_path_factory.mktemp("finished")
    (root / "odd.txt").write_bytes(ODD_BAG)
    (root / "other.txt").write_text("echo other\n")
    (root / "clusters.toml").write_text(LOCAL)
    proc = cli("--bag", "odd.txt", "--workers", "1", "--state-dir", "run", "-q", cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return root, exported(root)


def exported(root: Path) -> dict[int, dict]:
    proc = cli("results", "--state-dir", "run", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return {row["id"]: row for row in map(json.loads, proc.stdout.splitlines())}


def test_odd_bag_runs_the_right_commands(finished_run):
    root, rows = finished_run
    assert sorted(rows) == [1, 4]
    assert (rows[1]["command"], rows[1]["stdout"], rows[1]["status"]) == ("echo one", "one\n", "done")
    assert (rows[4]["command"], rows[4]["stdout"], rows[4]["status"]) == ("echo two", "two\n", "done")
    # the run's copy of the bag hashes like the original, so --resume --bag ORIGINAL is accepted
    assert load_bag(root / "run" / "bag.txt").sha256 == load_bag(root / "odd.txt").sha256


RESUME_CASES = {
    # name: (arguments; fragments)
    "new-run-in-used-dir": (["--bag", "odd.txt", "--workers", "1"], ["run", "--resume"]),
    "other-bag": (["--resume", "--bag", "other.txt"], ["other.txt", "differs"]),
    "missing-other-bag": (["--resume", "--bag", "gone.txt"], ["gone.txt:0:"]),
    # the same bag passes the comparison and then fails on --config
    "same-bag-new-config": (["--resume", "--bag", "odd.txt", "--config", "clusters.toml"], ["--config"]),
    "resume-negative-retries": (["--resume", "--retries", "-3"], ["--retries"]),
    "resume-workers-zero": (["--resume", "--workers", "0"], ["--workers"]),
    "resume-bad-timeout": (["--resume", "--task-timeout", "later"], ["--task-timeout"]),
}


@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_bad_resume(finished_run, case):
    args, fragments = RESUME_CASES[case]
    root, before = finished_run
    message = error_line(cli(*args, "--state-dir", "run", cwd=root))
    assert_names(message, *fragments)
    if case == "same-bag-new-config":
        assert "differs" not in message
    assert exported(root) == before  # the earlier run's results are all still there


# ------------------------------------------------------------------------------- parse_duration

@pytest.mark.parametrize("text, seconds", [
    (0, 0.0), (90, 90.0), (1.5, 1.5), ("90", 90.0), ("90s", 90.0), ("60m", 3600.0), ("1h", 3600.0),
    ("1.5h", 5400.0), ("2d", 172800.0), (".5m", 30.0), ("5.", 5.0), (" 10 s ", 10.0), ("0s", 0.0),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("value", [
    "", "  ", "soon", "5 parsecs", "1h30m", "-5", "-5s", "5S", "1e3", "inf", "nan", "h", "1.2.3s", "0x10",
    -1, -0.5, True, False, None, [], {}, math.inf, -math.inf, math.nan, 10**400, "1" * 400 + "d",
])
def test_parse_duration_rejects(value):
    with pytest.raises(ValueError) as info:
        parse_duration(value)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------- load_bag

def test_load_bag_ids_are_line_numbers(tmp_path):
    path = tmp_path / "bag.txt"
    path.write_bytes(b"# header\necho 1\n\n  \t\n   # indented comment\n  echo 2  \necho '#3'\n\n")
    bag = load_bag(path)
    assert list(bag.task_ids) == [2, 6, 7]
    assert len(bag) == 3
    assert [bag.command(i) for i in bag.task_ids] == ["echo 1", "echo 2", "echo '#3'"]


def test_load_bag_crlf_bom_and_no_final_newline(tmp_path):
    path = tmp_path / "bag.txt"
    path.write_bytes(ODD_BAG)
    bag = load_bag(path)
    assert list(bag.task_ids) == [1, 4]
    assert [bag.command(i) for i in bag.task_ids] == ["echo one", "echo two"]


def test_load_bag_single_line_without_newline(tmp_path):
    path = tmp_path / "bag.txt"
    path.write_bytes(b"true")
    bag = load_bag(path)
    assert list(bag.task_ids) == [1] and bag.command(1) == "true"


def test_load_bag_hash_ignores_final_newline_and_bom(tmp_path):
    hashes = set()
    for i, data in enumerate([b"a\nb\n", b"a\nb", b"\xef\xbb\xbfa\nb\n", b"\xef\xbb\xbfa\nb"]):
        path = tmp_path / f"bag{i}.txt"
        path.write_bytes(data)
        hashes.add(load_bag(path).sha256)
    assert len(hashes) == 1
    (tmp_path / "other.txt").write_bytes(b"a\nb\n\n")
    assert load_bag(tmp_path / "other.txt").sha256 not in hashes


def test_load_bag_line_at_the_limit_is_fine(tmp_path):
    path = tmp_path / "bag.txt"
    path.write_bytes(b"echo a\n" + b"#" * MAX_LINE_BYTES + b"\n")
    assert list(load_bag(path).task_ids) == [1]
    path.write_bytes(b"echo a\n" + b"#" * (MAX_LINE_BYTES + 1) + b"\n")
    with pytest.raises(BagError, match=r"bag\.txt:2:"):
        load_bag(path)


def test_load_bag_utf8_commands(tmp_path):
    path = tmp_path / "bag.txt"
    path.write_text("echo café\necho 日本\n", encoding="utf-8")
    bag = load_bag(path)
    assert bag.command(1) == "echo café" and bag.command(2) == "echo 日本"


# ----------------------------------------------------------------------------------- load_config

def _options(name: str) -> dict:
    if name != "local":
        raise KeyError(f"unknown provisioner {name!r}")
    return {"slowdown": ("float", 1.0), "startup": ("duration", 0.0)}


def test_load_config_reads_a_good_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[master]\nheartbeat = "1s"\nliveness = "5s"\n'
                    '[clusters.fast]\nprovisioner = "local"\nmax = 3\nprice = 2\natu = "60m"\nslowdown = 2\n'
                    '[clusters.slow]\nprovisioner = "local"\nmax = 1\n')
    config = load_config(path, _options)
    assert (config.master.heartbeat_s, config.master.liveness_s) == (1.0, 5.0)
    fast, slow = config.clusters["fast"], config.clusters["slow"]
    assert (fast.max, fast.price, fast.atu_s, fast.options) == (3, 2.0, 3600.0, {"slowdown": 2.0, "startup": 0.0})
    assert (slow.max, slow.price, slow.atu_s, slow.options) == (1, 0.0, 3600.0, {"slowdown": 1.0, "startup": 0.0})
    assert config.source == str(path)


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_load_config_error_is_one_line_naming_the_file(tmp_path, case):
    text, fragments = CONFIG_CASES[case]
    path = tmp_path / "clusters.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as info:
        load_config(path, _options)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert_names(message, *fragments)


def test_min_charge_is_a_duration_per_cluster(tmp_path):
    from bats import provisioners
    from bats.common.config import ConfigError, load_config

    good = tmp_path / "good.toml"
    good.write_text('[clusters.ec2]\nprovisioner = "local"\nmax = 2\natu = "1s"\nmin_charge = "1m"\nprice = 0.0001\n')
    assert load_config(good, provisioners.options_of).clusters["ec2"].min_charge_s == 60.0
    bad = tmp_path / "bad.toml"
    bad.write_text('[clusters.ec2]\nprovisioner = "local"\nmax = 2\nmin_charge = "soon"\n')
    with pytest.raises(ConfigError, match=r"\[clusters.ec2\] min_charge"):
        load_config(bad, provisioners.options_of)


def test_initial_workers_per_cluster_overrides_the_sampling_default(tmp_path):
    from bats import provisioners

    good = tmp_path / "good.toml"
    good.write_text('[sampling]\ninitial_workers = 5\n[clusters.dear]\nprovisioner = "local"\nmax = 9\n'
                    'initial_workers = 2\n[clusters.cheap]\nprovisioner = "local"\nmax = 9\n')
    config = load_config(good, provisioners.options_of)
    assert config.clusters["dear"].initial_workers == 2 and config.clusters["cheap"].initial_workers is None
    assert config.sampling.initial_workers == 5
    bad = tmp_path / "bad.toml"
    bad.write_text('[clusters.dear]\nprovisioner = "local"\nmax = 9\ninitial_workers = 0\n')
    with pytest.raises(ConfigError, match=r"bad.toml.*\[clusters.dear\] initial_workers: must be at least 1"):
        load_config(bad, provisioners.options_of)


def test_load_config_accepts_a_byte_order_mark(tmp_path):
    path = tmp_path / "clusters.toml"
    path.write_bytes(b"\xef\xbb\xbf" + LOCAL.encode())
    assert load_config(path, lambda name: {}).clusters["a"].max == 1


# ------------------------------------------------------------------- fuzzing the two loaders

_PIECES = st.sampled_from([b"echo a", b"\n", b"\r\n", b"\r", b"\0", b"#", b"\xef\xbb\xbf", b"\xff\xfe", b"\xe9",
                           b"[clusters.a]", b'provisioner = "local"', b"max = 1", b"max = 2", b"price = ",
                           b'"', b"=", b"[master]", b"x" * 70_000, "é".encode(), b"\t"])
_FILES = st.one_of(st.binary(max_size=512), st.lists(_PIECES, max_size=24).map(b"".join))


def _one_line(message: str, name: str) -> None:
    assert "\n" not in message and "\r" not in message.replace("\\r", "")
    assert message.startswith(name), message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_FILES)
def test_fuzz_bag_loader_either_loads_or_says_where_in_one_line(tmp_path, data):
    path = tmp_path / "bag.txt"
    path.write_bytes(data)
    try:
        bag = load_bag(path)
    except BagError as exc:
        _one_line(str(exc), str(path))
        return
    assert len(bag) > 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_FILES)
def test_fuzz_config_loader_either_loads_or_says_where_in_one_line(tmp_path, data):
    from bats import provisioners

    path = tmp_path / "clusters.toml"
    path.write_bytes(data)
    try:
        config = load_config(path, provisioners.options_of)
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith(str(path)), message
        return
    assert config.clusters


@pytest.mark.parametrize("schedule", ["foo", "$-5", "0", "budget:0", "budget:x", "$"])
def test_a_schedule_that_cannot_be_right_is_refused_before_anything_starts(tmp_path, schedule):
    from helpers.configs import CONFIG
    from helpers.runs import MASTER

    (tmp_path / "clusters.toml").write_text(CONFIG)
    (tmp_path / "tasks.txt").write_text("true\n")
    run = subprocess.run([*MASTER, "--bag", "tasks.txt", "--config", "clusters.toml", "--schedule", schedule],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--schedule" in run.stderr, run.stderr
    assert not (tmp_path / "bats-run").exists()  # nothing sampled, nothing paid


@pytest.mark.parametrize("schedule", ["999", "$1", "budget:0.0001"])
def test_bats_sim_with_a_schedule_no_option_fits_says_so_in_one_line(tmp_path, schedule):
    from helpers.configs import CONFIG

    (tmp_path / "clusters.toml").write_text(CONFIG)
    run = subprocess.run([sys.executable, "-m", "bats.master.sim", "--config", "clusters.toml", "--tasks", "100",
                          "--runtimes", "normal:10s,1s", "--seed", "1", "--schedule", schedule],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"INCOMPLETE: --schedule {schedule}: " in run.stdout + run.stderr
