"""``bats-master --dry-run``: spends nothing and starts nothing, shows what would be sampled and, from
a runtime guess or an earlier run of the same bag, the options the real core would offer."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import psutil
from helpers.configs import CONFIG
from helpers.runs import MASTER, write_bag


def _master(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MASTER, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _setup(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(CONFIG)
    write_bag(tmp_path / "tasks.txt", ["sleep 0.2"] * 60)


def _option_rows(text: str) -> dict[int, list[str]]:
    return {int(line.split()[0]): line.split() for line in text.splitlines() if line[:3].strip().isdigit()}


def test_a_guess_shows_the_sampling_and_the_options_and_starts_nothing(tmp_path: Path):
    _setup(tmp_path)
    proc = subprocess.Popen([*MASTER, "--dry-run", "--bag", "tasks.txt", "--config", "c.toml", "--guess-runtime",
                             "0.2s", "--schedule", "cheapest"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    children = set()
    while proc.poll() is None:  # no worker (no child process at all) is ever started
        try:
            children.update(child.pid for child in psutil.Process(proc.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.01)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert not children
    assert not (tmp_path / "bats-run").exists()  # nothing written
    assert out.startswith("dry run: nothing is started and nothing is paid for\n")
    assert "sampling n_s = 21 task(s) of 60" in out
    # the config's clusters: 2 sampling machines each, at 1 and 2 per 4 s ATU
    assert "  slow             2          1    4.0s  2.00" in out
    assert "  fast             2          2    4.0s  4.00" in out
    assert "sampling costs at least 6.00" in out
    assert "runtimes guessed (--guess-runtime): slow 0.6s, fast 0.2s" in out  # slow has slowdown 3
    assert "options for the 39 task(s) left" in out
    rows = _option_rows(out)
    assert any("cheapest" in row[1] for row in rows.values()) and any("fastest" in " ".join(row) for row in rows.values())
    (cheapest,) = [i for i, row in rows.items() if "cheapest" in row[1]]
    assert f"--schedule cheapest would run option {cheapest}" in out


def test_an_earlier_run_of_the_same_bag_gives_the_runtimes_and_is_left_as_it_was(tmp_path: Path):
    _setup(tmp_path)
    first = _master(tmp_path, "--quiet", "--bag", "tasks.txt", "--config", "c.toml", "--plan-only")
    assert first.returncode == 0, first.stderr
    journal = tmp_path / "bats-run" / "journal.sqlite"
    before = hashlib.sha256(journal.read_bytes()).hexdigest()
    proc = _master(tmp_path, "--dry-run", "--bag", "tasks.txt", "--config", "c.toml")
    assert proc.returncode == 0, proc.stderr
    assert "runtimes measured by the run in bats-run: slow" in proc.stdout and "from its sample" in proc.stdout
    assert _option_rows(proc.stdout)
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == before
    # another bag: that run's runtimes are not used
    write_bag(tmp_path / "other.txt", ["sleep 0.3"] * 10)
    other = _master(tmp_path, "--dry-run", "--bag", "other.txt", "--config", "c.toml")
    assert other.returncode == 0, other.stderr
    assert "its run is of another bag" in other.stdout and not _option_rows(other.stdout)
    # a guess for one cluster, the other from the earlier run
    mixed = _master(tmp_path, "--dry-run", "--bag", "tasks.txt", "--config", "c.toml", "--guess-runtime", "fast=1s")
    assert "runtimes guessed (--guess-runtime): fast 1.0s" in mixed.stdout
    assert "runtimes measured by the run in bats-run: slow" in mixed.stdout


def test_free_clusters_say_the_bag_runs_on_every_machine(tmp_path: Path):
    write_bag(tmp_path / "tasks.txt", ["true"] * 3)
    proc = _master(tmp_path, "--dry-run", "--bag", "tasks.txt", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "policy self (every cluster is free): the bag would run on every machine (2 x local)" in proc.stdout


def test_bad_dry_runs_are_one_line_exit_2(tmp_path: Path):
    _setup(tmp_path)
    cases = {
        ("--bag", "tasks.txt", "--guess-runtime", "3s"): "--guess-runtime goes with --dry-run",
        ("--dry-run", "--bag", "tasks.txt", "--config", "c.toml", "--guess-runtime", "medium=3s"):
            "--guess-runtime medium=3s: no cluster 'medium' in c.toml (clusters: slow, fast)",
        ("--dry-run", "--bag", "tasks.txt", "--config", "c.toml", "--guess-runtime", "soon"): "--guess-runtime soon: ",
        ("--dry-run", "--resume"): "--dry-run shows what a new run would do",
        ("--dry-run",): "--dry-run needs --bag FILE",
    }
    for args, message in cases.items():
        proc = _master(tmp_path, *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, (args, proc.stderr)


def test_a_budget_pick_pays_the_sampling_it_shows_first(tmp_path: Path):
    """--budget pays for the sampling (implicit sampling): the dry run's pick is the simulated run's,
    made with what the sampling leaves, and a budget the sampling eats is said to end incomplete."""
    example = Path(__file__).resolve().parents[2] / "examples" / "local-clouds.toml"
    write_bag(tmp_path / "tasks.txt", ["sleep 1"] * 100)
    proc = _master(tmp_path, "--dry-run", "--bag", "tasks.txt", "--config", str(example), "--guess-runtime", "1s",
                   "--budget", "30")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "sampling costs at least 12.00" in out
    # two machines per cluster run the 24 sampled tasks (7 on every cluster): 2 ATUs each
    assert "sampling costs about 24.00 with these runtimes" in out
    # billed every 10 s, what sampling spends to measure is bounded: the six machines' first ATU (12),
    # then the more of their money while each cluster runs its share of the sample (7 + 17 / 3 tasks
    # on 2 machines: 7 rounds of slow's 4 s, $0.12 a second for all six: 33.6) and the cheapest
    # execution of the bag (100 tasks at 4 s on slow, $0.05 a second: 20), and the ATU each machine
    # is in when the sample closes (12)
    assert ("sampling spends at most 57.60 to measure (an upper bound: its machines' boots and first charges, then "
            "the more of what they spend while the sample runs at these runtimes, 33.60, and 1 x the cheapest "
            "execution of the bag, 20.00") in out
    assert "--budget 30 would pay about 24 for the sampling; the 6 left pays for no configuration" in out
    assert "simulated: the run ends INCOMPLETE, 20 of 100 task(s) not run (30 spent)" in out
    enough = next(line for line in out.splitlines() if "would end the bag" in line)
    amount = float(enough.split("a budget of ")[1].split()[0])
    proc = _master(tmp_path, "--dry-run", "--bag", "tasks.txt", "--config", str(example), "--guess-runtime", "1s",
                   "--budget", f"{amount:g}")
    assert "simulated: the bag ends in about" in proc.stdout, proc.stdout
    assert f"--budget {amount:g} would pay about 24 for the sampling, then run" in proc.stdout
