"""Peers that know only the master's public key (it is no secret: every worker's command line
carries it) and flood it: they may slow a run, never stop a real worker, get admitted, or take the
master's memory. The real master with real local workers and hostile DEALER sockets
(``tests/helpers/hostile.py``; ``make reliability`` repeats these runs and writes the figures)."""

from __future__ import annotations

from helpers import hostile

from bats.master.server import door


def test_an_early_hello_flood_does_not_stop_the_real_workers(tmp_path):
    # the acquisition answers 3 s after its workers started: their hellos come first and are held;
    # the flood claims machines of the same cluster with made-up ids and tokens meanwhile
    run = hostile.flood_run(tmp_path, "hellos")
    assert run["code"] == 0, run["stderr"]
    assert run["done"] == run["tasks"] and run["admitted"] == 0


def test_pre_hello_frames_from_peers_that_never_read_cost_bounded_memory(tmp_path):
    run = hostile.flood_run(tmp_path, "heartbeats", tasks=30)
    assert run["code"] == 0, run["stderr"]
    assert run["done"] == run["tasks"]
    assert run["peak_mib"] < 400, f"the master grew to {run['peak_mib']:.0f} MiB under the flood"
    # nor its log: the first 100 drops one by one, then a line per 10 s at most (a pipe nobody read
    # used to fill with one line per 1,000 drops and block the master)
    drops = [line for line in run["stderr"].splitlines() if "dropped" in line]
    assert len(drops) <= 100 + run["wall_s"] / 10 + 1, drops[100:]


def test_megabyte_frames_before_hello_cost_a_bounded_and_returned_memory(tmp_path):
    # 4 peers with only the public key send 1 MiB frames as fast as the master takes them, for 6 s,
    # then leave while the run goes on; unbounded, each connection held up to 1,000 such frames
    run = hostile.flood_run(tmp_path, "megabytes", peers=4, tasks=30, command="sleep 0.5", flood_for_s=6)
    assert run["code"] == 0, run["stderr"]
    assert run["done"] == run["tasks"]
    assert run["peak_mib"] < 250, f"the master grew to {run['peak_mib']:.0f} MiB under the flood"
    assert run["after_mib"] < 150, f"the master still held {run['after_mib']:.0f} MiB after the flood left"


def test_connections_without_a_hello_are_capped_per_address(tmp_path):
    # 80 key-only connections from the workers' own address that never say a word, once the
    # workers are in: the door lets 64 complete their handshake and refuses the rest (a temporary
    # refusal: libzmq tries again, and is refused again while the 64 stay)
    run = hostile.flood_run(tmp_path, "idle", peers=80, tasks=30, command="sleep 0.3", flood_for_s=6,
                            after_first_result=True)
    assert run["code"] == 0, run["stderr"]
    assert run["done"] == run["tasks"]
    assert 0 < run["handshakes"] <= door.PER_ADDRESS, run
    assert run["refused"] >= 80 - door.PER_ADDRESS, run
