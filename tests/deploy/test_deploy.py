"""deploy/: the example configs load, the user-data templates render into what the harness and
cloud-init expect, the scripts are valid shell."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bats.master.cli.args import load_cluster_config
from bats.provisioners.base import Bootstrap, MachineHandle
from bats.provisioners.cloud import DEFAULT_USER_DATA, UserData, worker_command, worker_environment

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ARGV = ["bats-worker", "--master", "tcp://10.0.0.5:5555", "--machine", "c-s1-1", "--cluster", "c"]


def render(template: UserData, install: str = "") -> str:
    return template.render(Bootstrap("tcp://10.0.0.5:5555", "run1"), MachineHandle("c-s1-1", "c", "t0k"), ARGV, install)


@pytest.mark.parametrize("name", ["ec2.toml", "ec2-spot.toml", "libcloud.toml"])
def test_example_configs_load(name):
    config = load_cluster_config(str(DEPLOY / "examples" / name), None)
    assert {cl.provisioner for cl in config.clusters.values()} <= {"ec2", "libcloud"}


def test_the_built_in_user_data_is_shell_that_starts_the_worker(tmp_path):
    text = render(UserData.load(None), install="pip install bats")
    assert worker_command(text) == ARGV and "pip install bats" in text
    assert worker_environment(text) == {"BATS_TOKEN": "t0k"} and "t0k" not in " ".join(worker_command(text))
    script = tmp_path / "user-data.sh"
    script.write_text(text)
    subprocess.run(["sh", "-n", str(script)], check=True)
    assert text.startswith("#!/bin/sh\n") and DEFAULT_USER_DATA.count("${command}") == 1


def test_secrets_beside_the_token_reach_the_worker_environment_as_written(tmp_path):
    """[files]' grant rides beside the token: its "${filename}" and quotes are data, not placeholders."""
    grant = '{"post":{"key":"p/r/outputs/${filename}"},"note":"it\'s $HOME"}'
    for template in (UserData.load(None), UserData.load(str(DEPLOY / "cloud-init.yaml"))):
        text = template.render(Bootstrap("tcp://10.0.0.5:5555", "run1"), MachineHandle("c-s1-1", "c", "t0k"), ARGV,
                               env={"BATS_FILES_GRANT": grant})
        assert worker_environment(text) == {"BATS_TOKEN": "t0k", "BATS_FILES_GRANT": grant}
        assert grant not in " ".join(worker_command(text) or [])
    script = tmp_path / "worker.sh"  # what the shell makes of the line: the value itself
    line = next(x for x in text.splitlines() if "BATS_FILES_GRANT=" in x).strip()
    script.write_text(f'{line}\nprintf %s "$BATS_FILES_GRANT"\n')
    assert subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True).stdout == grant


def test_the_cloud_init_template_is_cloud_config_that_starts_the_worker():
    yaml = pytest.importorskip("yaml")
    text = render(UserData.load(str(DEPLOY / "cloud-init.yaml")), install="/opt/bats/bin/pip install 'bats==0.1.0'")
    assert text.startswith("#cloud-config\n") and worker_command(text) == ARGV
    assert worker_environment(text) == {"BATS_TOKEN": "t0k"}
    doc = yaml.safe_load(text)
    files = {f["path"]: f["content"] for f in doc["write_files"]}
    assert files["/etc/bats/worker.sh"].splitlines()[-1].startswith("exec bats-worker --master tcp://10.0.0.5:5555")
    assert "pip install 'bats==0.1.0'" in files["/etc/bats/install.sh"]
    assert doc["runcmd"] == [["sh", "/etc/bats/setup.sh"]]
    setup = files["/etc/bats/setup.sh"]
    assert setup.splitlines()[0] == "#!/bin/sh" and "\nset -eu\n" in setup
    assert setup.rstrip().endswith("systemctl enable --now bats-worker.service")


def test_the_cloud_init_set_up_stops_at_a_python_older_than_3_11_saying_so(tmp_path):
    """The set-up script, run with a stand-in python3 of another version, stops before installing."""
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(render(UserData.load(str(DEPLOY / "cloud-init.yaml"))))
    setup = next(f["content"] for f in doc["write_files"] if f["path"] == "/etc/bats/setup.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name, body in (("python3", 'case "$1" in -V) echo "Python 3.9.2";; *) exit 1;; esac'),
                       ("systemctl", f'echo "systemctl $*" >> {calls}'), ("ln", f'echo "ln $*" >> {calls}')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "setup.sh").write_text(setup)
    done = subprocess.run(["sh", str(tmp_path / "setup.sh")], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert done.returncode == 1
    assert done.stderr.strip() == "bats: the worker needs Python 3.11 or newer; this image has Python 3.9.2"
    assert not calls.exists()  # nothing installed, linked or started
    subprocess.run(["sh", "-n", str(tmp_path / "setup.sh")], check=True)


def test_the_unit_and_the_image_script():
    unit = (DEPLOY / "bats-worker.service").read_text()
    assert "ExecStart=/etc/bats/worker.sh" in unit and "User=bats" in unit and "Restart=on-failure" in unit
    subprocess.run(["sh", "-n", str(DEPLOY / "image" / "install-worker.sh")], check=True)
    packer = (DEPLOY / "image" / "bats-worker.pkr.hcl").read_text()
    assert "install-worker.sh" in packer and "bats-worker.service" in packer


def test_the_cloud_init_template_carries_the_same_unit_and_a_home_the_unit_can_use():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(render(UserData.load(str(DEPLOY / "cloud-init.yaml"))))
    files = {f["path"]: f for f in doc["write_files"]}

    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]

    unit = (DEPLOY / "bats-worker.service").read_text()
    assert lines(files["/etc/systemd/system/bats-worker.service"]["content"]) == lines(unit)
    # the worker's directory is made by systemd for the user, whose home it is
    (bats,) = [u for u in doc["users"] if isinstance(u, dict) and u["name"] == "bats"]
    assert "StateDirectory=bats" in lines(unit) and "WorkingDirectory=/var/lib/bats" in lines(unit)
    assert bats["homedir"] == "/var/lib/bats"
    # worker.sh belongs to bats, who exists only once users-groups has run: written in the final stage
    assert files["/etc/bats/worker.sh"]["owner"] == "bats:bats" and files["/etc/bats/worker.sh"]["defer"] is True
