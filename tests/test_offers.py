"""Seed 002's offer composition (master/core/offers/compose.py): Table I exactly, and every policy on random
offers assigns the whole bag, never more than an offer holds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bats.master.core.offers.compose import Offer, compose, offers_no_lb, offers_with_dplb, offers_with_plb

TABLE_I = [Offer("1", 256, 40), Offer("1", 512, 100), Offer("2", 128, 40), Offer("2", 512, 200),
           Offer("3", 64, 40), Offer("3", 512, 200)]


def test_table_i_offers_no_lb():
    """512 tasks, deadline 40: not (256, 40)1 with the others finishing by 200, but (128, 40)2,
    (64, 40)3 and 320 tasks of (512, 100)1, done by 100."""
    chosen = offers_no_lb(TABLE_I, 512, 40)
    assert chosen.assigned == {"2": 128, "3": 64, "1": 320} and chosen.completion == 100
    assert chosen.offers == (Offer("2", 128, 40), Offer("3", 64, 40), Offer("1", 512, 100))
    assert compose(TABLE_I, 512, 40) == chosen  # the deadline cannot be met: OffersNoLB


def test_plb_and_dplb_when_the_deadline_can_be_met():
    offers = [Offer("a", 300, 40), Offer("b", 100, 40), Offer("c", 100, 40), Offer("a", 400, 90)]
    plb = offers_with_plb(offers, 250, 40)  # shares 300:100:100 of 250
    assert plb.assigned == {"a": 150, "b": 50, "c": 50} and plb.completion == 40
    assert compose(offers, 250, 40) == plb
    dplb = offers_with_dplb(offers, 250, 40, {"a": 10, "b": 30, "c": 10})
    # the 100-task group gets 2/5 of the bag (100 tasks), split 3:1 by capacity: 75 and 25
    assert dplb.assigned == {"a": 150, "b": 75, "c": 25}
    assert compose(offers, 250, 40, {"a": 10, "b": 30, "c": 10}) == dplb


def test_no_composite_covers_the_bag():
    assert offers_no_lb([Offer("a", 10, 5), Offer("b", 20, 50)], 100, 10) is None
    with pytest.raises(ValueError):
        compose([], 0, 10)


offer_lists = st.lists(st.tuples(st.sampled_from("abcde"), st.integers(1, 600), st.integers(1, 300)),
                       min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(raw=offer_lists, n_tasks=st.integers(1, 600), deadline=st.integers(1, 300),
       capacity=st.one_of(st.none(), st.dictionaries(st.sampled_from("abcde"), st.integers(1, 64), min_size=1)))
def test_property_never_more_than_offered_never_less_than_the_bag(raw, n_tasks, deadline, capacity):
    offers = [Offer(p, t, float(d)) for p, t, d in raw]
    chosen = compose(offers, n_tasks, deadline, capacity)
    if chosen is None:
        return
    assert sum(chosen.assigned.values()) == n_tasks
    biggest = {}
    for o in chosen.offers:
        biggest[o.pool] = max(biggest.get(o.pool, 0), o.tasks)
    for pool, n in chosen.assigned.items():
        assert 0 < n <= biggest[pool]
    if chosen.policy != "OffersNoLB":
        assert chosen.completion <= deadline


@settings(max_examples=200, deadline=None)
@given(raw=offer_lists, n_tasks=st.integers(1, 600))
def test_property_no_lb_finds_a_composite_whenever_the_pools_can_hold_the_bag(raw, n_tasks):
    offers = [Offer(p, t, float(d)) for p, t, d in raw]
    largest = {}
    for o in offers:
        largest[o.pool] = max(largest.get(o.pool, 0), o.tasks)
    chosen = offers_no_lb(offers, n_tasks, 0.0)
    if any(size >= n_tasks for size in largest.values()):
        assert chosen is not None and sum(chosen.assigned.values()) == n_tasks
