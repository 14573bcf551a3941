"""Which lost machines count against which tasks (:mod:`bats.master.core.losses`)."""

from __future__ import annotations

from bats.master.core.losses import SHARED_WINDOW_S, LossLedger


def test_every_task_a_lost_machine_held_is_a_suspect_and_the_limit_quarantines():
    ledger = LossLedger(limit=2)
    assert ledger.lost(0.0, "m1", [1, 2]) == []  # running or queued: either may have done it
    assert ledger.is_suspect(1) and ledger.is_suspect(2) and not ledger.is_suspect(3)
    assert ledger.lost(5.0, "m2", [2]) == [(2, 2)]
    assert ledger.quarantined == {2} and ledger.counts[1] == 1


def test_a_poison_task_killing_machine_after_machine_in_seconds_is_not_a_mass_loss():
    ledger = LossLedger(limit=4)
    quarantined = [ledger.lost(t, f"m{t}", [7]) for t in range(4)]
    assert quarantined == [[], [], [], [(7, 4)]]


def test_machines_lost_together_count_against_none_of_their_tasks():
    ledger = LossLedger(limit=2)
    for round_at in (0.0, 10 * SHARED_WINDOW_S):  # two mass interruptions, far apart
        for k in range(4):
            assert ledger.lost(round_at + k, f"m{round_at}-{k}", [k, 10 + k]) == []
    # the first two of each round were counted until the third came, then taken back
    assert not any(ledger.counts.values()) and not ledger.quarantined


def test_a_mass_loss_does_not_hide_a_task_that_was_on_each_machine_lost():
    ledger = LossLedger(limit=2)
    ledger.lost(0.0, "m1", [1, 5])
    ledger.lost(1.0, "m2", [2])
    ledger.lost(2.0, "m3", [3])  # shared for 1, 2, 3 and 5: taken back
    assert not ledger.is_suspect(1) and not ledger.is_suspect(5)
    ledger.lost(100.0, "m4", [5])
    assert ledger.lost(103.0, "m5", [5]) == [(5, 2)]


def test_two_poison_tasks_at_once_explain_their_own_losses_and_make_no_mass_loss():
    # 40 and 150 take down machine after machine, interleaved, each with an honest task beside it
    ledger = LossLedger(limit=2)
    out = [ledger.lost(0.0, "m1", [40, 1]), ledger.lost(0.5, "m2", [150, 2]), ledger.lost(1.0, "m3", [150]),
           ledger.lost(1.5, "m4", [40])]
    assert out == [[], [], [(150, 2)], [(40, 2)]]
    assert ledger.counts[1] == 1 and ledger.counts[2] == 1  # suspects once, not quarantined
