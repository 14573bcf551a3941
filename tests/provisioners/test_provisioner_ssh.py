"""The ``ssh`` provisioner against real sshd daemons on 127.0.0.1 (generated keys, free ports): whole
bags through ``bats-master`` with real workers over real ZeroMQ, release, a host that stops
answering, and the config errors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psutil
import pytest
from helpers.daemons import Sshd, start_sshd, stop_sshd
from helpers.runs import MASTER, kill_all, wait_for
from helpers.runs import results as export

from bats.common.config import ClusterConfig
from bats.common.files import FilesConfig
from bats.provisioners.base import Bootstrap, NodeState, ProvisionerConfigError
from bats.provisioners.ssh import SshProvisioner, parse_hosts

WORKER = str(Path(sys.executable).with_name("bats-worker"))


@pytest.fixture
def two_hosts(tmp_path):
    first = start_sshd(tmp_path / "host-a")
    hosts = [first, start_sshd(tmp_path / "host-b", client_key=first.client_key)]
    known = tmp_path / "known_hosts"
    known.write_text("".join(h.known_hosts.read_text() for h in hosts))
    yield hosts, known
    for host in hosts:
        stop_sshd(host)


def workers_of_cluster(cluster: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and "--cluster" in cmd and cluster in cmd and any(
                "bats-worker" in part or "bats.worker" in part for part in cmd):
            found.append(proc)
    return found


def pool_config(path: Path, hosts: list[Sshd], known: Path, cluster: str, slots: list[int], extra: str = "",
                master: str = "") -> Path:
    entries = ", ".join(f'{{ host = "127.0.0.1:{h.port}", slots = {s} }}' for h, s in zip(hosts, slots))
    path.write_text(f"""
[master]
listen = "tcp://127.0.0.1:*"
heartbeat = "0.5s"
{master}

