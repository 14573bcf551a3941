"""``bats-sim --replay``: a real run of the master (real local workers, a spot price that moves, a
worker killed), replayed from its events log on a fresh core, takes every decision again; a log
whose recorded answer was changed is caught at that event."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import msgpack
import psutil
from helpers.configs import CONFIG
from helpers.runs import MASTER, kill_all, wait_for, workers_of

from bats.master.cli.sim import main as sim_main
from bats.master.core import events as ev
from bats.master.state.events import EVENTS_NAME, read

# the fast cluster is a spot market whose price falls while the cheapest plan runs: a re-plan to more machines
SPOT = CONFIG.replace('[clusters.fast]\nprovisioner = "local"\n', '[clusters.fast]\nprovisioner = "local"\n'
                      'market = "spot"\nprice_trace = "trace.csv"\n')
TRACE = "0s, 2.0\n10s, 0.2\n16s, 0.1\n"


def plan(state: Path) -> dict | None:
    """The chosen plan as the journal holds it (its ``machines`` per cluster), once there is one."""
    try:
        with sqlite3.connect(f"file:{state / 'journal.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'plan'").fetchone()
    except sqlite3.Error:
        return None
    return json.loads(row[0]) if row else None


def kept_worker(master_pid: int, chosen: dict) -> tuple[psutil.Process, str] | None:
    """A worker of a machine the plan keeps, and its machine: the sampling machines of a cluster the
    plan leaves out are released at the end of their ATU, about when the kill comes, and one killed
    while it leaves is no loss."""
    for proc in workers_of(master_pid):
        with contextlib.suppress(psutil.Error, ValueError, IndexError):
            argv = proc.cmdline()
            if chosen["machines"].get(argv[argv.index("--cluster") + 1], 0) > 0:
                return proc, argv[argv.index("--machine") + 1]
    return None


def test_a_real_run_with_a_replan_and_a_lost_machine_replays_exactly(tmp_path, capsys):
    assert SPOT != CONFIG
    (tmp_path / "clusters.toml").write_text(SPOT)
    (tmp_path / "trace.csv").write_text(TRACE)
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"sleep 0.4; echo {i}\n" for i in range(1, 161)))
    state = tmp_path / "run"
    with (tmp_path / "master.err").open("w") as err:
        master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", "clusters.toml", "--state-dir",
                                   str(state), "--schedule", "cheapest", "--cushion", "yes", "--seed", "3"],
                                  cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
    try:
        chosen = wait_for(lambda: master.poll() is not None or plan(state), 60, "the plan")
        assert isinstance(chosen, dict), (tmp_path / "master.err").read_text()[-2000:]
        time.sleep(1.0)  # into the execution
        found = wait_for(lambda: master.poll() is not None or kept_worker(master.pid, chosen), 10,
                         "a worker of a machine the plan keeps")
        assert isinstance(found, tuple), (tmp_path / "master.err").read_text()[-2000:]
        victim, machine = found
        kill_all([victim])  # one machine's worker dies: the machine is lost
        master.wait(timeout=180)
    finally:
        if master.poll() is None:
            master.kill()
    report = json.loads((state / "report.json").read_text())
    records = list(read(state / EVENTS_NAME))
    fed = [payload[0] for _i, kind, payload in records if kind == "event"]
    answers = [a for _i, kind, payload in records if kind == "event" for a in payload[1]]
    lost = [e.machine for e in fed if isinstance(e, ev.MachineLost)]
    assert machine in lost, ((machine, lost), (tmp_path / "master.err").read_text()[-2000:])
    assert report["tasks"]["done"] == 160, report["tasks"]  # what it held ran again elsewhere
    assert report["reconfigurations"], report.get("reason")
    assert any(getattr(a, "message", "").startswith("re-planned") for a in answers)
    assert any(isinstance(e, ev.ScheduleChosen) for e in fed) and any(isinstance(e, ev.PriceChanged) for e in fed)

    shutil.copy(tmp_path / "trace.csv", state / "trace.csv")  # the config copy names it, as it named the original
    assert sim_main(["--replay", str(state)]) == 0
    assert capsys.readouterr().out.startswith(f"session 1: {len(fed)} events, the same actions")

    # a log that says the core answered otherwise at one event is caught there, and the replay says where
    copy = tmp_path / "changed"
    copy.mkdir()
    for name in ("bag.txt", "config.toml"):
        shutil.copy(state / name, copy / name)
    shutil.copy(tmp_path / "trace.csv", copy / "trace.csv")
    raw = list(msgpack.Unpacker(open(state / EVENTS_NAME, "rb"), raw=False, strict_map_key=False))
    at = next(k for k, r in enumerate(raw) if r[0] == "event" and any(a[0] == "Dispatch" for a in r[2]))
    dispatch = next(a for a in raw[at][2] if a[0] == "Dispatch")
    dispatch[2] += 1_000_000  # another task
    with open(copy / EVENTS_NAME, "wb") as f:
        for record in raw:
            f.write(msgpack.packb(record, use_bin_type=True))
    assert sim_main(["--replay", str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"session 1, event {at - 1}:" in out and str(dispatch[2]) in out
