"""The end-game on the real master: local workers emulating a fast cloud (one machine) and a slow
one (three machines, six times slower), both billed by ATUs of 16 s. The bag outlasts the fast
machine's paid time after sampling, so the fastest option keeps it (1 fast, 3 slow: with an ATU of
an hour it would work the rest of the bag in the hour it paid for sampling whatever the option,
and the options leave it out). When the bag runs dry the slow machines still run tasks that the
fast machine, idle in an ATU already paid, can end sooner: it runs a copy, the copy's result
counts, the slow machine's attempt is stopped over ZeroMQ (``cancel``), and every task is recorded
once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.runs import MASTER, results

TASKS = 60

# the slow cluster samples on its three machines (its 7 replicated tasks in 3 rounds of 3 s), so
# sampling ends about 11 s in, well inside the fast machine's first ATU; the 33 or so tasks left
# take about 12 s on 1 fast + 3 slow and about 25 s on the slow machines after the fast one's edge
CLOUDS = """
[sampling]
initial_workers = 1

[clusters.fast]
provisioner = "local"
max = 1
price = 9.0
atu = "16s"

[clusters.slow]
provisioner = "local"
max = 3
initial_workers = 3
price = 1.0
atu = "16s"
slowdown = 6.0
"""


def test_an_idle_fast_machine_runs_a_copy_of_a_slow_machines_task_and_the_copy_wins(tmp_path: Path):
    (tmp_path / "clouds.toml").write_text(CLOUDS)
    (tmp_path / "tasks.txt").write_text("sleep 0.5\n" * TASKS)
    proc = subprocess.run([*MASTER, "--quiet", "--bag", "tasks.txt", "--config", "clouds.toml", "--schedule",
                           "fastest", "--cushion", "yes", "--seed", "1"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    report = json.loads((tmp_path / "bats-run" / "report.json").read_text())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert report["status"] == "done"
    assert report["selected"]["machines"] == {"fast": 1, "slow": 3}
    endgame = report["endgame"]
    assert endgame["copies_won"] >= 1, endgame
    assert 0 < endgame["copy_paid_s"]
    assert sorted(r["id"] for r in results(tmp_path / "bats-run")) == list(range(1, TASKS + 1))
    assert report["cost"]["execution"] <= report["budget"] + report["cushion"] + 1e-9
