"""The wire protocol between master and workers (see DESIGN.md, "Protocol").

Transport: the master binds a ZeroMQ ROUTER, every worker connects a DEALER. Each message is one
ZeroMQ frame holding a msgpack map with ``v`` (protocol version) and ``type``. The worker side
sends one frame per message; the ROUTER sees ``[peer identity, frame]``.

Worker -> master
  hello      machine, token, cluster, host, cpus, version     first message on every connection
  ask        n                                                 wants ``n`` more tasks
  result     task, attempt, exit_code, runtime_s, timed_out, stdout, stderr, ask
                                                               ``ask`` asks for the next task too,
                                                               saving a round trip per task
  heartbeat  -                                                 sent when nothing else was sent lately
  bye        reason                                            the worker is leaving
  interruption action, time                                    the cloud will take this machine away
                                                               (a spot interruption notice: action
                                                               terminate/stop/hibernate, at time);
                                                               the master re-queues its tasks
Master -> worker
  welcome    machine, heartbeat_s, liveness_s, prefetch,     answer to hello; the worker runs up
             slots, shell                                      to ``slots`` tasks at once, each with
                                                               ``shell -c COMMAND``, and may hold
                                                               slots + prefetch
  task       task, attempt, command, timeout_s
  wait       -                                                 nothing to hand out right now
  heartbeat  -
  unknown    -                                                 "say hello first" (e.g. master restarted)
  stop       reason                                            finish and exit
  cancel     task, attempt                                     stop this attempt (another copy of the
                                                               task ended first) or drop it from the
                                                               queue, send no result, ask for a task

A frame may also carry several messages packed back to back (a msgpack stream), when a peer has
several ready for the other side at once: one ZeroMQ message then moves a burst of short tasks or
their results. Both sides pack with :func:`frames`, which starts a new frame before one would hold
more than ``MAX_MESSAGES_PER_FRAME`` messages or ``MAX_FRAME_BYTES`` bytes: the limits the receiver
enforces, so a burst for a machine of many slots is never a frame the other side drops. Every frame goes through :func:`decode_all` (or :func:`decode` where exactly one
message is expected), which checks size, version, type and the type and range of each field and
raises :class:`ProtocolError` with a one-line reason; callers log and drop the whole frame. A
frame from a peer that has not said a valid hello is read only as far as its first message
(:func:`decode_first`). No message of this protocol holds an array or a map inside it, so the
decoder refuses both as they come, before the rest of the frame is built: arrays at their header
(``max_array_len=0``), a map inside a message as soon as a second map of that message is complete
(:class:`_Flat`), and a map of more than ``MAX_FIELDS`` fields at its header. A frame built to be
costly to decode (arrays nested 1,000 deep, a million objects) is refused after a few dozen objects;
unknown scalar fields are let through, unread.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

VERSION = 1
MAX_FRAME_BYTES = 1 << 20  # 1 MiB: two 64 KiB output tails plus a command fit comfortably
OUTPUT_TAIL_BYTES = 64 * 1024
MAX_MESSAGES_PER_FRAME = 256
MAX_SLOTS = 1024  # tasks one machine runs at once (the cluster key ``slots``)
MAX_ASK = MAX_SLOTS + 16  # a worker asks at most for its slots and its prefetched tasks
MAX_FIELDS = 32  # fields of one message (a result has 10)


class ProtocolError(ValueError):
    """A frame that is not a valid message of this protocol."""


_STR = (str,)
_INT = (int,)
_NUM = (int, float)
_BOOL = (bool,)
_BLOB = (bytes, str)
_OPT_INT = (int, type(None))
_OPT_NUM = (int, float, type(None))

# type -> {field: accepted python types}; every listed field is required.
SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    # worker -> master
    "hello": {"machine": _STR, "token": _STR, "cluster": _STR, "host": _STR, "cpus": _INT, "version": _STR},
    "ask": {"n": _INT},
    "result": {
        "task": _INT,
        "attempt": _INT,
        "exit_code": _INT,
        "runtime_s": _NUM,
        "timed_out": _BOOL,
        "stdout": _BLOB,
        "stderr": _BLOB,
        "ask": _BOOL,
    },
    "heartbeat": {},
    "bye": {"reason": _STR},
    "interruption": {"action": _STR, "time": _STR},
    # master -> worker
    "welcome": {"machine": _STR, "heartbeat_s": _NUM, "liveness_s": _NUM, "prefetch": _INT,
                "slots": _INT, "shell": _STR},
    "task": {"task": _INT, "attempt": _INT, "command": _STR, "timeout_s": _OPT_NUM},
    "wait": {},
    "unknown": {},
    "stop": {"reason": _STR},
    "cancel": {"task": _INT, "attempt": _INT},
}
# numeric fields whose values must also be sane: (field, lowest, highest); NaN never passes
_ID_MAX = 2**62  # task ids and attempts must fit SQLite's 64-bit integers with room to spare
RANGES: dict[str, tuple[tuple[str, float, float], ...]] = {
    "ask": (("n", 0, MAX_ASK),),
    "result": (("task", 0, _ID_MAX), ("attempt", 0, _ID_MAX), ("exit_code", -1024, 1024),
               ("runtime_s", 0.0, 1e9)),
    "hello": (("cpus", 0, 1 << 20),),
    "task": (("task", 0, _ID_MAX), ("attempt", 0, _ID_MAX), ("timeout_s", 0.0, 1e9)),
    "cancel": (("task", 0, _ID_MAX), ("attempt", 0, _ID_MAX)),
    "welcome": (("heartbeat_s", 0.0, 1e6), ("liveness_s", 0.0, 1e6), ("prefetch", 0, 15),
                ("slots", 1, MAX_SLOTS)),
}
# text fields that end up in log lines, the journal and the summary: one short line each, so a peer
# cannot forge a line of the log (a newline) or flood it
LINE_FIELDS: dict[str, tuple[str, ...]] = {
    "hello": ("machine", "token", "cluster", "host", "version"),
    "bye": ("reason",),
    "interruption": ("action", "time"),
    "stop": ("reason",),
    "welcome": ("shell",),
}
MAX_LINE_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
WORKER_TYPES = frozenset({"hello", "ask", "result", "heartbeat", "bye", "interruption"})
MASTER_TYPES = frozenset({"welcome", "task", "wait", "heartbeat", "unknown", "stop", "cancel"})

# the schema as (field, set of exact types) pairs: one set lookup a field on the hot path
_EXACT_TYPES = {kind: tuple((field, frozenset(types)) for field, types in fields.items())
                for kind, fields in SCHEMAS.items()}
_MISSING = object()

_packer = msgpack.Packer(use_bin_type=True)


class _Flat:
    """The decoder's map hook: the first map completed is the message; a second one before the
    message ends means a map inside it, refused there (maps complete innermost first)."""

    __slots__ = ("maps",)

    def __init__(self) -> None:
        self.maps = 0

    def hook(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.maps += 1
        if self.maps > 1:
            raise ProtocolError("a map inside a message")
        return obj


# what a frame may hold, checked by msgpack as it decodes (see the module docstring)
_LIMITS = {"raw": False, "strict_map_key": True, "use_list": True, "max_array_len": 0, "max_map_len": MAX_FIELDS}


# unpackers of decode_all that read the whole of their last frame, for the next frames to reuse (a list's
# pop and append are atomic, so threads never share one; one that raised is dropped with its state)
_SPARE: list[tuple[msgpack.Unpacker, _Flat]] = []
_SPARES = 4


def encode(msg_type: str, **fields: Any) -> bytes:
    """Pack one message. Field names and types are checked by the receiver, not here."""
    fields["v"] = VERSION
    fields["type"] = msg_type
    return _packer.pack(fields)


def encode_task(task: int, attempt: int, command: str, timeout_s: float | None) -> bytes:
    """``encode("task", ...)`` with its fields given in place: one dict built, not two (once a task)."""
    return _packer.pack({"task": task, "attempt": attempt, "command": command, "timeout_s": timeout_s,
                         "v": VERSION, "type": "task"})


def frames(messages: list[bytes]) -> list[bytes]:
    """Messages (each from :func:`encode`) packed back to back into as few frames as the receiver's
    limits allow: at most ``MAX_MESSAGES_PER_FRAME`` messages and ``MAX_FRAME_BYTES`` bytes a frame
    (a single message larger than that still goes alone: the receiver drops it and says why)."""
    if len(messages) == 1:
        return messages
    out: list[bytes] = []
    start = size = 0
    for index, message in enumerate(messages):
        if index > start and (index - start == MAX_MESSAGES_PER_FRAME or size + len(message) > MAX_FRAME_BYTES):
            out.append(b"".join(messages[start:index]))
            start, size = index, 0
        size += len(message)
    if start < len(messages):
        out.append(messages[start] if start == len(messages) - 1 else b"".join(messages[start:]))
    return out


def decode(frame: bytes, allowed: frozenset[str]) -> dict[str, Any]:
    """Unpack and validate a frame holding exactly one message; raise :class:`ProtocolError`."""
    if len(frame) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(frame)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    try:
        msg = msgpack.unpackb(frame, object_hook=_Flat().hook, **_LIMITS)
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise _undecodable(exc) from None
    return _validate(msg, allowed)


def decode_all(frame: bytes, allowed: frozenset[str]) -> list[dict[str, Any]]:
    """Unpack and validate a frame holding one message or several packed back to back.

    A peer with several messages ready for the other side at once (a burst of short tasks, or
    their results) sends them in one frame: one ZeroMQ message instead of several. Every message
    is validated before any is returned, so a frame with one bad message is dropped whole."""
    if len(frame) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(frame)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    flat = _Flat()
    try:
        return [_validate(msgpack.unpackb(frame, object_hook=flat.hook, **_LIMITS), allowed)]
    except msgpack.ExtraData as more:  # several messages: keep the first, read the rest as a stream
        messages = [_validate(more.unpacked, allowed)]
        rest = more.extra
    except ProtocolError:
        raise
    except Exception as exc:
        raise _undecodable(exc) from None
    try:  # an unpacker left clean by an earlier frame: making one zeroes ~40 KB, as much as decoding ~16 results
        unpacker, flat = _SPARE.pop()
    except IndexError:
        flat = _Flat()
        unpacker = msgpack.Unpacker(object_hook=flat.hook, max_buffer_size=MAX_FRAME_BYTES, **_LIMITS)
    flat.maps = 0
    unpacker.feed(rest)
    checks, append, tell = _CHECKS, messages.append, unpacker.tell
    start = end = tell()  # where the last complete message of the rest ended (the offset counts every frame fed)
    try:
        for msg in unpacker:
            if len(messages) == MAX_MESSAGES_PER_FRAME:
                raise ProtocolError(f"more than {MAX_MESSAGES_PER_FRAME} messages in one frame")
            # _validate's common case inline (a call less a message); anything else goes through it
            if type(msg) is dict and type(kind := msg.get("type")) is str and kind in allowed and checks[kind](msg):
                append(msg)
            else:
                append(_validate(msg, allowed))
            end = tell()
            flat.maps = 0
    except ProtocolError:
        raise
    except Exception as exc:
        raise _undecodable(exc) from None
    if end - start != len(rest):  # the unpacker holds the part read: it is not reused
        raise ProtocolError(f"truncated message at byte {len(frame) - len(rest) + end - start} of the frame")
    if len(_SPARE) < _SPARES:
        _SPARE.append((unpacker, flat))  # every byte fed was read: nothing of this frame reaches the next
    return messages


def decode_first(frame: bytes, allowed: frozenset[str]) -> tuple[dict[str, Any], bool]:
    """The first message of a frame, validated, and whether more follow it; the rest is not read.
    For a peer the master has not admitted: what it sends beyond one message costs nothing."""
    if len(frame) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(frame)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    unpacker = msgpack.Unpacker(object_hook=_Flat().hook, max_buffer_size=MAX_FRAME_BYTES, **_LIMITS)
    unpacker.feed(frame)
    try:
        msg = next(unpacker)
    except StopIteration:
        raise ProtocolError("truncated message at byte 0 of the frame") from None
    except ProtocolError:
        raise
    except Exception as exc:
        raise _undecodable(exc) from None
    return _validate(msg, allowed), unpacker.tell() < len(frame)


def _undecodable(exc: Exception) -> ProtocolError:
    """msgpack's refusal in this protocol's words."""
    text = str(exc)
    if "max_array_len" in text:
        return ProtocolError("an array in a message (no message of this protocol holds one)")
    if "max_map_len" in text:
        return ProtocolError(f"a map of more than {MAX_FIELDS} fields")
    return ProtocolError(f"not a msgpack frame ({type(exc).__name__}: {_short(text)})")


class _Checks(dict[str, Any]):
    """Per message type, one straight-line test that a message of that type is valid: the same tests
    as :func:`_validate`'s loops over the tables above, unrolled (about twice as fast, on every
    result). Each field is read once, into a local the range and line tests then use, and a field
    with one accepted type is tested with ``is`` rather than a set lookup. Only a message it refuses
    goes through the loops, which say what is wrong. Each test is built the first time its type is
    seen (a worker never sees most types)."""

    def __missing__(self, kind: str) -> Any:
        fields = _EXACT_TYPES[kind]
        namespace: dict[str, Any] = {"_M": _MISSING, "_CONTROL": _CONTROL, "VERSION": VERSION}
        tests = ["type(_v := m.get('v')) is int", "_v == VERSION"]
        local = {}
        for index, (field, types) in enumerate(fields):
            local[field] = f"_f{index}"
            if len(types) == 1:
                namespace[f"_t{index}"] = next(iter(types))
                tests.append(f"type(_f{index} := m.get({field!r}, _M)) is _t{index}")
            else:
                namespace[f"_t{index}"] = types
                tests.append(f"type(_f{index} := m.get({field!r}, _M)) in _t{index}")
        for field, low, high in RANGES.get(kind, ()):
            value = local[field]
            if type(None) in dict(fields)[field]:
                tests.append(f"({value} is None or {low!r} <= {value} <= {high!r})")
            else:
                tests.append(f"{low!r} <= {value} <= {high!r}")
        for field in LINE_FIELDS.get(kind, ()):
            value = local[field]
            tests.append(f"len({value}) <= {MAX_LINE_CHARS} and not _CONTROL.search({value})")
        exec(f"def check(m):\n    return ({' and '.join(tests)})\n", namespace)  # noqa: S102 -- from the tables above
        check = self[kind] = namespace["check"]
        return check


_CHECKS = _Checks()


def _validate(msg: Any, allowed: frozenset[str]) -> dict[str, Any]:
    if type(msg) is dict:  # the common case, a valid message: one unrolled test
        kind = msg.get("type")
        if type(kind) is str and kind in allowed and _CHECKS[kind](msg):
            return msg
    if not isinstance(msg, dict):
        raise ProtocolError(f"expected a map, got {type(msg).__name__}")
    version = msg.get("v")
    if type(version) is not int or version != VERSION:  # not True, not 1.0
        raise ProtocolError(f"protocol version {_short(version)} is not {VERSION}")
    msg_type = msg.get("type")
    if not isinstance(msg_type, str) or msg_type not in allowed:
        raise ProtocolError(f"unknown message type {_short(msg_type)}")
    for field, types in _EXACT_TYPES[msg_type]:
        # exact types: msgpack yields plain int/float/str/bytes/bool/None, and bool (an int
        # subclass) must never pass as an int, so True never becomes a task id
        if type(msg.get(field, _MISSING)) not in types:
            if field not in msg:
                raise ProtocolError(f"{msg_type}: missing field {field!r}")
            raise ProtocolError(f"{msg_type}: field {field!r} has type {type(msg[field]).__name__}")
    for field, low, high in RANGES.get(msg_type, ()):
        value = msg[field]
        if value is not None and not low <= value <= high:  # also false for NaN
            raise ProtocolError(f"{msg_type}: field {field!r} out of range [{low}, {high}]")
    for field in LINE_FIELDS.get(msg_type, ()):
        value = msg[field]
        if len(value) > MAX_LINE_CHARS or _CONTROL.search(value):
            raise ProtocolError(f"{msg_type}: field {field!r} is not one line of at most {MAX_LINE_CHARS} "
                                "characters")
    return msg


def _short(value: Any) -> str:
    """A peer's value in an error message: a bounded repr, so a hostile frame cannot flood the log."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_of(blob: bytes | str) -> str:
    """Output tails travel as bytes; show them as text without ever failing."""
    if isinstance(blob, str):
        return blob
    return blob.decode("utf-8", errors="replace")
