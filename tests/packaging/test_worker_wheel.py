"""The worker-only wheel (``make worker-wheel``): what a worker machine installs.

deploy/worker-wheel/build.py copies worker/ and the bats.common modules it imports into a wheel named
bats_worker that depends on pyzmq, msgpack and psutil only. Here it is built, installed into a fresh venv
with nothing else, checked by ``pip check``, started with ``--version``, and imported: every module it
holds imports there, none of numpy, scipy, matplotlib, rich or the cloud SDKs gets imported, and the
bats.common modules it holds are exactly those the worker imports.

The fresh venv installs offline from a wheelhouse of the three dependencies for this Python
(``make worker-wheelhouse``, which .ci/run runs; ``BATS_WHEELHOUSE`` names another folder). Without it
the install test is skipped, or fails under ``BATS_REQUIRE_DAEMONS=1`` (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "deploy" / "worker-wheel" / "build.py"
DEPENDENCIES = {"pyzmq", "msgpack", "psutil"}
HEAVY = {"numpy", "scipy", "matplotlib", "rich", "boto3", "botocore", "libcloud", "bats.master", "bats.provisioners"}


def build_worker_wheel(out: Path) -> Path:
    """Build the worker wheel into ``out`` with this Python (as ``make worker-wheel`` does)."""
    done = subprocess.run([sys.executable, str(BUILD), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    (wheel,) = out.glob("bats_worker-*-py3-none-any.whl")
    assert done.stdout.strip() == str(wheel)
    return wheel


def pip_env() -> dict[str, str]:
    """An environment in which pip reads no configuration but the command line's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_worker_wheel(tmp_path_factory.mktemp("worker-wheel"))


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the worker wheel installed offline from the wheelhouse."""
    wheelhouse = Path(os.environ.get("BATS_WHEELHOUSE") or Path(sys.prefix, "wheelhouse"))
    if not wheelhouse.is_dir() or len(list(wheelhouse.glob("*.whl"))) < len(DEPENDENCIES):
        message = (f"no wheels of {', '.join(sorted(DEPENDENCIES))} in {wheelhouse}; `make worker-wheelhouse` "
                   "downloads them (.ci/run does)")
        if os.environ.get("BATS_REQUIRE_DAEMONS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
                           "--find-links", str(wheelhouse), str(wheel)], capture_output=True, text=True,
                          env=pip_env())
    assert done.returncode == 0, done.stderr[-4000:]
    return venv


def test_the_worker_wheel_holds_worker_and_only_what_it_imports_from_common(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(archive.read(metadata).decode())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    modules = {n for n in names if n.endswith(".py")}
    worker = {f"bats/worker/{p.relative_to(ROOT / 'worker').as_posix()}" for p in (ROOT / "worker").rglob("*.py")}
    assert worker <= modules
    common = modules - worker
    assert common and all(n.startswith("bats/common/") for n in common)
    assert "bats/common/__init__.py" in common and "bats/common/protocol.py" in common
    assert "bats/common/config.py" not in common  # the master's config reader is not the worker's
    assert {"bats/worker/py.typed", "bats/common/py.typed"} <= names
    # the same version and dependency pins as the main distribution
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["Name"] == "bats-worker" and meta["Version"] == project["version"]
    assert wheel.name == f"bats_worker-{project['version']}-py3-none-any.whl"
    requires = sorted(r for r in meta.get_all("Requires-Dist") if "extra ==" not in r)
    assert requires == sorted(r for r in project["dependencies"] if r.split(">")[0] in DEPENDENCIES)
    # no extras: [files] on ec2 machines fetch and upload with urllib through URLs the master signed
    assert [r for r in meta.get_all("Requires-Dist") if "extra ==" in r] == []
    assert meta.get_all("Provides-Extra") is None
    assert "bats-worker = bats.worker.main:main" in scripts


def test_the_worker_wheel_installs_alone_and_starts(venv, wheel):
    python, env = str(venv / "bin" / "python"), pip_env()
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                            env=env, check=True)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)} - {"pip", "setuptools", "wheel"}
    assert installed == {"bats-worker"} | DEPENDENCIES
    version = subprocess.run([str(venv / "bin" / "bats-worker"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"bats-worker {wheel.name.split('-')[1]}"


IMPORT_ALL = """
import importlib, json, sys
from importlib.metadata import files
held = sorted(str(f)[:-3].replace("/", ".").removesuffix(".__init__") for f in files("bats-worker")
              if str(f).endswith(".py"))
importlib.import_module("bats.worker.main")
worker_imports = sorted(m for m in sys.modules if m.startswith("bats.common"))
for name in held:
    importlib.import_module(name)
print(json.dumps({"from": sys.modules["bats.worker.main"].__file__, "held": held, "worker_imports": worker_imports, "modules": sorted(sys.modules)}))
"""


def test_the_installed_worker_imports_nothing_heavy(venv, tmp_path):
    # -I: only the venv's site-packages, not this checkout, are on the path
    done = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", IMPORT_ALL], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout)
    assert found["from"].startswith(str(venv))  # the installed worker, not this checkout
    heavy = sorted(m for m in found["modules"] if m in HEAVY or m.split(".")[0] in HEAVY
                   or any(m.startswith(h + ".") for h in HEAVY))
    assert heavy == []
    # the bats.common modules the wheel holds are exactly those the worker imports
    assert sorted(m for m in found["held"] if m.startswith("bats.common")) == found["worker_imports"]
