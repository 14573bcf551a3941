"""Fault injection with real processes: run a real ``bats-master`` with real workers, hurt it, and
audit the run afterwards from its journal and report.

How this works. :class:`MasterRun` starts ``python -m bats.master.cli`` in a directory of its own
(a bag, a clusters config) and gives the test handles on it and its workers (psutil). Each
scenario of ``SCENARIOS`` does one kind of harm while the bag runs: ``kill -9`` of random workers,
``kill -9`` of the master at random points followed by ``--resume``, SIGSTOP/SIGCONT of a worker,
a worker's network cut past the liveness limit (through :class:`helpers.netproxy.TcpProxy`), a
provisioner that fails half its calls (the shipped ``flaky`` provisioner), and a spot interruption
notice (from the shipped :class:`bats.worker.spot_testing.MetadataStandIn`). :func:`audit` then
reads the journal (``journal.sqlite``, read only) and ``report.json`` and counts what must be
zero: tasks without a result, tasks with more than one result row, and money: the report's
cost must equal the machines' recorded ATUs times their cluster's price, and a run with a budget
must not spend more than budget plus the accepted cushion.

``tests/e2e/test_faults.py`` runs every scenario once (part of ``make test``); ``bench/reliability.py``
runs them many times and writes ``docs/reliability.md``. Every address is on 127.0.0.1.

The workers are local unless the scenario's name ends in ``(ssh)`` or ``(sge)`` (:func:`on`): then
they are started over ssh or run as Grid Engine jobs, with real daemons (``tests/helpers/backends.py``).
"""

from __future__ import annotations

import json
import random
import re
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from helpers import backends
from helpers.backends import LOCAL, Backend
from helpers.runs import MASTER, wait_for

PRICE = 0.01
ATU = "2s"  # short ATUs: every second of uptime shows in the cost


@dataclass
class Audit:
    tasks: int
    lost: int  # tasks of the bag with no result row
    double: int  # result rows beyond the first for a task
    cost: float  # the report's total
    atu_cost: float  # sum over machines of ATUs x price
    overrun: float  # money spent beyond budget + accepted cushion (0 without a budget)
    machines: int
    status: str

    @property
    def cost_matches(self) -> bool:
        return abs(self.cost - self.atu_cost) <= 1e-9 * max(1.0, self.cost)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.double == 0 and self.cost_matches and self.overrun <= 1e-9


def audit(state_dir: Path, price: float = PRICE) -> Audit:
    """What a run left behind, counted from its journal and report (see the module docstring)."""
    report = json.loads((state_dir / "report.json").read_text())
    conn = sqlite3.connect(f"file:{state_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT task_id, COUNT(*) FROM results GROUP BY task_id").fetchall()
        machines = conn.execute("SELECT atus, cost FROM machines").fetchall()
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()
    total = json.loads(meta["tasks"])
    per_task = dict(rows)
    lost = sum(1 for task in range(1, total + 1) if task not in per_task)
    double = sum(count - 1 for count in per_task.values() if count > 1)
    atu_cost = sum(atus * price for atus, _cost in machines)
    plan = json.loads(meta["plan"]) if "plan" in meta else None
    overrun = 0.0
    if plan is not None:
        ceiling = plan["budget"] + (plan["cushion"] if plan["cushion_accepted"] else 0.0)
        overrun = max(0.0, report["cost"]["total"] - ceiling)
    return Audit(total, lost, double, report["cost"]["total"], atu_cost, overrun, len(machines), report["status"])


def write_config(path: Path, workers: int = 2, provisioner: str = "local", master: str = "",
                 extra: str = "", backend: Backend = LOCAL) -> Path:
    """The clusters config: one cluster, on ``backend`` (its table and [master] lines) unless local."""
    provisioner = f'provisioner = "{provisioner}"\n' if backend.local else ""
    path.write_text(f"[master]\n{master}\n{backend.master}\n[clusters.{backend.cluster}]\n{provisioner}{backend.keys}"
                    f"max = {workers}\nprice = {PRICE}\natu = \"{ATU}\"\n{extra}")
    return path


