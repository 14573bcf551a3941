"""The worker image for real: a fresh Debian root boots the way a cloud machine does and its worker runs
tasks for a master on this machine.

``.ci/debian-root`` makes the root once with debootstrap (Debian 12 with python3, python3-venv,
ca-certificates, cloud-init and systemd, as a stock cloud image has them or the user data's
``packages`` installs them, and the wheels of the worker's three dependencies). Each test works in a
copy of it (an overlay mount, or a real copy where overlayfs is refused), in a chroot with /proc
mounted (it shares this machine's network, so 127.0.0.1 is the
master). Two machines are played:

- *stock*: ``deploy/cloud-init.yaml`` rendered for the machine, its ``install`` line installing the
  worker wheel (``make worker-wheel``);
- *baked*: ``deploy/image/install-worker.sh`` bakes the wheel in, then the provisioners' built-in user
  data starts the worker.

The user data is given to the root's own cloud-init as a NoCloud seed and run through its stages
(``init --local``, ``init``, ``modules --mode config``, ``modules --mode final``) with the modules the
image's cloud.cfg lists, in its order, kept to those the user data needs: the others would act on this
machine (disks, mounts, hostname). ``packages`` is checked installed instead of fetched (no network in
tests), and a user data key no kept module handles fails the test. The chroot has no init system: a
stand-in ``systemctl`` hands unit files to the real one offline and records start requests, and the test
then starts the unit the way systemd does (User, Group, StateDirectory, WorkingDirectory, ExecStart; a
key it does not know fails the test). ``cloud-init status`` must report no error and ``systemd-analyze
verify`` must pass on the installed unit without a word. The user data also passes ``cloud-init
schema`` here.

Without the root (or not as root) the tests skip, or fail under ``BATS_REQUIRE_DAEMONS=1`` (CI).
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import zmq.auth
from helpers.daemons import missing
from helpers.runs import MASTER, free_port, results, wait_for

from bats.provisioners.base import Bootstrap, MachineHandle
from bats.provisioners.cloud import UserData

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DEBIAN_ROOT = Path(os.environ.get("BATS_DEBIAN_ROOT", "/var/cache/bats-debian-root"))
WHEELS = "/var/cache/bats-wheels"  # in the root: the worker's dependencies for its Python
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # systemd's default for services
# the cloud-init modules the user data needs (names as in cloud.cfg, "-" and "_" alike)
MODULES = {"write_files", "users_groups", "runcmd", "write_files_deferred", "scripts_user"}
HANDLED = {"users", "write_files", "runcmd"}  # the user data keys those modules act on
PACKAGES = {"packages", "package_update"}  # checked installed in the root, not fetched
# the [Service] keys start_unit knows; the others only matter to a running systemd (restarts, logs, stop)
SERVICE_KEYS = {"Type", "User", "Group", "StateDirectory", "WorkingDirectory", "ExecStart"}
SYSTEMD_ONLY = {"Restart", "RestartSec", "KillSignal", "TimeoutStopSec", "StandardOutput", "StandardError"}

SYSTEMCTL = """#!/bin/sh
# tests/deploy/test_image.py's stand-in for a running systemd: the chroot has no init system. Unit files
# go to the real systemctl, offline; what would start a unit is recorded for the test, which starts it.
echo "$*" >> /run/bats-test-systemctl
case "$1" in start|restart) exit 0 ;; esac
args=""
for a in "$@"; do [ "$a" = --now ] || args="$args $a"; done
SYSTEMD_OFFLINE=1 exec /usr/bin/systemctl $args
"""


def chroot(root: Path, *argv: str, env: dict[str, str] | None = None, check: bool = True,
           timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(["chroot", str(root), "env", "-i", f"PATH={PATH}", "LANG=C.UTF-8",
                           *(f"{k}={v}" for k, v in (env or {}).items()), *argv],
                          capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"{shlex.join(argv)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture
def machine(tmp_path) -> Iterator[Path]:
    """A copy of the prepared Debian root, /proc mounted, with the stand-in systemctl; removed after."""
    if not (DEBIAN_ROOT / ".bats-ready").exists():
        missing(f"a Debian root in {DEBIAN_ROOT}", ".ci/debian-root .venv/bin/python")
    if os.geteuid() != 0 or shutil.which("chroot") is None:
        missing("root (chroot needs it)", "running the tests as root")
    root = (tmp_path / "root").resolve()
    upper, work = tmp_path / "upper", tmp_path / "work"
    for directory in (root, upper, work):
        directory.mkdir()
    mounts: list[Path] = []
    try:
        # an overlay on the prepared root costs nothing; where overlayfs is refused, a copy
        overlay = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                                  f"lowerdir={DEBIAN_ROOT},upperdir={upper},workdir={work}", str(root)],
                                 capture_output=True)
        if overlay.returncode == 0:
            mounts.append(root)
        else:
            subprocess.run(["cp", "-a", "--reflink=auto", f"{DEBIAN_ROOT}/.", str(root)], check=True)
        subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
        mounts.append(root / "proc")
        if not (root / "dev" / "null").is_char_device():  # debootstrap could not make device nodes here
            subprocess.run(["mount", "--bind", "/dev", str(root / "dev")], check=True)
            mounts.append(root / "dev")
        (root / "run" / "systemd" / "system").mkdir(parents=True, exist_ok=True)  # as on a booted machine
        stand_in = root / "usr" / "local" / "sbin" / "systemctl"
        stand_in.write_text(SYSTEMCTL)
        stand_in.chmod(0o755)
        yield root
    finally:
        for proc in psutil.process_iter():  # whatever still runs in the root
            with contextlib.suppress(psutil.Error, OSError):
                if os.readlink(f"/proc/{proc.pid}/root") == str(root):
                    proc.kill()
        for mount in reversed(mounts):
            subprocess.run(["umount", "-l", str(mount)], check=False)
        for directory in (root, upper, work):
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("worker-wheel")
    done = subprocess.run([sys.executable, str(DEPLOY / "worker-wheel" / "build.py"), "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


class Master:
    """bats-master on 127.0.0.1 with one ``manual`` cluster, ``hand``, for the machine's worker to join."""

    def __init__(self, tmp_path: Path, commands: list[str]) -> None:
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.state_dir = tmp_path / "run"
        config = tmp_path / "c.toml"
        config.write_text(f'[master]\nlisten = "{self.endpoint}"\nheartbeat = "0.5s"\nboot_timeout = "10m"\n\n'
                          '[clusters.hand]\nprovisioner = "manual"\nmax = 1\nprice = 1.0\natu = "1h"\n')
        bag = tmp_path / "tasks.txt"
        bag.write_text("".join(f"{c}\n" for c in commands))
        self.proc = subprocess.Popen([*MASTER, "--quiet", "--bag", str(bag), "--config", str(config),
                                      "--policy", "self", "--state-dir", str(self.state_dir)],
                                     cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        token_file = self.state_dir / "join" / "hand.token"
        wait_for(lambda: token_file.exists() and (self.state_dir / "master.key").exists(), 60,
                 "the master's join token and key")
        public, _secret = zmq.auth.load_certificate(str(self.state_dir / "master.key"))
        self.server_key = public.decode()
        self.token = token_file.read_text().strip()

    def user_data(self, template: UserData, install: str = "") -> str:
        """The machine's user data, as a cloud provisioner renders it."""
        # the key as one word, as the provisioners write it: a Z85 key may begin with "-"
        argv = ["bats-worker", "--master", self.endpoint, f"--server-key={self.server_key}", "--cluster", "hand",
                "--machine", "image-1", "--heartbeat", "0.5"]
        return template.render(Bootstrap(self.endpoint, "run1"), MachineHandle("image-1", "hand", self.token),
                               argv, install)

    def finish(self, worker: subprocess.Popen, worker_log: Path, timeout: float = 240) -> None:
        """Wait for the master to end, failing early, with the worker's own words, if the worker fails or
        ends well before it."""
        deadline = time.monotonic() + timeout
        worker_done = float("inf")  # when the worker was first seen ended: the master ends right after it
        while self.proc.poll() is None:
            if worker.poll() is not None:
                worker_done = min(worker_done, time.monotonic())
            if worker.poll() is not None and (worker.returncode != 0 or time.monotonic() > worker_done + 30):
                self.proc.kill()
                raise AssertionError(f"the worker ended first (exit {worker.returncode}):\n{worker_log.read_text()}\n"
                                     f"the master said: {self.proc.communicate()[1]}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"the master did not end in {timeout:.0f} s: {self.proc.communicate()[1]}\n"
                                     f"the worker said:\n{worker_log.read_text()}")
            time.sleep(0.1)
        _out, err = self.proc.communicate()
        assert self.proc.returncode == 0, err


def boot(root: Path, user_data: str) -> None:
    """Run the root's cloud-init on ``user_data`` (see the module docstring)."""
    image_cfg = json.loads(chroot(root, "python3", "-c", "import json, yaml; "
                                  "print(json.dumps(yaml.safe_load(open('/etc/cloud/cloud.cfg'))))").stdout)
    keep = {stage: [m for m in image_cfg[stage] if isinstance(m, str) and m.replace("-", "_") in MODULES]
            for stage in ("cloud_init_modules", "cloud_config_modules", "cloud_final_modules")}
    assert {m.replace("-", "_") for ms in keep.values() for m in ms} == MODULES
    config = {"datasource_list": ["NoCloud"], "preserve_hostname": True, "network": {"config": "disabled"}, **keep}
    (root / "etc" / "cloud" / "cloud.cfg.d" / "99-bats-test.cfg").write_text(json.dumps(config))  # JSON is YAML
    seed = root / "var" / "lib" / "cloud" / "seed" / "nocloud"
    seed.mkdir(parents=True)
    (seed / "user-data").write_text(user_data)
    (seed / "meta-data").write_text("instance-id: image-1\n")
    if user_data.startswith("#cloud-config"):
        keys = json.loads(chroot(root, "python3", "-c", "import json, sys, yaml; "
                                 "print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
                                 "/var/lib/cloud/seed/nocloud/user-data").stdout)
        assert set(keys) <= HANDLED | PACKAGES, f"no kept cloud-init module handles {set(keys) - HANDLED - PACKAGES}"
        chroot(root, "dpkg-query", "--show", *keys.get("packages", []))  # installed: nothing to fetch
    for stage in (["init", "--local"], ["init"], ["modules", "--mode", "config"], ["modules", "--mode", "final"]):
        chroot(root, "cloud-init", *stage, check=False)
    status = json.loads(chroot(root, "cloud-init", "status", "--format", "json", check=False).stdout)
    assert status["status"] == "done" and status["errors"] == [], json.dumps(status, indent=1)


def started_units(root: Path) -> list[str]:
    """The units the user data asked systemd to start (the stand-in systemctl's record)."""
    record = root / "run" / "bats-test-systemctl"
    units = []
    for line in record.read_text().splitlines() if record.exists() else []:
        words = line.split()
        if words[:1] in (["start"], ["restart"]) or (words[:1] == ["enable"] and "--now" in words):
            units.extend(w for w in words[1:] if not w.startswith("-"))
    return units


def start_unit(root: Path, name: str, log: Path) -> subprocess.Popen:
    """Start service ``name`` of the root as systemd would: as User:Group, with the StateDirectory made
    and owned by them, in WorkingDirectory (which must exist: systemd fails a unit whose directory is
    missing, status 200/CHDIR), HOME and PATH set, running ExecStart. Its output goes to ``log`` (the
    journal's part: a pipe nobody reads could stall it)."""
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # keys keep their case
    unit.read_string((root / "etc" / "systemd" / "system" / name).read_text())
    service = unit["Service"]
    assert set(service) <= SERVICE_KEYS | SYSTEMD_ONLY, f"start_unit does not know {set(service) - SERVICE_KEYS}"
    assert service.get("Type", "simple") == "simple"
    for path in unit["Unit"].get("ConditionPathExists", "").split():
        assert (root / path.lstrip("/")).exists(), f"{name}: ConditionPathExists={path} does not hold"
    user, group = service["User"], service.get("Group", service["User"])
    passwd = {f[0]: f for f in (line.split(":") for line in (root / "etc" / "passwd").read_text().splitlines())}
    groups = {f[0]: f for f in (line.split(":") for line in (root / "etc" / "group").read_text().splitlines())}
    assert user in passwd and group in groups, f"{name}: no user {user} or group {group} in the root"
    uid, gid, home = int(passwd[user][2]), int(groups[group][2]), passwd[user][5]
    for state in service.get("StateDirectory", "").split():
        directory = root / "var" / "lib" / state
        directory.mkdir(mode=0o755, exist_ok=True)
        os.chown(directory, uid, gid)
    workdir = service.get("WorkingDirectory", home)
    assert (root / workdir.lstrip("/")).is_dir(), f"{name}: WorkingDirectory={workdir} does not exist (200/CHDIR)"
    return subprocess.Popen(["chroot", f"--userspec={uid}:{gid}", str(root), "env", "-i", f"PATH={PATH}",
                             f"HOME={home}", f"USER={user}", f"LOGNAME={user}", "sh", "-c", 'cd "$1" && shift && exec "$@"',
                             "sh", workdir, *shlex.split(service["ExecStart"])],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


def run_worker(root: Path, master: Master) -> None:
    """Verify the installed unit, start what the user data asked for, and let the master finish."""
    verify = chroot(root, "systemd-analyze", "verify", "/etc/systemd/system/bats-worker.service", check=False)
    assert verify.returncode == 0 and verify.stdout + verify.stderr == "", verify.stdout + verify.stderr
    assert started_units(root) == ["bats-worker.service"]
    log = master.state_dir.parent / "worker.log"
    worker = start_unit(root, "bats-worker.service", log)
    try:
        master.finish(worker, log)
        worker.wait(timeout=60)
        assert worker.returncode == 0, log.read_text()  # the master told it to stop
    finally:
        worker.kill()


MARK = "/etc/bats-test-mark"
TASKS = [f'echo "$(id -un) $(pwd) $(cat {MARK}) $HOME"; echo task-{i} > /dev/null' for i in range(6)]


def check_results(root: Path, master: Master) -> None:
    rows = results(master.state_dir)
    mark = (root / MARK.lstrip("/")).read_text().strip()
    assert [r["status"] for r in rows] == ["done"] * len(TASKS)
    assert len({r["machine"] for r in rows}) == 1  # the one seat the machine's worker took
    # every task ran in the root, as bats, in its state directory
    assert {r["stdout"].strip() for r in rows} == {f"bats /var/lib/bats {mark} /var/lib/bats"}


def test_a_stock_debian_machine_with_the_cloud_init_user_data_runs_tasks(machine, wheel, tmp_path):
    (machine / MARK.lstrip("/")).write_text(secrets.token_hex(8) + "\n")
    shutil.copy(wheel, machine / "tmp" / wheel.name)
    master = Master(tmp_path, TASKS)
    try:
        install = f"/opt/bats/bin/pip install --quiet --no-index --find-links {WHEELS} /tmp/{wheel.name}"
        boot(machine, master.user_data(UserData.load(str(DEPLOY / "cloud-init.yaml")), install))
        passwd = chroot(machine, "getent", "passwd", "bats").stdout.split(":")
        assert passwd[5] == "/var/lib/bats" and passwd[6].strip() == "/usr/sbin/nologin"
        worker_sh = machine / "etc" / "bats" / "worker.sh"
        assert worker_sh.stat().st_mode & 0o777 == 0o700 and worker_sh.stat().st_uid == int(passwd[2])
        assert chroot(machine, "bats-worker", "--version").stdout.startswith("bats-worker ")
        run_worker(machine, master)
    finally:
        master.proc.kill()
    check_results(machine, master)


def test_a_machine_baked_by_install_worker_sh_with_the_built_in_user_data_runs_tasks(machine, wheel, tmp_path):
    (machine / MARK.lstrip("/")).write_text(secrets.token_hex(8) + "\n")
    image = machine / "tmp" / "image"
    image.mkdir()
    for source in (wheel, DEPLOY / "image" / "install-worker.sh", DEPLOY / "bats-worker.service"):
        shutil.copy(source, image / source.name)
    baked = chroot(machine, "sh", "/tmp/image/install-worker.sh", f"/tmp/image/{wheel.name}",
                   "/tmp/image/bats-worker.service", env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELS})
    assert "install-worker.sh: bats-worker " in baked.stdout
    shutil.rmtree(image)
    master = Master(tmp_path, TASKS)
    try:
        boot(machine, master.user_data(UserData.load(None)))
        run_worker(machine, master)
    finally:
        master.proc.kill()
    check_results(machine, master)


def test_the_cloud_init_user_data_passes_the_schema_check(tmp_path):
    if shutil.which("cloud-init") is None:
        missing("cloud-init", "apt-get install -y cloud-init")
    text = UserData.load(str(DEPLOY / "cloud-init.yaml")).render(
        Bootstrap("tcp://10.0.0.5:5555", "run1"), MachineHandle("c-1", "c", "t0k"),
        ["bats-worker", "--master", "tcp://10.0.0.5:5555", "--machine", "c-1"], "/opt/bats/bin/pip install 'x y'")
    (tmp_path / "user-data").write_text(text)
    done = subprocess.run(["cloud-init", "schema", "--config-file", str(tmp_path / "user-data")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "Valid cloud-config" in done.stdout, done.stdout + done.stderr
