"""The ``flaky`` provisioner: local worker processes behind a back end that fails on purpose.

For fault injection (``tests/e2e/test_faults.py``, ``bench/reliability.py``) and for trying out how a
run behaves when the cloud misbehaves. It is the ``local`` provisioner with knobs on every
``acquire``, ``release`` and ``status`` call: ``fail_rate`` of the calls (of the methods listed in
``fail_calls``, all three by default) fail (chosen by a
generator seeded with ``seed``, so a run's pattern can be repeated), a failing call first hangs for
``hang`` (longer than ``call_timeout``, the master's timeout for each call, it stands for a back end
that never answers), and ``release_delay`` makes a successful release take effect only that long
after it returned, as a cloud's termination does (a paused machine can then wake up and talk to
the master before it is gone). A call that fails does nothing: no process is started or stopped.
``acquire_delay`` makes a successful acquisition answer only that long after it started its
machines, as a slow cloud API does: past ``call_timeout`` the master has given up on it by then,
and the machines come late (they are charged and released, see ``MachineCameLate``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import ClassVar

from bats.common.config import OptionSpec
from bats.provisioners.base import MachineHandle, NodeState, ProvisionerError
from bats.provisioners.local import LocalProvisioner

log = logging.getLogger(__name__)


class FlakyProvisioner(LocalProvisioner):
    OPTIONS: ClassVar[OptionSpec] = {
        **LocalProvisioner.OPTIONS,
        "fail_rate": ("float", 0.5),  # share of calls that fail, 0 to 1
        "hang": ("duration", 0.0),  # a failing call hangs this long before it raises
        "call_timeout": ("duration", 10.0),  # the master's timeout for each call of this provisioner
        "release_delay": ("duration", 0.0),  # a release takes effect this long after it returned
        "acquire_delay": ("duration", 0.0),  # a successful acquire answers this long after it started machines
        "seed": ("int", 0),
        "fail_calls": ("list", ["acquire", "release", "status"]),  # which methods may fail
    }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        options = self.cluster.options
        self.fail_rate = min(1.0, float(options.get("fail_rate", 0.5)))
        self.hang_s = float(options.get("hang", 0.0))
        self.release_delay_s = float(options.get("release_delay", 0.0))
        self.acquire_delay_s = float(options.get("acquire_delay", 0.0))
        self.fail_calls = set(options.get("fail_calls", ["acquire", "release", "status"]))
        self._rng = random.Random(options.get("seed", 0))
        self._rng_lock = threading.Lock()
        self.calls = {"acquire": 0, "release": 0, "status": 0}
        self.failures = dict.fromkeys(self.calls, 0)

    def call_timeout_s(self) -> float:
        return float(self.cluster.options.get("call_timeout", 10.0))

    def _maybe_fail(self, kind: str) -> None:
        with self._rng_lock:
            self.calls[kind] += 1
            failing = self._rng.random() < self.fail_rate and kind in self.fail_calls
            if failing:
                self.failures[kind] += 1
        if failing:
            if self.hang_s > 0:
                time.sleep(self.hang_s)
            raise ProvisionerError(f"cluster {self.cluster.name}: injected {kind} failure")

    def acquire(self, n: int) -> list[MachineHandle]:
        self._maybe_fail("acquire")
        handles = super().acquire(n)
        if self.acquire_delay_s > 0:
            time.sleep(self.acquire_delay_s)
        return handles

    def release(self, handles: list[MachineHandle]) -> None:
        self._maybe_fail("release")
        if self.release_delay_s > 0:
            timer = threading.Timer(self.release_delay_s, super().release, args=(handles,))
            timer.daemon = True
            timer.start()
            return
        super().release(handles)

    def status(self, handles: list[MachineHandle]) -> dict[str, NodeState]:
        self._maybe_fail("status")
        return super().status(handles)

    def close(self) -> None:
        log.info("cluster %s: injected failures: %s of %s calls", self.cluster.name, self.failures, self.calls)
        super().close()
