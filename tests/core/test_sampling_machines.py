"""How many machines a cluster samples on (bats.master.core.bats.sampling.sampling_machines): the paper's
seven where an ATU is longer than a minute, fewer billed by the second or minute (each pays its boot
for no task), and always what the operator set."""

from __future__ import annotations

import pytest

from bats.master.core.bats.sampling import execution_floor, lower_mean, sampling_machines


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


def test_a_cluster_never_samples_on_more_machines_than_its_share_of_tasks():
    assert sampling_machines(1.0, 1, 2) == 1  # a bag of one task: one copy on each cluster
    assert sampling_machines(60.0, 2, 3) == 2


def test_the_executions_low_estimate_is_the_tasks_left_at_the_least_money_a_task_costs():
    # a: 10 s at $0.01 a second (0.1 a task), b: 800 s at $0.1 (80 a task); a cluster with no mean yet is left out
    assert execution_floor(700, {"a": (10.0, 0.01), "b": (800.0, 0.1), "c": (0.0, 0.001)}) == pytest.approx(70.0)
    assert execution_floor(700, {"c": (0.0, 0.001)}) is None


def test_a_mean_from_below_counts_a_running_task_by_the_time_it_has_run():
    assert lower_mean(3000.0, 300, [0.0, 0.0]) == pytest.approx(3000.0 / 302)
    assert lower_mean(2000.0, 2, [500.0]) == pytest.approx(2500.0 / 3)
    assert lower_mean(0.0, 0, []) == 0.0