[clusters.{cluster}]
provisioner = "ssh"
max = {sum(slots)}
hosts = [{entries}]
user = "root"
key = "{hosts[0].client_key}"
known_hosts = "{known}"
worker = "{WORKER}"
log_dir = "{path.parent / 'remote-logs'}"
poll_interval = "0.5s"
{extra}
""")
    return path


def test_bag_runs_on_workers_started_over_ssh_and_a_cut_connection_loses_nothing(tmp_path, two_hosts):
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}a"
    marks = tmp_path / "ran"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i} >> {marks}; sleep 0.3; echo out-{i}\n" for i in range(1, 19)))
    config = pool_config(tmp_path / "pool.toml", hosts, known, cluster, [2, 1])
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--state-dir",
                               str(tmp_path / "run")], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 4, 60, "tasks to start")
        # cut every ssh connection to host a (the shared connection included): the workers run on
        sessions = [p for p in psutil.Process(hosts[0].pid).children(recursive=True) if _name(p).startswith("sshd")]
        assert sessions, "the provisioner keeps a shared connection open"
        for proc in sessions:
            proc.kill()
        out, err = master.communicate(timeout=120)
    finally:
        master.kill()
        kill_all(workers_of_cluster(cluster))  # only matters when the test failed: leave no worker behind
    assert master.returncode == 0, err
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"] == {"total": 18, "done": 18, "failed": 0, "not_run": 0}
    assert len(report["machines"]) == 3 and all(m["nt"] > 0 for m in report["machines"]), err
    rows = export(tmp_path / "run")
    assert [r["id"] for r in rows] == list(range(1, 19))
    assert all(r["stdout"] == f"out-{r['id']}\n" for r in rows)
    assert set(Counter(marks.read_text().split()).values()) == {1}  # every task ran once
    assert sorted(p.name for p in (tmp_path / "remote-logs").glob("*.log")) == [f"{cluster}-s1-{i}.log" for i in (1, 2, 3)]
    wait_for(lambda: not workers_of_cluster(cluster), 15, "the workers to stop")


def test_a_host_that_stops_answering_is_lost_and_its_task_reruns_elsewhere(tmp_path, two_hosts):
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}b"
    marks = tmp_path / "ran"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i} >> {marks}; sleep 0.5\n" for i in range(1, 9)))
    # liveness far beyond the test: only the provisioner's host check can notice the dead host
    config = pool_config(tmp_path / "pool.toml", hosts, known, cluster, [1, 1], master='liveness = "300s"')
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--state-dir",
                               str(tmp_path / "run")], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    frozen: list[psutil.Process] = []
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 2, 60, "tasks to start")
        # the second machine's host "dies": its worker (and the task it runs) freeze, its sshd goes away
        victim = next(p for p in workers_of_cluster(cluster) if f"{cluster}-s1-2" in p.cmdline())
        frozen = [victim, *victim.children(recursive=True)]
        for proc in frozen:
            proc.send_signal(signal.SIGSTOP)
        stop_sshd(hosts[1])  # machines spread over the hosts in order: the second is on host b
        out, err = master.communicate(timeout=120)
    finally:
        master.kill()
        kill_all(workers_of_cluster(cluster))  # only matters when the test failed: leave no worker behind
        for proc in frozen:
            with contextlib.suppress(psutil.Error):
                proc.kill()
    assert master.returncode == 0, err
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["done"] == 8
    lost = {m["id"]: m for m in report["machines"]}[f"{cluster}-s1-2"]
    assert lost["release_reason"] == "provisioner reports failed"
    rows = export(tmp_path / "run")
    assert [r["id"] for r in rows] == list(range(1, 9))
    ran = Counter(marks.read_text().split())
    assert set(ran) == {str(i) for i in range(1, 9)}
    assert sum(ran.values()) <= 9  # only the frozen host's task ran twice
    assert f"{cluster}-s1-2" not in {r["machine"] for r in rows if ran[str(r["id"])] == 2}


def test_cleanup_command_stops_the_workers_of_a_killed_master(tmp_path, two_hosts):
    """``bats-master cleanup`` after a ``kill -9`` of the master: the detached workers stop (the
    config's relative key path still found from the config's directory, not the current one)."""
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}k"
    marks = tmp_path / "ran"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"echo {i} >> {marks}; sleep 0.5\n" for i in range(1, 31)))
    (tmp_path / "conf").mkdir()
    for suffix in ("", ".pub"):
        (tmp_path / "conf" / f"id{suffix}").write_bytes(Path(f"{hosts[0].client_key}{suffix}").read_bytes())
    (tmp_path / "conf" / "id").chmod(0o600)
    config = pool_config(tmp_path / "conf" / "pool.toml", hosts, known, cluster, [1, 1])
    config.write_text(config.read_text().replace(f'key = "{hosts[0].client_key}"', 'key = "id"'))
    master = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--state-dir",
                               str(tmp_path / "run")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 2, 60, "tasks to start")
        master.kill()
        master.wait()
        left = workers_of_cluster(cluster)
        assert len(left) == 2  # detached: they outlive their master
        out = subprocess.run([*MASTER, "cleanup", "--state-dir", str(tmp_path / "run")], capture_output=True,
                             text=True, timeout=60, cwd="/", check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"cluster {cluster} (ssh): terminated 2: root@127.0.0.1:"), out.stdout
        wait_for(lambda: not workers_of_cluster(cluster), 15, "the workers to stop")
    finally:
        master.kill()
        kill_all(workers_of_cluster(cluster))


def provisioner(tmp_path: Path, hosts: list[Sshd], known: Path, cluster: str, run_id: str = "t", session: int = 1,
                **options) -> SshProvisioner:
    opts = {**{k: default for k, (_kind, default) in SshProvisioner.OPTIONS.items()},
            "hosts": [f"127.0.0.1:{h.port}" for h in hosts], "user": "root", "key": str(hosts[0].client_key),
            "known_hosts": str(known), "worker": WORKER, "log_dir": str(tmp_path / "logs"), "poll_interval": 0.2,
            **options}
    cl = ClusterConfig(name=cluster, provisioner="ssh", max=len(hosts), price=0.0, atu_s=3600.0, options=opts)
    SshProvisioner.preflight(cl, str(tmp_path))
    # nobody listens there: the workers keep saying hello, which is all this test needs
    return SshProvisioner(cl, Bootstrap(master_endpoint="tcp://127.0.0.1:9", run_id=run_id, session=session,
                                        config_dir=str(tmp_path)))


def test_release_really_stops_the_worker_and_status_follows(tmp_path, two_hosts):
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}c"
    prov = provisioner(tmp_path, hosts, known, cluster)
    handles = []
    try:
        handles += prov.acquire(2)
        assert len(handles) == 2
        assert {h.native_id.split("/")[0] for h in handles} == {f"root@127.0.0.1:{h.port}" for h in hosts}  # spread
        assert prov.acquire(1) == []  # every slot is taken
        wait_for(lambda: set(prov.status(handles).values()) == {NodeState.RUNNING}, 15, "both RUNNING")
        pids = {h.machine_id: h.data["pid"] for h in handles}
        assert all(psutil.pid_exists(p) for p in pids.values())
        prov.release([handles[0]])
        wait_for(lambda: not psutil.pid_exists(pids[handles[0].machine_id])
                   or psutil.Process(pids[handles[0].machine_id]).status() == psutil.STATUS_ZOMBIE, 10,
                   "the released worker to exit")
        assert prov.status([handles[0]]) == {handles[0].machine_id: NodeState.GONE}
        # a worker that dies on its own is GONE at the next check
        os.kill(pids[handles[1].machine_id], signal.SIGKILL)
        wait_for(lambda: prov.status([handles[1]])[handles[1].machine_id] is NodeState.GONE, 10, "GONE")
        again = prov.acquire(1)  # the freed slot can be used again
        handles += again
        assert len(again) == 1
    finally:
        prov.release(handles)  # whatever happened above, no worker is left behind
        prov.close()
    wait_for(lambda: not workers_of_cluster(cluster), 10, "no worker left")


def test_cleanup_stops_the_workers_an_earlier_session_left_running_and_no_others(tmp_path, two_hosts):
    """Regression: workers outlive a master killed -9 and reconnect for good; --resume (and
    ``bats-master cleanup``) must stop them, and only them: not another run's on the same hosts."""
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}e"
    killed = provisioner(tmp_path, hosts, known, cluster)  # its master "dies": no release, no close
    other = provisioner(tmp_path, hosts, known, cluster, run_id="another")
    resumed = provisioner(tmp_path, hosts, known, cluster, session=2)
    try:
        left = killed.acquire(2)
        [kept] = other.acquire(1)
        pids = {h.machine_id: h.data["pid"] for h in left}
        wait_for(lambda: len(workers_of_cluster(cluster)) == 3, 15, "three workers")
        found = resumed.cleanup()
        assert sorted(found.values()) == [f"{cluster}-s1-1", f"{cluster}-s1-2"]
        assert set(found) == {h.native_id for h in left}
        wait_for(lambda: {p.pid for p in workers_of_cluster(cluster)} == {kept.data["pid"]}, 15,
                   "the killed session's workers to stop")
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                       for pid in pids.values())
        assert resumed.cleanup() == {}  # nothing left, and nothing of the other run
    finally:
        for prov in (other, killed, resumed):
            with contextlib.suppress(Exception):
                prov.release(list(prov._held.values()))
            prov.close()
    wait_for(lambda: not workers_of_cluster(cluster), 10, "no worker left")