@dataclass
class MasterRun:
    """One master process and its directory."""

    root: Path
    n_tasks: int = 40
    task: str = "sleep 0.1"
    config_master: str = 'heartbeat = "0.25s"\nliveness = "1.5s"\n'
    provisioner: str = "local"
    config_extra: str = ""
    workers: int = 2
    policy: tuple[str, ...] = ("--policy", "self")
    backend: Backend = LOCAL  # where the cluster runs (tests/helpers/backends.py)
    proc: subprocess.Popen | None = None
    logs: list[str] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.root / "run"

    @property
    def marks(self) -> Path:
        return self.root / "ran"

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "bag.txt").write_text("".join(f"echo {i} >> {self.marks}; {self.task}; echo out-{i}\n"
                                                   for i in range(1, self.n_tasks + 1)))
        write_config(self.root / "clusters.toml", self.workers, self.provisioner, self.config_master,
                     self.config_extra, self.backend)

    def start(self, resume: bool = False, extra: tuple[str, ...] = ()) -> subprocess.Popen:
        # the scenarios lose machines on purpose: a task that happened to run on two of them is no
        # poison task, so the quarantine (--max-machine-losses, default 2) is set out of reach
        args = ["--resume"] if resume else ["--bag", "bag.txt", "--config", "clusters.toml", *self.policy,
                                            "--max-machine-losses", "1000"]
        log = open(self.root / f"master-{len(self.logs) + 1}.log", "w")
        self.logs.append(log.name)
        self.proc = subprocess.Popen([*MASTER, "--quiet", *args, "--state-dir", "run", *extra], cwd=self.root,
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        return self.proc

    def wait(self, timeout: float = 120) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def workers_now(self) -> list[psutil.Process]:
        if not self.backend.local:  # not the master's children: found by their cluster's name
            return self.backend.workers()
        if self.proc is None:
            return []
        found = []
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        for child in children:
            try:
                if "bats.worker" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                    found.append(child)
            except psutil.Error:
                pass
        return found

    def wait_started(self, n: int, timeout: float = 60) -> None:
        """Wait until ``n`` tasks have started; fail at once, with the master's output, if it exited."""
        def ready() -> bool:
            if self.started_tasks() >= n:
                return True
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the master exited ({self.proc.returncode}) before {n} tasks started: "
                                     + self.output()[-500:])
            return False

        wait_for(ready, timeout, f"{n} tasks to start")

    def started_tasks(self) -> int:
        return len(self.marks.read_text().split()) if self.marks.exists() else 0

    def output(self) -> str:
        return "".join(Path(name).read_text(errors="replace") for name in self.logs)


