"""The suite's layout: tests/<folder>/ mirrors the code (core, server, sim, state, views, cli,
provisioners, worker, common), with end-to-end runs in e2e/, the bench scripts' tests in bench/, the
built wheel's in packaging/ and
the deploy recipes' in deploy/. Shared code is in tests/helpers/.

Markers say what a test file needs, so ``make test-fast`` (``-m "not e2e and not daemons and not
browser and not cloud"``) runs the unit tests alone: e2e (real processes), daemons (sshd, Grid
Engine, Slurm), browser (Chromium), cloud (moto, libcloud). They are set here, per file, so a new
file that starts processes is added to one list, next to its neighbours.
"""

from __future__ import annotations

import pytest

MARKS = {
    "e2e": {
        "e2e/test_e2e.py", "e2e/test_bats_e2e.py", "e2e/test_policies_e2e.py", "e2e/test_faults.py",
        "e2e/test_failures.py", "e2e/test_short_atus.py", "cli/test_inputs.py", "cli/test_progress_and_examples.py",
        "views/test_operator_watch.py", "views/test_operator_dashboard.py", "server/test_security.py",
        "worker/test_worker.py", "provisioners/test_provisioner_manual.py", "provisioners/test_provisioner_batch.py",
        "provisioners/test_provisioner_ssh.py", "provisioners/test_ec2.py", "provisioners/test_libcloud.py",
        "deploy/test_deploy.py", "state/test_journal.py", "state/test_ownership.py", "common/test_protocol.py", "packaging/test_packaging.py",
        "server/test_flood.py", "server/test_worker_limits.py", "common/test_clock.py", "state/test_resume_accounting.py",
        "cli/test_output.py", "packaging/test_worker_wheel.py", "deploy/test_image.py",
    },
    "daemons": {"provisioners/test_provisioner_batch.py", "provisioners/test_provisioner_ssh.py", "e2e/test_faults.py",
                "deploy/test_image.py"},
    "browser": {"views/test_operator_dashboard.py"},
    "cloud": {"provisioners/test_ec2.py", "provisioners/test_libcloud.py"},
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath / "tests"
    for item in items:
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        for mark, files in MARKS.items():
            if where in files:
                item.add_marker(mark)
