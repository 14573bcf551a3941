"""bats.master.state.leftovers: what a crashed session left running is charged in the journal (the
end-to-end cases, with moto's EC2, are in tests/provisioners/test_ec2.py)."""

from __future__ import annotations

import pytest

from bats.common.config import ClusterConfig, Config, MasterConfig
from bats.master.state.journal import Journal
from bats.master.state.leftovers import bill_leftovers


def config() -> Config:
    return Config(master=MasterConfig(), clusters={
        "a": ClusterConfig("a", "ec2", max=4, price=0.5, atu_s=60.0),
        "b": ClusterConfig("b", "ec2", max=4, price=1.0, atu_s=60.0)})


@pytest.fixture
def journal(tmp_path):
    with Journal.create(tmp_path / "run", "r1", {}) as j:
        yield j


def test_a_known_machine_is_charged_until_now_and_an_unknown_one_from_its_intent(journal):
    journal.add_session(1000.0)
    journal.record_machine("a-1", "a", 1, 1000.0, 1001.0, None, 3, 30.0, 50.0, 1, 0.5, "up")
    journal.set_meta("acquiring", [{"session": 1, "cluster": "a", "n": 1, "asked_at": 1100.0},
                                   {"session": 1, "cluster": "b", "n": 2, "asked_at": 1150.0}])
    journal.flush()
    journal.add_session(1300.0)
    # cluster a answered (its known machine and one launched but never journaled); b did not answer
    added = bill_leftovers(journal, config(), {"a": {"i-1": "a-1", "i-2": "a-2"}}, now=1300.0, before_session=2)
    rows = {row["machine_id"]: row for row in journal.machines()}
    assert (rows["a-1"]["atus"], rows["a-1"]["cost"], rows["a-1"]["released_at"]) == (5, 2.5, 1300.0)  # 300 s
    assert (rows["a-2"]["session"], rows["a-2"]["acquired_at"], rows["a-2"]["atus"], rows["a-2"]["cost"]) == (
        1, 1100.0, 4, 2.0)  # 200 s from the asking
    assert rows["a-2"]["state"] == "gone" and rows["a-2"]["nt"] == 0
    assert added == pytest.approx(2.0 + 2.0)
    # a's intent is closed; b's stays for the clean-up that reaches its cloud
    assert journal.meta["acquiring"] == [{"session": 1, "cluster": "b", "n": 2, "asked_at": 1150.0}]


def test_without_an_intent_a_stranger_is_charged_from_the_last_earlier_session(journal):
    journal.add_session(1000.0)
    journal.add_session(2000.0)
    journal.add_session(2600.0)
    bill_leftovers(journal, config(), {"b": {"i-9": ""}}, now=2600.0, before_session=3)
    (row,) = journal.machines()
    assert (row["machine_id"], row["session"], row["acquired_at"], row["atus"], row["cost"]) == (
        "i-9", 2, 2000.0, 10, 10.0)


def test_nothing_found_changes_nothing(journal):
    journal.add_session(1000.0)
    assert bill_leftovers(journal, config(), {"a": {}, "b": {}}, now=1500.0, before_session=2) == 0.0
    assert journal.machines() == []
