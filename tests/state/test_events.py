"""The events log (bats.master.state.events): every event and action round-trips, task output is left
out, and a damaged file is one line naming it."""

from __future__ import annotations

import dataclasses

import pytest

from bats.master import core as c
from bats.master.core.offers.compose import Offer
from bats.master.core.option import Odds, Option
from bats.master.state.events import EVENTS_NAME, EventLog, EventLogError, read

OPTION = Option(2, "fastest", {"a": 3, "b": 0}, 120.5, 2, 9.0, 0.5, 9.0, -1, "", True, ("cheapest",))


def test_every_event_and_action_round_trips_without_task_output(tmp_path):
    events = [c.RunStarted(0.0), c.MachineAcquired(1.0, "a1", "a"), c.MachineUp(2.0, "a1", 4),
              c.TaskFinished(3.5, "a1", 7, 1, 0, 1.25, False, True, b"out", b"err"),
              c.ScheduleChosen(4.0, OPTION, True), c.OffersMade(5.0, (Offer("p", 3, 10.0),)), c.Tick(6.0)]
    actions = [c.Dispatch("a1", 7, 1), c.RecordResult(7, "done", "a1", 1, 0, 1.25, False, b"out", b"err"),
               c.OfferOptions((OPTION,), 30, {"a": (10.0, 1.0)}, {"a": (9.0, 11.0)}), c.Finish("done", "ok")]
    log = EventLog.open(tmp_path, 1, {"seed": 5, "finished": {3: "done"}, "choice": c.Notify("x")})
    for event in events:
        log.record(event, actions)
    log.close()
    records = list(read(tmp_path / EVENTS_NAME))
    assert records[0] == (0, "session", (1, {"seed": 5, "finished": {3: "done"}, "choice": c.Notify("x")}))
    fed = [payload for _i, kind, payload in records[1:]]
    assert fed[3][0] == c.TaskFinished(3.5, "a1", 7, 1, 0, 1.25, False, True, b"", b"")
    assert [e for e, _a in fed] == [events[0], events[1], events[2], fed[3][0], *events[4:]]
    assert fed[0][1][1] == c.RecordResult(7, "done", "a1", 1, 0, 1.25, False, b"", b"")
    assert fed[0][1][2] == actions[2] and fed[0][1][0] == actions[0]


def test_a_damaged_file_is_one_line_naming_it(tmp_path):
    log = EventLog.open(tmp_path, 1, {"seed": 1})
    log.record(c.Tick(1.0), [c.WakeAt(2.0)])
    log.close()
    path = tmp_path / EVENTS_NAME
    path.write_bytes(path.read_bytes() + b"\x92\xa5event\x93")  # a record cut short, then junk
    with pytest.raises(EventLogError, match=r"events.msgpack: record 2: ") as err:
        list(read(path))
    assert "\n" not in str(err.value)


def test_an_option_with_its_odds_round_trips(tmp_path):
    option = dataclasses.replace(OPTION, odds=Odds(100.0, 130.0, 9.0, 11.5, 200))
    log = EventLog.open(tmp_path, 1, {"seed": 1})
    log.record(c.ScheduleChosen(1.0, option, True), [c.OfferOptions((option,), 3, {}, {})])
    log.close()
    (_i, _kind, (event, actions)) = list(read(tmp_path / EVENTS_NAME))[1]
    assert event.option == option and actions[0].options == (option,)


def test_a_value_the_log_cannot_record_ends_the_log_not_the_run(tmp_path, caplog):
    @dataclasses.dataclass(frozen=True)
    class Stranger:
        x: int

    log = EventLog.open(tmp_path, 1, {"seed": 1})
    log.record(c.Tick(1.0), [c.WakeAt(2.0)])
    log.record(c.Tick(2.0), [Stranger(1)])  # type: ignore[list-item]
    log.record(c.Tick(3.0), [c.WakeAt(4.0)])  # the log has ended: nothing more is written
    log.close()
    assert [kind for _i, kind, _p in read(tmp_path / EVENTS_NAME)] == ["session", "event"]
    assert "cannot be recorded" in caplog.text


def test_a_record_is_the_documented_arrays_byte_for_byte(tmp_path):
    """The file's format, written out by hand: ``["event", [type, field, ...], [[type, field, ...], ...]]``,
    task output empty, nested dataclasses the same way (logs of earlier sessions must still replay)."""
    import msgpack

    option = dataclasses.replace(OPTION, odds=Odds(100.0, 130.0, 9.0, 11.5, 200))
    event = c.TaskFinished(3.5, "a1", 7, 1, 0, 1.25, False, True, b"out", b"err")
    actions = [c.RecordResult(7, "done", "a1", 1, 0, 1.25, False, b"out", b"err"), c.Dispatch("a1", 8, 1),
               c.OfferOptions((option,), 3, {"a": (1.0, 2.0)}, {})]
    log = EventLog.open(tmp_path, 2, {"seed": 1, "choice": c.Notify("x")})
    log.record(event, actions)
    log.close()

    def flat(value):
        if dataclasses.is_dataclass(value):
            return [type(value).__name__, *(b"" if f.name in ("stdout", "stderr") else flat(getattr(value, f.name))
                                             for f in dataclasses.fields(value))]
        if isinstance(value, (list, tuple)):
            return [flat(v) for v in value]
        if isinstance(value, dict):
            return {k: flat(v) for k, v in value.items()}
        return value

    expected = (msgpack.packb(["session", 2, {"seed": 1, "choice": flat(c.Notify("x"))}], use_bin_type=True)
                + msgpack.packb(["event", flat(event), flat(actions)], use_bin_type=True))
    assert (tmp_path / EVENTS_NAME).read_bytes() == expected
