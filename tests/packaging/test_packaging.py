"""The built wheel holds every module of the four code folders and the entry points.

setup.py maps master/, worker/, provisioners/ and common/ to bats.master, bats.worker, bats.provisioners
and bats.common and finds their subpackages; a module that imports fine from the source tree but is left
out of the wheel would only show on a user's machine. The wheel is built offline with the setuptools of
this environment (the dev extra installs one that builds wheels by itself).
"""

import configparser
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"master": "bats/master", "worker": "bats/worker", "provisioners": "bats/provisioners",
           "common": "bats/common"}
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "bats-run", "__pycache__", ".pytest_cache")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # build from a copy, so the build leaves nothing in the working tree (build/ holds the editable links)
    source = tmp_path_factory.mktemp("source") / "bats"
    shutil.copytree(ROOT, source, ignore=SKIP)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", "-w", str(out), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    (built,) = out.glob("bats-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_the_wheel_holds_every_module(wheel):
    names = set(wheel.namelist())
    expected = {f"{FOLDERS[path.parts[0]]}/{Path(*path.parts[1:]).as_posix()}"
                for folder in FOLDERS for path in (p.relative_to(ROOT) for p in (ROOT / folder).rglob("*.py"))
                if "__pycache__" not in path.parts}
    assert len(expected) > 50
    assert sorted(expected - names) == []
    # python -m bats (bats/ holds only __main__.py: bats stays a namespace package)
    assert "bats/__main__.py" in names and "bats/__init__.py" not in names
    # and the packages say they are typed
    assert {f"{package}/py.typed" for package in FOLDERS.values()} <= names


def test_the_wheel_declares_the_entry_points(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(entry_points).decode())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert dict(parser["console_scripts"]) == project["scripts"]
    assert {"bats-master", "bats-worker", "bats-sim"} <= set(project["scripts"])
    assert dict(parser["bats.provisioners"]) == project["entry-points"]["bats.provisioners"]
    assert {"local", "ec2", "libcloud", "ssh", "sge", "slurm", "manual"} <= set(parser["bats.provisioners"])
    # every entry point names a module that is in the wheel
    names = set(wheel.namelist())
    for section in ("console_scripts", "bats.provisioners"):
        for target in parser[section].values():
            module = target.split(":")[0].replace(".", "/")
            assert f"{module}.py" in names or f"{module}/__init__.py" in names, target