def journal_machine_states(state_dir: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{state_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT machine_id, state FROM machines").fetchall())
    except sqlite3.Error:
        return {}
    finally:
        conn.close()


# ------------------------------------------------------------------ scenarios
def kill_workers(root: Path, rng: random.Random, policy: tuple[str, ...] = ("--policy", "self"),
                 backend: Backend = LOCAL, kill: Callable[[psutil.Process], None] | None = None) -> Audit:
    """``kill -9`` of a random worker, twice, at random points of the bag."""
    run = MasterRun(root, policy=policy, backend=backend)
    run.prepare()
    run.start()
    try:
        for share in sorted(rng.uniform(0.1, 0.7) for _ in range(2)):
            run.wait_started(int(share * run.n_tasks))
            for _attempt in range(20):
                victim = rng.choice(wait_for(run.workers_now, 30, "workers"))
                try:
                    if kill is not None:
                        kill(victim)
                    else:
                        victim.send_signal(signal.SIGKILL)
                    break
                except (psutil.NoSuchProcess, subprocess.CalledProcessError):
                    continue  # it left between the listing and the kill (a worker let go): another one
            else:
                raise AssertionError("no worker could be killed: each left before its kill, 20 times")
        assert run.wait() == 0, run.output()
    finally:
        run.kill()
    result = audit(run.state)
    assert result.machines >= 3, result  # the killed ones were replaced
    return result


def kill_master(root: Path, rng: random.Random, backend: Backend = LOCAL) -> Audit:
    """``kill -9`` of the master at a random point, twice, each followed by ``--resume``."""
    run = MasterRun(root, n_tasks=60, task="sleep 0.05", backend=backend)
    run.prepare()
    run.start()
    orphans: list[psutil.Process] = []  # remote workers outlive the master: the resumed one stops them
    try:
        for _ in range(2):
            start = run.started_tasks()
            target = start + rng.randint(3, 15)
            wait_for(lambda t=target: run.started_tasks() >= t or (run.proc and run.proc.poll() is not None), 60,
                     "progress")
            if run.proc is not None and run.proc.poll() is None:
                workers = run.workers_now()
                run.proc.send_signal(signal.SIGKILL)
                run.proc.wait()
                if not backend.local:
                    orphans += [w for w in workers if w not in orphans]
                    workers = []
                for worker in workers:  # they leave with their parent (--exit-with-parent)
                    try:
                        worker.wait(timeout=15)
                    except psutil.TimeoutExpired:
                        worker.kill()
            run.start(resume=True)
        assert run.wait() == 0, run.output()
        assert all(not w.is_running() or w.status() == psutil.STATUS_ZOMBIE for w in orphans), \
            f"workers of a killed master still run after --resume: {orphans}"
    finally:
        run.kill()
    return audit(run.state)


def pause_worker(root: Path, rng: random.Random, backend: Backend = LOCAL) -> Audit:
    """SIGSTOP of a worker past the liveness limit, then SIGCONT after the master gave up on it;
    its provisioner's release takes effect late, so the woken worker does send its stale result."""
    run = MasterRun(root, n_tasks=30, task="sleep 0.3", provisioner="flaky", backend=backend,
                    config_extra='fail_rate = 0\nrelease_delay = "5s"\n' if backend.local else "")
    run.prepare()
    run.start()
    try:
        run.wait_started(rng.randint(2, 8))
        victim = wait_for(run.workers_now, 30, "workers")[0]
        machine = victim.cmdline()[victim.cmdline().index("--machine") + 1]
        victim.suspend()
        wait_for(lambda: journal_machine_states(run.state).get(machine) == "gone", 60, "the master to give up")
        victim.resume()
        assert run.wait() == 0, run.output()
        if backend.local:  # the woken worker did talk, and was not heard
            assert "before hello" in run.output(), run.output()
    finally:
        run.kill()
    return audit(run.state)


def cut_network(root: Path, rng: random.Random) -> Audit:
    """Every worker connects through a TCP proxy; one connection is cut past the liveness limit."""
    import socket as _socket

    from helpers.netproxy import TcpProxy

    with _socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proxy = TcpProxy(("127.0.0.1", port))
    proxy.start()
    run = MasterRun(root, n_tasks=30, task="sleep 0.2",
                    config_master=f'heartbeat = "0.25s"\nliveness = "1.5s"\nlisten = "tcp://127.0.0.1:{port}"\n'
                                  f'advertise = "tcp://127.0.0.1:{proxy.port}"\n')
    run.prepare()
    run.start()
    try:
        run.wait_started(rng.randint(2, 8))
        wait_for(lambda: len(proxy.connections) >= 2, 30, "the workers' connections through the proxy")
        proxy.refusing.set()  # the cut worker's reconnects fail too, until the master gives up on it
        proxy.cut(rng.choice(list(proxy.connections)))  # silently: no FIN, no RST, bytes just stop
        wait_for(lambda: any(state == "gone" for state in journal_machine_states(run.state).values()), 60,
                 "the master to declare the cut worker lost")
        proxy.refusing.clear()
        assert run.wait() == 0, run.output()
        assert "declared lost" in run.output()
    finally:
        run.kill()
        proxy.stop()
    return audit(run.state)


def flaky_provisioner(root: Path, rng: random.Random) -> Audit:
    """A provisioner that fails half its calls, some by hanging past the master's timeout."""
    run = MasterRun(root, n_tasks=30, task="sleep 0.1", provisioner="flaky",
                    config_extra=f'fail_rate = 0.5\nhang = "1.5s"\ncall_timeout = "1s"\nseed = {rng.randint(0, 10**6)}\n')
    run.prepare()
    run.start(extra=("-v",))
    try:
        code = run.wait(timeout=180)
        for _ in range(3):  # every attempt of an acquisition failed: the operator resumes, as told
            if code == 0:
                break
            assert code == 1 and "acquiring" in run.output(), run.output()
            run.start(resume=True, extra=("-v",))
            code = run.wait(timeout=180)
        assert code == 0, run.output()
        assert "injected" in run.output()
    finally:
        run.kill()
    return audit(run.state)


def late_acquisitions(root: Path, rng: random.Random) -> Audit:
    """Beside a local cluster, a ``flaky`` one whose acquisitions start their machine but answer
    past the master's timeout (``acquire_delay``): every late machine is charged from when it was
    asked for, journaled and released, and no acquisition is left open in the journal."""
    delay = rng.uniform(1.0, 2.5)
    slow = ('\n[clusters.slow]\nprovisioner = "flaky"\nmax = 1\nprice = 0.01\natu = "2s"\nfail_rate = 0\n'
            f'acquire_delay = "{delay:.2f}s"\ncall_timeout = "0.5s"\n')
    run = MasterRun(root, n_tasks=30, task="sleep 0.2", config_extra=slow)
    run.prepare()
    run.start(extra=("-v",))
    try:
        assert run.wait(timeout=120) == 0, run.output()
    finally:
        run.kill()
    assert "came after they were given up on; releasing them" in run.output(), run.output()
    report = json.loads((run.state / "report.json").read_text())
    late = [m for m in report["machines"] if m["cluster"] == "slow"]
    assert late and all(m["release_reason"] == "came after its acquisition was given up on" and m["nt"] == 0
                        and m["atus"] >= 1 for m in late), late
    conn = sqlite3.connect(f"file:{run.state / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        (intents,) = conn.execute("SELECT value FROM meta WHERE key = 'acquiring'").fetchone()
    finally:
        conn.close()
    assert json.loads(intents) == [], intents  # no acquisition left open
    left = [p for p in psutil.process_iter(["cmdline", "cwd"])  # local workers start where their master ran
            if p.info["cwd"] == str(run.root) and "slow-s1-" in " ".join(p.info["cmdline"] or [])]
    assert all(p.status() == psutil.STATUS_ZOMBIE for p in left), left  # every late machine was given back
    return audit(run.state)


def kill_workers_within_budget(root: Path, rng: random.Random) -> Audit:
    """``kill -9`` of a random worker, twice, while BaTS spends an up-front budget (``--budget 2``)."""
    return kill_workers(root, rng, ("--budget", "2.00"))


def spot_interruption(root: Path, rng: random.Random) -> Audit:
    """A spot interruption notice, served at a random point by a stand-in for the instance metadata
    service to the one worker that looks first: the master re-queues that machine's tasks and
    releases it at once, which ends the worker as the cloud would; the task it ran runs elsewhere."""
    from bats.worker.spot_testing import MetadataStandIn

    with MetadataStandIn() as metadata:
        run = MasterRun(root, n_tasks=30, task="sleep 0.3",
                        config_extra=f'metadata_url = "{metadata.url}"\nnotice_poll = "0.1s"\n')
        run.prepare()
        run.start()
        try:
            run.wait_started(rng.randint(4, 15))  # both workers busy
            workers = {w.cmdline()[w.cmdline().index("--machine") + 1]: w for w in run.workers_now()}
            metadata.arm()
            notice = wait_for(lambda: re.search(r"(\S+): spot interruption notice", run.output()), 30,
                              "the master to hear the notice")
            machine = notice.group(1)
            wait_for(lambda: journal_machine_states(run.state).get(machine) == "gone", 30, f"{machine} to be released")
            assert machine in workers, (machine, list(workers))
            wait_for(lambda: _ended(workers[machine]), 15, f"the worker of {machine} to end")
            assert run.wait() == 0, run.output()
        finally:
            run.kill()
    report = json.loads((run.state / "report.json").read_text())
    reasons = {m["id"]: m["release_reason"] for m in report["machines"]}
    assert reasons[machine].startswith("spot interruption notice (terminate at"), reasons
    # the task the worker was running (killed maybe before its shell wrote its mark) and any task that
    # started twice ran again elsewhere: the one result of each is from there, a later attempt
    killed = re.findall(r"killing task (\d+) on the way out", (run.state / "logs" / f"{machine}.log").read_text())
    starts = run.marks.read_text().split()
    again = {int(t) for t in starts if starts.count(t) > 1} | {int(t) for t in killed}
    conn = sqlite3.connect(f"file:{run.state / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        for task in again:
            rows = conn.execute("SELECT machine, attempts FROM results WHERE task_id = ?", (task,)).fetchall()
            assert len(rows) == 1 and rows[0][0] != machine and rows[0][1] >= 2, (task, rows)
    finally:
        conn.close()
    return audit(run.state)


def _ended(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


SCENARIOS: dict[str, Callable[[Path, random.Random], Audit]] = {
    "kill -9 of random workers": kill_workers,
    "kill -9 of random workers, BaTS with --budget": kill_workers_within_budget,
    "kill -9 of the master, then --resume": kill_master,
    "SIGSTOP/SIGCONT of a worker past liveness": pause_worker,
    "network cut past liveness (TCP proxy)": cut_network,
    "provisioner failing half its calls": flaky_provisioner,
    "spot interruption notice": spot_interruption,
    "acquisitions answering past their timeout": late_acquisitions,
}


WHERE = {"ssh": "workers started over ssh (a real sshd on 127.0.0.1)",
         "sge": "workers run as jobs of a real single-node Grid Engine"}


def on(backend: str, scenario: Callable[..., Audit], doc: str | None = None, same_port: bool = False,
       **options: object) -> Callable[[Path, random.Random], Audit]:
    """``scenario`` with its cluster on ``backend`` (``ssh`` or ``sge``), whose daemons
    :func:`backends.up` starts for the run (and stops after it)."""
    def run(root: Path, rng: random.Random) -> Audit:
        with backends.up(backend, root, same_port) as where:
            return scenario(root, rng, backend=where, **options)

    run.__doc__ = f"{doc or scenario.__doc__} On {WHERE[backend]}."
    return run


ORPHANS = ("``kill -9`` of the master at a random point, twice, each followed by ``--resume``; the workers "
           "it leaves running must be stopped by the resumed master.")

# The same harm to workers on other machines. Remote workers outlive a killed master: the resumed
# one must stop them (Provisioner.cleanup) and count each task once.
SCENARIOS.update({
    "kill -9 of random workers (ssh)": on("ssh", kill_workers),
    "kill -9 of the master, then --resume (ssh)": on(
        "ssh", kill_master, ORPHANS + " The master listens on a fixed port: those workers reconnect to the resumed "
        "one with results it must not count.", same_port=True),
    "SIGSTOP/SIGCONT of a worker past liveness (ssh)": on(
        "ssh", pause_worker, "SIGSTOP of a worker past the liveness limit, then SIGCONT after the master gave up on "
        "it and released it (SIGTERM over ssh)."),
    "kill -9 of random workers (sge)": on("sge", kill_workers),
    "qdel of random worker jobs (sge)": on(
        "sge", kill_workers, "``qdel`` of a random worker's job, twice, at random points of the bag (the scheduler "
        "kills it, as for a node failure).", kill=backends.qdel),
    "kill -9 of the master, then --resume (sge)": on("sge", kill_master, ORPHANS),
})
