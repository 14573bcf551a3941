"""The wire protocol (bats.common.protocol): every message round-trips, every malformed frame is a
ProtocolError and nothing else, whatever bytes a peer sends."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bats.common import protocol
from bats.common.protocol import (
    MASTER_TYPES,
    MAX_FIELDS,
    MAX_FRAME_BYTES,
    RANGES,
    SCHEMAS,
    VERSION,
    WORKER_TYPES,
    ProtocolError,
    decode,
    encode,
    text_of,
)

# One valid message of every type.
VALID: dict[str, dict] = {
    "hello": {"machine": "local-s1-1", "token": "abc", "cluster": "fast", "host": "node7", "cpus": 8,
              "version": "0.1.0"},
    "ask": {"n": 2},
    "result": {"task": 17, "attempt": 1, "exit_code": 3, "runtime_s": 1.25, "timed_out": False,
               "stdout": b"out\xff", "stderr": "err", "ask": True},
    "heartbeat": {},
    "bye": {"reason": "idle"},
    "interruption": {"action": "terminate", "time": "2024-05-01T12:00:00Z"},
    "welcome": {"machine": "local-s1-1", "heartbeat_s": 2.0, "liveness_s": 15, "prefetch": 1, "slots": 4,
                "shell": "/bin/sh"},
    "task": {"task": 4, "attempt": 2, "command": "echo hi", "timeout_s": None},
    "wait": {},
    "unknown": {},
    "stop": {"reason": "bag done"},
    "cancel": {"task": 4, "attempt": 2},
}

# A sample value of each kind, and which kinds each field type accepts (bool is not an int here).
SAMPLES = {"none": None, "true": True, "false": False, "int": 7, "zero": 0, "float": 1.5, "str": "x",
           "bytes": b"x", "list": [1], "map": {"a": 1}}
ACCEPTS = {
    (str,): {"str"},
    (int,): {"int", "zero"},
    (int, float): {"int", "zero", "float"},
    (bool,): {"true", "false"},
    (bytes, str): {"bytes", "str"},
    (int, float, type(None)): {"int", "zero", "float", "none"},
    (int, type(None)): {"int", "zero", "none"},
}


def allowed_for(msg_type: str) -> frozenset[str]:
    return WORKER_TYPES if msg_type in WORKER_TYPES else MASTER_TYPES


def frame_of(msg: object) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def valid_frame(msg_type: str, **changes: object) -> dict:
    return {"v": VERSION, "type": msg_type, **VALID[msg_type], **changes}


def passes_schema(msg: object, allowed: frozenset[str]) -> bool:
    """The oracle for the fuzz tests: what a decoded message must look like."""
    if not isinstance(msg, dict) or type(msg.get("v")) is not int or msg["v"] != VERSION:
        return False
    msg_type = msg.get("type")
    if not isinstance(msg_type, str) or msg_type not in allowed:
        return False
    for name, types in SCHEMAS[msg_type].items():
        if name not in msg:
            return False
        value = msg[name]
        if isinstance(value, bool) and bool not in types:
            return False
        if not isinstance(value, types):
            return False
    # no container anywhere in a message, and a bounded number of fields
    return len(msg) <= MAX_FIELDS and not any(isinstance(value, (list, dict)) for value in msg.values())


# ----------------------------------------------------------------------------------- the schema

def test_every_type_has_a_sample_and_a_side():
    assert set(VALID) == set(SCHEMAS) == WORKER_TYPES | MASTER_TYPES
    assert WORKER_TYPES & MASTER_TYPES == {"heartbeat"}
    for msg_type, fields in VALID.items():
        assert set(fields) == set(SCHEMAS[msg_type])
    assert {types for schema in SCHEMAS.values() for types in schema.values()} <= set(ACCEPTS)


@pytest.mark.parametrize("msg_type", sorted(SCHEMAS))
def test_round_trip(msg_type):
    allowed = allowed_for(msg_type)
    msg = decode(encode(msg_type, **VALID[msg_type]), allowed)
    assert msg == {"v": VERSION, "type": msg_type, **VALID[msg_type]}
    for name, value in VALID[msg_type].items():  # bytes stay bytes, str stays str
        assert type(msg[name]) is type(value)
    assert passes_schema(msg, allowed)


def test_heartbeat_goes_both_ways():
    assert decode(encode("heartbeat"), WORKER_TYPES)["type"] == "heartbeat"
    assert decode(encode("heartbeat"), MASTER_TYPES)["type"] == "heartbeat"


def test_round_trip_other_accepted_values():
    frame = encode("task", task=1, attempt=1, command="true", timeout_s=90)
    assert decode(frame, MASTER_TYPES)["timeout_s"] == 90
    frame = encode("result", **{**VALID["result"], "stdout": "", "stderr": b"", "runtime_s": 0})
    assert decode(frame, WORKER_TYPES)["runtime_s"] == 0
    assert decode(encode("ask", n=16), WORKER_TYPES)["n"] == 16


@pytest.mark.parametrize("msg_type, field, value", [
    ("ask", "n", 2**63 - 1), ("ask", "n", -1), ("result", "runtime_s", float("nan")),
    ("result", "runtime_s", -1.0), ("result", "runtime_s", float("inf")), ("result", "task", -5),
    ("result", "exit_code", 2**40), ("task", "timeout_s", float("nan")),
])
def test_out_of_range_numbers_are_rejected(msg_type, field, value):
    with pytest.raises(ProtocolError, match="out of range"):
        decode(frame_of(valid_frame(msg_type, **{field: value})), allowed_for(msg_type))


FIELDS = [(t, f) for t in sorted(SCHEMAS) for f in sorted(SCHEMAS[t])]


@pytest.mark.parametrize("msg_type, name", FIELDS)
def test_missing_field(msg_type, name):
    msg = valid_frame(msg_type)
    del msg[name]
    with pytest.raises(ProtocolError, match=name):
        decode(frame_of(msg), allowed_for(msg_type))


@pytest.mark.parametrize("msg_type, name", FIELDS)
def test_wrong_type(msg_type, name):
    accepted = ACCEPTS[SCHEMAS[msg_type][name]]
    allowed = allowed_for(msg_type)
    low = {field: low for field, low, _high in RANGES.get(msg_type, ())}.get(name)
    for kind, value in SAMPLES.items():
        frame = frame_of(valid_frame(msg_type, **{name: value}))
        if kind in accepted and (low is None or value is None or value >= low):  # a type right, a range wrong
            assert decode(frame, allowed)[name] == value
        else:  # a container is refused as it is decoded, before any field is looked at
            with pytest.raises(ProtocolError, match=name if kind not in ("list", "map") else "array|map inside"):
                decode(frame, allowed)


@pytest.mark.parametrize("msg_type, name", [(t, f) for t, f in FIELDS if SCHEMAS[t][f] == (int,)])
def test_bool_is_not_an_int(msg_type, name):
    for value in (True, False):
        with pytest.raises(ProtocolError):
            decode(frame_of(valid_frame(msg_type, **{name: value})), allowed_for(msg_type))


# ----------------------------------------------------------------------------- frames and envelope

def _result_with_stdout(size: int) -> bytes:
    return encode("result", **{**VALID["result"], "stdout": b"x" * size})


def test_oversized_frame():
    overhead = len(_result_with_stdout(100_000)) - 100_000  # same bin32 header at any larger size
    at_limit = _result_with_stdout(MAX_FRAME_BYTES - overhead)
    assert len(at_limit) == MAX_FRAME_BYTES
    assert len(decode(at_limit, WORKER_TYPES)["stdout"]) == MAX_FRAME_BYTES - overhead
    with pytest.raises(ProtocolError, match="exceeds"):
        decode(_result_with_stdout(MAX_FRAME_BYTES - overhead + 1), WORKER_TYPES)
    with pytest.raises(ProtocolError, match="exceeds"):
        decode(b"\x00" * (MAX_FRAME_BYTES + 1), WORKER_TYPES)


@pytest.mark.parametrize("version", [0, 2, -1, 2**64 - 1, "1", b"1", 1.0, True, None, [1], {"v": 1}])
def test_wrong_version(version):
    with pytest.raises(ProtocolError, match="version|array|map inside"):
        decode(frame_of(valid_frame("ask", v=version)), WORKER_TYPES)


def test_missing_version():
    msg = valid_frame("ask")
    del msg["v"]
    with pytest.raises(ProtocolError, match="version"):
        decode(frame_of(msg), WORKER_TYPES)


@pytest.mark.parametrize("msg_type", ["nope", "", "HELLO", "hello ", b"hello", 5, None, True, ["hello"]])
def test_unknown_type(msg_type):
    msg = {"v": VERSION, "type": msg_type, **VALID["hello"]}
    with pytest.raises(ProtocolError, match="type|array"):
        decode(frame_of(msg), WORKER_TYPES)


def test_missing_type():
    with pytest.raises(ProtocolError, match="type"):
        decode(frame_of({"v": VERSION, "n": 1}), WORKER_TYPES)


@pytest.mark.parametrize("msg_type", sorted(MASTER_TYPES - WORKER_TYPES))
def test_master_type_from_a_worker_is_rejected(msg_type):
    with pytest.raises(ProtocolError, match=msg_type):
        decode(encode(msg_type, **VALID[msg_type]), WORKER_TYPES)


@pytest.mark.parametrize("msg_type", sorted(WORKER_TYPES - MASTER_TYPES))
def test_worker_type_from_the_master_is_rejected(msg_type):
    with pytest.raises(ProtocolError, match=msg_type):
        decode(encode(msg_type, **VALID[msg_type]), MASTER_TYPES)


NOT_MESSAGES = {
    "empty": b"",
    "never-used-byte": b"\xc1",
    "truncated": encode("hello", **VALID["hello"])[:-3],
    "trailing-data": encode("ask", n=1) + b"\x00",
    "two-messages": encode("ask", n=1) + encode("ask", n=1),
    "array": frame_of([1, 2]),
    "int": frame_of(5),
    "str": frame_of("hello"),
    "nil": frame_of(None),
    "int-keys": frame_of({1: 2, "v": 1, "type": "heartbeat"}),
    "bad-utf8-str": b"\x82\xa1v\x01\xa4type\xa3\xff\xfe\xfd",
    "bad-utf8-key": b"\x83\xa1v\x01\xa4type\xa9heartbeat\xa2\xff\xfe\x01",
    "ext-type": frame_of(msgpack.ExtType(5, b"abc")),
    "timestamp": b"\xd6\xff\x00\x00\x00\x01",
    "huge-array-header": b"\xdd\xff\xff\xff\xff",
    "huge-map-header": b"\xdf\xff\xff\xff\xff",
    "huge-str-header": b"\xdb\xff\xff\xff\xff",
    "deep-nesting": b"\x91" * 100_000 + b"\x00",
}


@pytest.mark.parametrize("name", sorted(NOT_MESSAGES))
def test_not_a_message(name):
    with pytest.raises(ProtocolError):
        decode(NOT_MESSAGES[name], WORKER_TYPES)


def test_field_with_ext_type_is_rejected():
    frame = frame_of(valid_frame("ask", n=msgpack.ExtType(1, b"\x01")))
    with pytest.raises(ProtocolError, match="'n'"):
        decode(frame, WORKER_TYPES)


def test_error_messages_are_one_short_line():
    for msg in ({"v": "x" * 100_000, "type": "ask", "n": 1}, {"v": 1, "type": "y\n" * 100_000, "n": 1},
                {"v": 1, "type": "result"}):
        with pytest.raises(ProtocolError) as info:
            decode(frame_of(msg), WORKER_TYPES)
        assert "\n" not in str(info.value) and len(str(info.value)) < 200, str(info.value)[:300]


def test_text_of():
    assert text_of("plain") == "plain"
    assert text_of(b"caf\xc3\xa9") == "café"
    assert text_of(b"bad \xff byte") == "bad \ufffd byte"


# -------------------------------------------------------------------------------------- fuzzing

def check_decode(frame: bytes, allowed: frozenset[str]) -> dict | None:
    """decode either returns a message that passes the schema or raises ProtocolError: nothing else."""
    try:
        msg = decode(frame, allowed)
    except ProtocolError as exc:
        assert "\n" not in str(exc)
        return None
    assert passes_schema(msg, allowed), msg
    return msg


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=512))
@example(b"\x81\xa1v\x01")
@example(encode("heartbeat"))
@example(encode("hello", **VALID["hello"]))
def test_fuzz_arbitrary_bytes(frame):
    check_decode(frame, WORKER_TYPES)
    check_decode(frame, MASTER_TYPES)


# Anything msgpack can carry: what a confused or hostile peer could pack.
SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
           | st.text(max_size=20) | st.binary(max_size=20))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
TYPED = {
    str: st.text(max_size=20),
    int: st.integers(-(2**63), 2**64 - 1),
    float: st.floats(),
    bool: st.booleans(),
    bytes: st.binary(max_size=20),
    type(None): st.none(),
}


@st.composite
def packed_messages(draw) -> bytes:
    """A map with, most of the time, ``v`` = 1, a known ``type`` and each field of its schema, the
    values often of the right type and otherwise anything: valid messages and near misses."""
    def often() -> bool:
        return draw(st.integers(0, 29)) > 0

    msg_type = draw(st.sampled_from(sorted(SCHEMAS))) if often() else draw(st.text(max_size=8))
    msg = draw(st.dictionaries(st.text(max_size=8), SCALARS, max_size=3))  # extra fields (no container passes)
    for name, types in SCHEMAS.get(msg_type, {}).items():
        if often():  # else missing
            msg[name] = draw(st.one_of([TYPED[t] for t in types]) if often() else VALUES)
    if often():
        msg["v"] = VERSION if often() else draw(st.sampled_from([0, 2, True, 1.0, "1", None]))
    if often():
        msg["type"] = msg_type
    return frame_of(msg)


@FUZZ
@given(packed_messages())
def test_fuzz_packed_structures(frame):
    for allowed in (WORKER_TYPES, MASTER_TYPES):
        msg = check_decode(frame, allowed)
        if msg is not None:  # returned as sent (compared packed: nan != nan)
            assert frame_of(msg) == frame


@FUZZ
@given(st.sampled_from(sorted(SCHEMAS)), st.data())
def test_fuzz_damaged_valid_frames(msg_type, data):
    """A valid frame cut short, with bytes changed or inserted."""
    frame = bytearray(encode(msg_type, **VALID[msg_type]))
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(frame)))
        action = data.draw(st.sampled_from(["flip", "insert", "cut"]))
        if action == "cut":
            del frame[where:]
        elif action == "insert":
            frame[where:where] = data.draw(st.binary(min_size=1, max_size=8))
        elif where < len(frame):
            frame[where] ^= data.draw(st.integers(1, 255))
    check_decode(bytes(frame), WORKER_TYPES)
    check_decode(bytes(frame), MASTER_TYPES)


def test_fuzz_oracle_sees_both_outcomes():
    """The structured strategy really produces accepted messages too (else the fuzz test is idle)."""
    accepted = rejected = 0

    @settings(max_examples=400, deadline=None, database=None)
    @given(packed_messages())
    def count(frame):
        nonlocal accepted, rejected
        if check_decode(frame, WORKER_TYPES) is None:
            rejected += 1
        else:
            accepted += 1

    count()
    assert accepted > 10 and rejected > 10, (accepted, rejected)


# ----------------------------------------------------------------------------------- several messages a frame
def test_a_frame_may_carry_several_messages_back_to_back():
    from bats.common.protocol import decode_all

    ask, beat = encode("ask", n=1), encode("heartbeat")
    assert [m["type"] for m in decode_all(ask + beat + ask, WORKER_TYPES)] == ["ask", "heartbeat", "ask"]
    assert decode_all(ask, WORKER_TYPES) == [decode(ask, WORKER_TYPES)]


@pytest.mark.parametrize("tail", [b"\x81", b"\x81\xa1", b"\xc1", b"\x92\x01"])
def test_a_frame_with_a_bad_or_truncated_message_after_good_ones_is_dropped_whole(tail):
    from bats.common.protocol import decode_all

    with pytest.raises(ProtocolError):
        decode_all(encode("ask", n=1) + tail, WORKER_TYPES)


def test_one_invalid_message_among_valid_ones_rejects_the_frame():
    from bats.common.protocol import decode_all

    with pytest.raises(ProtocolError, match="unknown message type"):
        decode_all(encode("ask", n=1) + encode("task", task=1, attempt=1, command="x", timeout_s=None),
                   WORKER_TYPES)


def test_too_many_messages_in_one_frame_are_refused():
    from bats.common.protocol import MAX_MESSAGES_PER_FRAME, decode_all

    with pytest.raises(ProtocolError, match="more than"):
        decode_all(encode("heartbeat") * (MAX_MESSAGES_PER_FRAME + 1), WORKER_TYPES)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["heartbeat", "ask", "big"]), max_size=700))
def test_frames_split_a_burst_at_the_receivers_limits_and_keep_its_order(kinds):
    from bats.common.protocol import MAX_MESSAGES_PER_FRAME, decode_all, frames

    # "big": a result with two full output tails, so a few fill a frame's bytes before its count
    blob = b"x" * protocol.OUTPUT_TAIL_BYTES
    made = {"heartbeat": encode("heartbeat"), "ask": encode("ask", n=1),
            "big": encode("result", task=1, attempt=1, exit_code=0, runtime_s=0.0, timed_out=False, stdout=blob,
                          stderr=blob, ask=True)}
    messages = [made[kind] for kind in kinds]
    packed = frames(messages)
    assert b"".join(packed) == b"".join(messages)
    per_frame = [decode_all(frame, WORKER_TYPES) for frame in packed]
    assert [m["type"] for msgs in per_frame for m in msgs] == [{"big": "result"}.get(kind, kind) for kind in kinds]
    assert all(len(frame) <= MAX_FRAME_BYTES for frame in packed)
    # as few frames as the limits allow: a frame ends only where the next message would break one
    first = 0
    for frame, msgs in zip(packed[:-1], per_frame[:-1]):
        first += len(msgs)
        assert len(msgs) == MAX_MESSAGES_PER_FRAME or len(frame) + len(messages[first]) > MAX_FRAME_BYTES


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_decode_all_of_arbitrary_bytes_only_ever_raises_protocol_error(data):
    from bats.common.protocol import decode_all

    try:
        messages = decode_all(data, WORKER_TYPES)
    except ProtocolError:
        return
    assert messages and all(passes_schema(m, WORKER_TYPES) for m in messages)


def test_decode_first_reads_one_message_and_says_whether_more_follow():
    one = protocol.encode("heartbeat")
    assert protocol.decode_first(one, protocol.WORKER_TYPES) == ({"v": 1, "type": "heartbeat"}, False)
    msg, more = protocol.decode_first(one + b"\xc1" * 1000, protocol.WORKER_TYPES)  # the rest is never read
    assert msg["type"] == "heartbeat" and more
    for bad in (b"", b"\x91", b"\xc1"):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_first(bad, protocol.WORKER_TYPES)


@pytest.mark.parametrize("depth", [2_000, 200_000])
def test_deeply_nested_frames_are_refused_before_anything_is_built(depth):
    frame = b"\x91" * depth + b"\xc0"  # arrays in arrays
    for decoder in (protocol.decode, protocol.decode_all):
        with pytest.raises(protocol.ProtocolError):
            decoder(frame, protocol.WORKER_TYPES)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_first(frame, protocol.WORKER_TYPES)


def test_a_refused_frame_leaves_nothing_behind_for_the_next_one():
    """decode_all reuses its unpackers: one that read a frame cut short is not reused, so no byte of
    a refused frame is read as part of the next."""
    from bats.common.protocol import decode_all

    ask, beat = encode("ask", n=1), encode("heartbeat")
    for _ in range(10):
        with pytest.raises(ProtocolError):
            decode_all(ask + beat + ask[:-1], WORKER_TYPES)
        with pytest.raises(ProtocolError):
            decode_all(ask + b"\x81", WORKER_TYPES)
        assert [m["type"] for m in decode_all(beat + ask + ask, WORKER_TYPES)] == ["heartbeat", "ask", "ask"]
        assert [m["n"] for m in decode_all(ask + encode("ask", n=7), WORKER_TYPES)] == [1, 7]
