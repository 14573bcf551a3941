"""The door's count of connections without a hello (:mod:`bats.master.server.door`), fed as the
ROUTER's monitor and the master's loop feed it; a burst of honest connections over real CURVE
sockets here, the floods through the real master in ``test_flood.py``."""

from __future__ import annotations

import time

import zmq

from bats.master.server.door import HELLO_WITHIN_S, PENALTY_S, Door, DoorKeeper


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


def test_a_refused_handshake_stops_counting_before_its_end_is_seen():
    door = Door(per_address=2, total=10)
    for fd in range(5):  # five accepted together, none past its handshake yet
        door.opened(fd, "10.0.0.1", 5000 + fd, 0.0)
    refusals = [door.refuses("10.0.0.1", 0.0) for _ in range(5)]
    assert [r is None for r in refusals] == [False, False, False, True, True]  # the last two get in
    door.opened(5, "10.0.0.1", 5005, 0.0)
    assert door.refuses("10.0.0.1", 0.0) is not None  # a sixth is refused while those two wait
    door.closed(5)  # a refused one leaves: the two let in still hold their seats
    door.opened(6, "10.0.0.1", 5006, 0.0)
    assert door.refuses("10.0.0.1", 0.0) is not None
    door.admit(3)
    door.opened(7, "10.0.0.1", 5007, 0.0)
    assert door.refuses("10.0.0.1", 0.0) is None  # a hello freed a seat


def test_a_burst_of_connections_larger_than_the_door_all_get_in():
    # 30 honest peers connect together to a door of 4 seats, each saying hello as soon as its
    # handshake is done: every handshake of the burst used to be refused (the refused ones counted
    # until their end was seen, and they reconnected together), round after round
    peers, seats = 30, 4
    context = zmq.Context()
    public, secret = zmq.curve_keypair()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.setsockopt(zmq.CURVE_SECRETKEY, secret)
    router.setsockopt(zmq.CURVE_PUBLICKEY, public)
    router.setsockopt(zmq.CURVE_SERVER, 1)
    router.setsockopt(zmq.ZAP_DOMAIN, b"bats")
    # libzmq may keep a refused connection until its handshake times out before its peer tries
    # again: a short timeout keeps the test short
    router.setsockopt(zmq.HANDSHAKE_IVL, 1000)
    door = Door(per_address=seats, total=seats)
    keeper = DoorKeeper(context, door)
    keeper.watch(router)
    dealers = []
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        for _ in range(peers):
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer_public, dealer_secret = zmq.curve_keypair()
            dealer.setsockopt(zmq.CURVE_SERVERKEY, public)
            dealer.setsockopt(zmq.CURVE_PUBLICKEY, dealer_public)
            dealer.setsockopt(zmq.CURVE_SECRETKEY, dealer_secret)
            dealer.connect(f"tcp://127.0.0.1:{port}")
            dealer.send(b"hello")  # queued until a handshake succeeds
            dealers.append(dealer)
        admitted: set[bytes] = set()
        give_up = time.monotonic() + 60  # a bound, not a speed: the burst joins in a few seconds
        while len(admitted) < peers and time.monotonic() < give_up:
            if router.poll(100):
                identity, hello = router.recv_multipart(copy=False)
                door.admit(hello.get(zmq.SRCFD))
                admitted.add(identity.bytes)
        assert len(admitted) == peers, f"{len(admitted)} of {peers} got in; {door.refused} handshakes refused"
    finally:
        for dealer in dealers:
            dealer.close(linger=0)
        router.close(linger=0)
        keeper.stop()
        context.term()