def test_a_host_that_refuses_is_a_clear_acquire_error(tmp_path, two_hosts):
    hosts, known = two_hosts
    prov = provisioner(tmp_path, hosts[:1], known, f"pool{os.getpid()}d", worker="/nonexistent/bats-worker")
    try:
        with pytest.raises(Exception, match=r"starting a worker on root@127\.0\.0\.1:\d+ failed \(exit 127\): "
                                            r"/nonexistent/bats-worker: command not found"):
            prov.acquire(1)
    finally:
        prov.close()


def test_results_keeps_each_tasks_whole_output_from_workers_started_over_ssh(tmp_path, two_hosts):
    """--results over ssh: the hosts (sshd on this machine) share the folder with the master."""
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}g"
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"seq 1 {20000 + i}; echo err-{i} >&2\n" for i in range(1, 7)))
    config = pool_config(tmp_path / "pool.toml", hosts, known, cluster, [1, 1])
    try:
        done = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--state-dir",
                               str(tmp_path / "run"), "--results", str(tmp_path / "out")], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    finally:
        kill_all(workers_of_cluster(cluster))
    assert done.returncode == 0, done.stderr
    for i in range(1, 7):
        assert (tmp_path / "out" / str(i) / "stdout").read_text() == "".join(f"{n}\n" for n in range(1, 20001 + i))
        assert (tmp_path / "out" / str(i) / "stderr").read_text() == f"err-{i}\n"
    assert {r["machine"].rsplit("-", 1)[0] for r in export(tmp_path / "run")} == {f"{cluster}-s1"}


