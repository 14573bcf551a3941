"""The master keeps its own limits on what an admitted worker reports: output tails of at most
64 KiB however much arrives, runtimes no longer than the machine has been up, and text fields that
are one short line (a newline in ``host`` would forge a line of the log and the summary)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from bats.common.config import ClusterConfig
from bats.common.protocol import OUTPUT_TAIL_BYTES, WORKER_TYPES, ProtocolError, decode, encode
from bats.master import core as c
from bats.master.server.loop import Server, _tail


def test_an_output_tail_is_cut_to_the_last_64_kib_by_the_master():
    big = b"x" * 1_000_000 + b"the end"
    kept = _tail(big)
    assert len(kept) == OUTPUT_TAIL_BYTES and kept.endswith(b"the end")
    assert _tail("short") == b"short"


def test_a_runtime_longer_than_the_machine_has_been_up_counts_as_its_uptime():
    core = c.Core(range(1, 3), {"a": ClusterConfig("a", "local", max=1)}, random.Random(1))
    core.handle(c.RunStarted(100.0))
    core.handle(c.MachineAcquired(100.0, "m1", "a"))
    server = SimpleNamespace(core=core)
    assert Server._believable_runtime(server, "m1", 9.9e8, 160.0) == pytest.approx(61.0)  # type: ignore[arg-type]
    assert Server._believable_runtime(server, "m1", 12.5, 160.0) == 12.5  # type: ignore[arg-type]


@pytest.mark.parametrize("kind, fields", [
    ("hello", {"machine": "m1", "token": "t", "cluster": "a", "host": "evil\nINFO forged line", "cpus": 1,
               "version": "0"}),
    ("hello", {"machine": "m1", "token": "t", "cluster": "a", "host": "h" * 300, "cpus": 1, "version": "0"}),
    ("interruption", {"action": "terminate\r\n", "time": "now"}),
    ("bye", {"reason": "done\x1b[2J"}),
])
def test_text_fields_that_reach_the_log_must_be_one_short_line(kind, fields):
    with pytest.raises(ProtocolError, match="is not one line of at most 256 characters"):
        decode(encode(kind, **fields), WORKER_TYPES)


def test_ordinary_text_fields_pass():
    msg = decode(encode("hello", machine="c-s1-1", token="ab" * 16, cluster="c", host="ip-10-0-0-5", cpus=4,
                        version="0.1.0"), WORKER_TYPES)
    assert msg["host"] == "ip-10-0-0-5"
