"""The door's count of connections without a hello (:mod:`bats.master.server.door`), fed as the
ROUTER's monitor and the master's loop feed it; the real sockets are in ``test_flood.py``."""

from __future__ import annotations

from bats.master.server.door import HELLO_WITHIN_S, PENALTY_S, Door


def test_a_full_address_is_refused_and_opens_again_when_a_connection_leaves_or_is_admitted():
    door = Door(per_address=2, total=10)
    door.opened(10, "10.0.0.1", 5000, 0.0)
    door.opened(11, "10.0.0.1", 5001, 0.0)
    assert door.refuses("10.0.0.1", 0.0) is None  # the two asking are counted already
    door.opened(12, "10.0.0.1", 5002, 0.0)
    assert "more than 2 connections from 10.0.0.1" in door.refuses("10.0.0.1", 0.0)
    assert door.refuses("10.0.0.2", 0.0) is None  # another address is not held up
    door.admit(11)
    assert door.refuses("10.0.0.1", 0.0) is None and door.waiting("10.0.0.1") == 2
    door.closed(12)
    door.closed(11)  # an admitted one leaving changes nothing
    assert door.waiting("10.0.0.1") == 1 and door.waiting() == 1


def test_the_total_counts_every_address():
    door = Door(per_address=5, total=3)
    for fd in range(4):
        door.opened(fd, f"10.0.0.{fd}", 5000, 0.0)
    assert "more than 3 connections without a hello" in door.refuses("10.0.0.3", 0.0)
    assert door.refused == 1


def test_a_reused_descriptor_replaces_the_connection_it_had():
    door = Door()
    door.opened(7, "10.0.0.1", 5000, 0.0)
    door.opened(7, "10.0.0.2", 6000, 1.0)  # its end was not seen: the old one is gone all the same
    assert door.waiting("10.0.0.1") == 0 and door.waiting("10.0.0.2") == 1


def test_evicted_and_overdue_connections_are_shut_but_admitted_ones_never():
    door = Door()
    door.opened(1, "10.0.0.1", 5001, 0.0)
    door.opened(2, "10.0.0.1", 5002, 0.0)
    door.opened(3, "10.0.0.1", 5003, 10.0)
    door.admit(2)
    door.evict(3, None, 1.0)
    door.evict(2, None, 1.0)  # admitted: not shut
    assert door.to_shut(1.0) == [(3, "10.0.0.1", 5003)]
    assert door.to_shut(2.0) == []  # asked once
    assert door.to_shut(HELLO_WITHIN_S + 1.0) == [(1, "10.0.0.1", 5001)]



def test_a_key_whose_connection_was_shut_for_its_budget_waits_before_a_new_handshake():
    door = Door()
    door.opened(4, "10.0.0.9", 7000, 0.0)
    door.evict(4, "K" * 40, 1.0)
    assert door.to_shut(1.0) == [(4, "10.0.0.9", 7000)]
    door.closed(4)
    assert "sent past its budget" in door.refuses("10.0.0.9", 1.0 + PENALTY_S / 2, "K" * 40)
    assert door.refuses("10.0.0.9", 1.0, "W" * 40) is None  # a worker's key from the same address is not
    assert door.refuses("10.0.0.9", 1.0 + PENALTY_S + 0.1, "K" * 40) is None
