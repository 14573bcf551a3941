"""[files] on local workers: inputs shipped once (content-hashed), a setup run on each machine before its
first task (a failing one gives the machine up, saying so), and each task's outputs kept in the state
dir with a size limit. (Over ssh to a real sshd: tests/provisioners/test_provisioner_ssh.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.runs import MASTER, results, write_bag

pytestmark = pytest.mark.e2e

FILES = """
[files]
inputs = ["data/ref.txt"]
setup = "echo set up by $BATS_MACHINE >> ready.txt"
outputs = ["out-{id}.txt", "logs/{id}.log"]
max_output = "2KB"
"""
LOCAL = '\n[clusters.local]\nprovisioner = "local"\nmax = 2\n'


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MASTER, "--quiet", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_tasks_read_the_inputs_and_their_outputs_are_in_the_state_dir(tmp_path: Path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ref.txt").write_text("reference\n")
    (tmp_path / "c.toml").write_text(FILES + LOCAL)
    write_bag(tmp_path / "tasks.txt", [
        *(f"mkdir -p logs; tr a-z A-Z < ref.txt > out-{i}.txt; echo {i} > logs/{i}.log; echo scratch > tmp.txt"
          for i in range(1, 7)),
        "head -c 5000 /dev/zero > out-7.txt",  # over max_output: the task fails, saying so
    ])
    done = _run(tmp_path, "--bag", "tasks.txt", "--config", "c.toml", "--state-dir", "run")
    assert done.returncode == 1, done.stderr
    outputs = tmp_path / "run" / "files" / "outputs"
    for i in range(1, 7):
        assert (outputs / str(i) / f"out-{i}.txt").read_text() == "REFERENCE\n"
        assert (outputs / str(i) / "logs" / f"{i}.log").read_text() == f"{i}\n"
        assert not (outputs / str(i) / "tmp.txt").exists()  # only what the patterns name is kept
    assert not (outputs / "7").exists()
    by_id = {r["id"]: r for r in results(tmp_path / "run")}
    assert by_id[7]["status"] == "failed"
    assert "bats: [files] output(s) out-7.txt larger than max_output (2000 bytes): not kept" in by_id[7]["stderr"]
    assert all(by_id[i]["status"] == "done" for i in range(1, 7))
    # the setup ran once on each machine, before its tasks; the task folders are gone
    machines = {r["machine"] for r in by_id.values()}
    ready = (tmp_path / "run" / "files" / "inputs" / "ready.txt").read_text().split("\n")
    assert {line.removeprefix("set up by ") for line in ready if line} >= machines
    assert list((tmp_path / "run" / "files" / "tasks").iterdir()) == []


def test_inputs_are_shipped_again_only_when_their_content_changes(tmp_path: Path):
    from bats.common.config import ClusterConfig
    from bats.common.files import FilesConfig
    from bats.provisioners.base import Bootstrap
    from bats.provisioners.local import LocalProvisioner

    ref = tmp_path / "ref.txt"
    ref.write_text("one\n")
    cluster = ClusterConfig(name="local", provisioner="local", max=1, price=0.0, atu_s=3600.0, options={})

    def ship() -> Path:
        bootstrap = Bootstrap("tcp://127.0.0.1:9", "r", state_dir=str(tmp_path / "run"),
                              files=FilesConfig(inputs=(str(ref),)))
        LocalProvisioner(cluster, bootstrap)._ship_inputs()
        return tmp_path / "run" / "files" / "inputs" / "ref.txt"

    shipped = ship()
    first = shipped.stat().st_mtime_ns
    assert ship().stat().st_mtime_ns == first  # the same set: nothing copied
    ref.write_text("two\n")
    assert ship().read_text() == "two\n"


def test_a_failing_setup_gives_the_machines_up_saying_why(tmp_path: Path):
    (tmp_path / "c.toml").write_text('[files]\nsetup = "echo no compiler here >&2; exit 4"\n' + LOCAL
                                     + '\n[master]\nboot_timeout = "20s"\n')
    write_bag(tmp_path / "tasks.txt", ["true"])
    done = _run(tmp_path, "--bag", "tasks.txt", "--config", "c.toml", "--state-dir", "run")
    assert done.returncode == 1
    assert ("cluster local: [files] setup failed on local-s1-1 (exit 4): no compiler here; the machine is given up"
            in done.stderr)


@pytest.mark.parametrize(("table", "message"), [
    ('[files]\ninputs = ["nowhere.txt"]', "[files] inputs: nowhere.txt: not a readable file"),
    ('[files]\noutputs = ["../escape-{id}"]', "[files] outputs: '../escape-{id}': a path inside the task's folder"),
    ('[files]\nmax_output = "lots"', "[files] max_output: expected a size such as \"50MB\""),
    ('[files]\ncopy = ["a"]', "[files] copy: unknown key"),
    ('[files]\nsetup = "true"\n[clusters.q]\nprovisioner = "sge"\nmax = 1\n',
     "[files]: ships files to local, ssh and ec2 machines only, not to q (sge)"),
])
def test_bad_files_tables_are_one_line_errors(tmp_path: Path, table: str, message: str):
    (tmp_path / "c.toml").write_text(table + "\n" + LOCAL)
    write_bag(tmp_path / "tasks.txt", ["true"])
    done = _run(tmp_path, "--bag", "tasks.txt", "--config", "c.toml", "--state-dir", "run")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr and "c.toml" in done.stderr
    assert not (tmp_path / "run").exists()
