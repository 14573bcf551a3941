"""How many machines a cluster samples on (bats.master.core.bats.sampling.sampling_machines): the paper's
seven where an ATU is longer than a minute, fewer billed by the second or minute (each pays its boot
for no task), and always what the operator set."""

from __future__ import annotations

from bats.master.core.bats.sampling import sampling_machines


def test_hourly_clusters_sample_on_the_papers_seven():
    assert sampling_machines(3600.0, 31, 2) == 7
    assert sampling_machines(600.0, 31, 5) == 7


def test_per_second_and_per_minute_clusters_sample_on_one_machine_per_five_tasks_of_their_share():
    # a sample of 31: 7 replicated tasks on every cluster plus 24 shared by the clusters
    assert sampling_machines(1.0, 31, 2) == 4  # 7 + 12 = 19 tasks
    assert sampling_machines(60.0, 31, 5) == 3  # 7 + 4.8 = 11.8 tasks
    assert sampling_machines(1.0, 7, 3) == 2  # the replicated tasks alone: never fewer than two


def test_the_operators_count_wins():
    assert sampling_machines(1.0, 31, 2, configured=7) == 7
    assert sampling_machines(3600.0, 31, 2, configured=2) == 2
