"""The events a session fed its core, and what the core answered: ``STATE_DIR/events.msgpack``.

How this works. The core is a pure function of its construction and the events it is fed (time and
randomness come in with them, :mod:`..core.base`), so a run's decisions can be taken again away
from its machines: ``bats-sim --replay STATE_DIR`` (:mod:`..sim.replay`) builds a fresh core the way
the session built its own and feeds it the same events, and a difference in any answer is a bug
that a unit test can now hold. The server appends one record per event it feeds (:class:`EventLog`),
buffered and written with each journal commit; a session starts with a header record that says how
its core was built (the seed, the choice, the settings, the finished tasks of a resumed run, the
slots each cluster was found to have).

Compactly: every record is a msgpack array; an event or action is ``[type, field, ...]`` in its
dataclass's field order (an option or an offer inside one the same way), and the task output a
``TaskFinished`` carries is left out (its tail is journaled with the result; the core only passes
it on to ``RecordResult``, whose output is left out too). A record is ``["event", event, [action,
...]]``; a header ``["session", n, settings]``. A damaged or truncated file ends the replay with a
one-line error naming the file and the record.

The log is a diagnostic: a write that fails (a full disk) is logged once and ends the log, never
the run.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, get_args

import msgpack

from ..core.actions import Action, RecordResult
from ..core.bats.settings import Choice
from ..core.events import Event, TaskFinished
from ..core.offers.compose import Offer
from ..core.option import Odds, Option

log = logging.getLogger(__name__)

EVENTS_NAME = "events.msgpack"
_TYPES: dict[str, type] = {cls.__name__: cls for cls in (*get_args(Event), *get_args(Action), Option, Odds, Offer, Choice)}


class EventLogError(Exception):
    """The events file cannot be read (one line: the file and the record)."""


_OUTPUT = ("stdout", "stderr")  # what TaskFinished and RecordResult carry that the log leaves out


def _flattener(name: str, cls: type) -> Callable[[Any], list[Any]]:
    """For one recorded type, a function that gives an instance as ``[name, field, ...]`` (task
    output written empty), its fields read by one ``attrgetter`` (a single C call)."""
    fields = [f.name for f in dataclasses.fields(cls)]
    output = cls in (TaskFinished, RecordResult)
    if not fields:
        return lambda _value: [name]
    if len(fields) == 1:
        one = operator.attrgetter(fields[0])
        return lambda value: [name, one(value)]
    get = operator.attrgetter(*fields)
    if not output:
        return lambda value: [name, *get(value)]
    places = [index + 1 for index, field in enumerate(fields) if field in _OUTPUT]

    def flat(value: Any) -> list[Any]:
        row = [name, *get(value)]
        for index in places:  # the output is left out (a reference was read, never a copy)
            row[index] = b""
        return row

    return flat


# per recorded type, how an instance is written; everything else is msgpack's own (a type neither
# knows, an enum or a set, ends the log: see EventLog.record)
_FLAT: dict[type, Callable[[Any], list[Any]]] = {cls: _flattener(name, cls) for name, cls in _TYPES.items()}


def _default(value: Any) -> Any:
    """msgpack's hook for a value it cannot pack itself: a dataclass of :data:`_TYPES` as ``[type,
    field, ...]`` (its fields then packed the same way, recursively, by msgpack)."""
    flat = _FLAT.get(type(value))
    if flat is None:
        raise TypeError(f"{type(value).__name__} is not recorded in the events file")
    return flat(value)


def _packer() -> msgpack.Packer:
    """The events file's packer: plain values as msgpack packs them, the core's dataclasses through
    :func:`_default`. Once per event a run feeds its core, so the walk over the values is msgpack's (in
    C), with one Python call per dataclass."""
    return msgpack.Packer(use_bin_type=True, default=_default)


def decode(value: Any) -> Any:
    """A record's value as it was before :func:`_default` flattened it (msgpack arrays read as tuples)."""
    if isinstance(value, tuple):
        if value and isinstance(value[0], str) and value[0] in _TYPES:
            cls = _TYPES[value[0]]
            return cls(*(decode(v) for v in value[1:]))
        return tuple(decode(v) for v in value)
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value


def without_output(item: Any) -> Any:
    """An event or action with the task output it carries left out (see the module docstring)."""
    if isinstance(item, (TaskFinished, RecordResult)) and (item.stdout or item.stderr):
        return dataclasses.replace(item, stdout=b"", stderr=b"")
    return item


class EventLog:
    """Appends a session's records to ``STATE_DIR/events.msgpack``; see the module docstring."""

    def __init__(self, path: Path, file: BinaryIO) -> None:
        self.path = path
        self._file: BinaryIO | None = file
        self._packer = _packer()
        self._buffer: list[bytes] = []

    @classmethod
    def open(cls, state_dir: str | Path, session: int, settings: dict[str, Any]) -> EventLog:
        """Open the state dir's events file for appending and write the session's header."""
        path = Path(state_dir) / EVENTS_NAME
        log_ = cls(path, open(path, "ab"))  # noqa: SIM115 (kept open for the session)
        log_._buffer.append(log_._packer.pack(["session", session, settings]))
        log_.flush()
        return log_

    def record(self, event: Event, actions: list[Action]) -> None:
        if self._file is None:
            return
        try:  # the event and its actions flattened here, what they hold by msgpack's hook: a call less each
            flat = _FLAT
            self._buffer.append(self._packer.pack(
                ("event", flat[type(event)](event), [flat[type(action)](action) for action in actions])))
        except KeyError as exc:
            log.error("%s: event %s cannot be recorded (%s is not recorded in the events file); the events log "
                      "ends here", self.path, type(event).__name__, exc.args[0].__name__)
            self.close()
        except (TypeError, ValueError) as exc:  # a type the log does not know: a diagnostic, never the run's end
            log.error("%s: event %s cannot be recorded (%s); the events log ends here", self.path,
                      type(event).__name__, exc)
            self.close()

    def flush(self) -> None:
        if self._file is None or not self._buffer:
            return
        data, self._buffer = b"".join(self._buffer), []
        try:
            self._file.write(data)
            self._file.flush()
        except OSError as exc:
            log.error("%s: cannot be written (%s); the run goes on without its events log", self.path,
                      exc.strerror or exc)
            self.close()

    def close(self) -> None:
        self.flush()
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass


def read(path: Path) -> Iterator[tuple[int, Any, Any]]:
    """Every record of an events file as ``(index, kind, payload)``: ``("session", (n, settings))`` or
    ``("event", (event, actions))``, decoded. :class:`EventLogError` on a damaged file."""
    index, end = -1, 0
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            unpacker = msgpack.Unpacker(f, use_list=False, raw=False, strict_map_key=False,
                                        max_buffer_size=64 << 20)
            for index, record in enumerate(unpacker):
                end = unpacker.tell()  # where the next record starts
                try:
                    kind = record[0]
                    if kind == "session":
                        yield index, kind, (int(record[1]), decode(record[2]))
                    elif kind == "event":
                        yield index, kind, (decode(record[1]), [decode(a) for a in record[2]])
                    else:
                        raise ValueError(f"unknown record {kind!r}")
                except (TypeError, ValueError, IndexError, KeyError) as exc:
                    raise EventLogError(f"{path}: record {index}: {exc}") from None
            if end < size:
                raise EventLogError(f"{path}: record {index + 1}: cut short (the file ends inside it)")
    except OSError as exc:
        raise EventLogError(f"{path}: {exc.strerror or exc}") from None
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as exc:
        raise EventLogError(f"{path}: damaged ({exc})") from None