def test_files_go_to_every_host_once_and_the_outputs_come_back(tmp_path, two_hosts):
    """[files] over ssh: the inputs reach each host's files folder (not the master's), the setup runs
    on each machine before its tasks, and every task's output is in the state dir afterwards."""
    hosts, known = two_hosts
    cluster = f"pool{os.getpid()}h"
    (tmp_path / "ref.txt").write_text("reference\n")
    files = ('\n[files]\ninputs = ["ref.txt"]\nsetup = "echo ready >> setup-ran.txt"\n'
             'outputs = ["out-{id}.txt"]\nmax_output = "1KB"\n')
    config = pool_config(tmp_path / "pool.toml", hosts, known, cluster, [2, 1])
    config.write_text(config.read_text() + files)
    bag = tmp_path / "tasks.txt"
    bag.write_text("".join(f"test \"$PWD\" != {tmp_path}; cat ref.txt setup-ran.txt > out-{i}.txt; "
                           f"echo $BATS_FILES\n" for i in range(1, 10)))
    try:
        done = subprocess.run([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config), "--state-dir",
                               str(tmp_path / "run")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        kill_all(workers_of_cluster(cluster))
    assert done.returncode == 0, done.stderr
    remote = {r["stdout"].strip() for r in export(tmp_path / "run")}
    assert len(remote) == 1 and str(tmp_path / "remote-logs") in remote.pop()  # the host's folder
    for i in range(1, 10):
        kept = (tmp_path / "run" / "files" / "outputs" / str(i) / f"out-{i}.txt").read_text().splitlines()
        assert kept[0] == "reference" and set(kept[1:]) == {"ready"}


def test_a_failing_setup_over_ssh_gives_the_host_up_saying_why(tmp_path, two_hosts):
    hosts, known = two_hosts
    opts = {**{k: default for k, (_kind, default) in SshProvisioner.OPTIONS.items()},
            "hosts": [f"127.0.0.1:{hosts[0].port}"], "user": "root", "key": str(hosts[0].client_key),
            "known_hosts": str(known), "worker": WORKER, "log_dir": str(tmp_path / "logs")}
    cl = ClusterConfig(name=f"pool{os.getpid()}i", provisioner="ssh", max=1, price=0.0, atu_s=3600.0, options=opts)
    prov = SshProvisioner(cl, Bootstrap(master_endpoint="tcp://127.0.0.1:9", run_id="t", config_dir=str(tmp_path),
                                        files=FilesConfig(setup="echo no compiler >&2; exit 3")))
    try:
        with pytest.raises(Exception, match=r"failed \(exit 1\): \[files\] setup failed on "
                                            rf"{cl.name}-s1-1 \(exit 3\): no compiler"):
            prov.acquire(1)
    finally:
        prov.close()
    assert not workers_of_cluster(cl.name)


def test_a_host_without_the_tasks_shell_is_refused_saying_so(tmp_path, two_hosts):
    """[master] shell names a shell the host lacks: its worker is not started (every task would fail
    with 127); the acquire error says which shell."""
    hosts, known = two_hosts
    opts = {**{k: default for k, (_kind, default) in SshProvisioner.OPTIONS.items()},
            "hosts": [f"127.0.0.1:{hosts[0].port}"], "user": "root", "key": str(hosts[0].client_key),
            "known_hosts": str(known), "worker": WORKER, "log_dir": str(tmp_path / "logs")}
    cl = ClusterConfig(name=f"pool{os.getpid()}f", provisioner="ssh", max=1, price=0.0, atu_s=3600.0, options=opts)
    prov = SshProvisioner(cl, Bootstrap(master_endpoint="tcp://127.0.0.1:9", run_id="t", config_dir=str(tmp_path),
                                        task_shell="/no/such/zsh"))
    try:
        with pytest.raises(Exception, match=r"failed \(exit 127\): \[master\] shell /no/such/zsh: "
                                            r"not installed on this host"):
            prov.acquire(1)
    finally:
        prov.close()
    assert not workers_of_cluster(cl.name)


# ---------------------------------------------------------------- config errors (no sshd needed)
@pytest.mark.parametrize("options, message", [
    ({"hosts": ["a:99999"]}, "hosts: entry 1: bad port in 'a:99999'"),
    ({"hosts": ["a/b"]}, "hosts: entry 1: expected [user@]host[:port], got 'a/b'"),
    ({"hosts": [{"host": "a", "cores": 2}]}, "hosts: entry 1: unknown key 'cores'"),
    ({"hosts": [{"host": "a", "slots": 0}]}, "hosts: entry 1: slots: expected a positive integer, got 0"),
    ({"hosts": [{"slots": 2}]}, "hosts: entry 1: host: required"),
    ({"hosts": [{"host": "a", "port": 0}]}, "hosts: entry 1: port: expected a port number, got 0"),
    ({"hosts": [3]}, "hosts: entry 1: expected \"[user@]host[:port]\" or a table, got 3"),
    ({"hosts": ["a", "a:22"]}, "hosts: a:22 is listed twice"),
])
def test_host_list_errors_name_the_key(options, message):
    with pytest.raises(ProvisionerConfigError) as exc:
        parse_hosts(options, "/")
    assert str(exc.value).startswith(message)


def test_hosts_file_and_defaults(tmp_path):
    (tmp_path / "hosts").write_text("# the pool\nnode1 4\nbob@node2:2200\n[::1]:23 2  # v6\n\n")
    hosts = parse_hosts({"hosts_file": "hosts", "user": "alice", "port": 2222, "slots": 3, "key": "id"}, str(tmp_path))
    assert [(h.label, h.slots, h.key) for h in hosts] == [
        ("alice@node1:2222", 4, str(tmp_path / "id")), ("bob@node2:2200", 3, str(tmp_path / "id")),
        ("alice@::1:23", 2, str(tmp_path / "id"))]
    (tmp_path / "bad").write_text("node1\nnode2 many\n")
    with pytest.raises(ProvisionerConfigError,
                       match=r"^hosts_file: .*/bad:2: expected \"\[user@\]host\[:port\] \[slots\]\""):
        parse_hosts({"hosts_file": "bad"}, str(tmp_path))


def test_config_errors_stop_the_master_before_anything_starts(tmp_path):
    bag = tmp_path / "tasks.txt"
    bag.write_text("true\n")
    config = tmp_path / "c.toml"
    config.write_text('[clusters.pool]\nprovisioner = "ssh"\nmax = 3\nhosts = ["a", "b"]\n')
    proc = subprocess.run([*MASTER, "--bag", str(bag), "--config", str(config), "--state-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"bats-master: error: {config}: [clusters.pool] max: 3 machines, but the hosts "
                                   "have 2 slot(s) in all")
    assert not (tmp_path / "r").exists()
    # the ssh client missing from PATH
    config.write_text('[clusters.pool]\nprovisioner = "ssh"\nmax = 1\nhosts = ["a"]\n')
    proc = subprocess.run([*MASTER, "--bag", str(bag), "--config", str(config), "--state-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"bats-master: error: {config}: [clusters.pool] provisioner: ssh needs 'ssh', "
                                   "which is not on PATH (install openssh-client on this machine)")


@pytest.mark.parametrize("name", ["ssh", "sge", "slurm", "manual"])
def test_example_configs_load(name):
    from bats import provisioners
    from bats.common.config import load_config

    root = Path(__file__).resolve().parents[2]
    config = load_config(root / "deploy" / "examples" / f"{name}.toml", provisioners.options_of)
    [cluster] = config.clusters.values()
    assert cluster.provisioner == name
    if name == "ssh":
        hosts = parse_hosts(cluster.options, str(root / "deploy" / "examples"))
        assert sum(h.slots for h in hosts) == cluster.max == 8


def _name(process: psutil.Process) -> str:
    """A process's name, or "" once it has ended (the tasks' shells come and go while we look)."""
    try:
        return process.name()
    except psutil.NoSuchProcess:
        return ""
