"""The report's ``master`` figures are the master's own: a master started by a large process (a
benchmark) does not report that process's memory as its peak."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bats.master.views.report import _master_usage


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_the_peak_memory_is_the_masters_not_its_parents(tmp_path):
    parent = ("import subprocess, sys\n"
              "held = bytearray(200 * 1024 * 1024)\n"
              "for i in range(0, len(held), 4096): held[i] = 1\n"  # 200 MiB resident in the parent
              "subprocess.run(sys.argv[1:], check=True)\n")
    bag = tmp_path / "tasks.txt"
    bag.write_text("true\n")
    subprocess.run([sys.executable, "-c", parent, sys.executable, "-m", "bats.master.cli", "--quiet", "--bag",
                    str(bag), "--state-dir", str(tmp_path / "run")], check=True, timeout=120,
                   stdout=subprocess.DEVNULL)
    master = json.loads((tmp_path / "run" / "report.json").read_text())["master"]
    assert 0 < master["peak_rss_mib"] < 150  # a plain run is a few tens of MiB; the parent held 200
    assert master["cpu_s"] > 0


def test_usage_has_cpu_and_a_peak_in_mib():
    usage = _master_usage()
    assert usage["cpu_s"] > 0 and 1 < usage["peak_rss_mib"] < 10_000
