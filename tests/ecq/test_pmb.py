"""Partial matching blocks: which queries' partial matches an instance extends, with the
latest start of each (PMB reduction for the first position), and the merges that keep
the groups disjoint and latest first."""

from __future__ import annotations

import pytest

from ecq.structures.pmb import PMB, merge_latest, resolve_latest

Q1, Q2, Q3, Q4 = 1, 2, 4, 8


def test_the_first_position_is_reduced_to_the_instances_own_start() -> None:
    pmb = PMB(Q1 | Q3, None)
    assert pmb.latest(0, Q1, 10.0) == 10.0
    assert pmb.latest(0, Q3, 7.5) == 7.5
    assert pmb.latest(0, Q2, 10.0) is None
    assert pmb.latest(1, Q1, 10.0) is None  # a reduced entry is only for position 0
    assert pmb.size() == 1


def test_later_positions_give_the_latest_start_of_each_query() -> None:
    pmb = PMB(0, {1: [(8.0, Q1 | Q2), (3.0, Q3)], 2: [(5.0, Q1)]})
    pmb._check()
    assert pmb.latest(1, Q2, 99.0) == 8.0
    assert pmb.latest(1, Q3, 99.0) == 3.0
    assert pmb.latest(2, Q1, 99.0) == 5.0
    assert pmb.latest(2, Q2, 99.0) is None
    assert pmb.latest(3, Q1, 99.0) is None
    assert pmb.size() == 3


def test_extends_asks_for_a_start_inside_the_window() -> None:
    pmb = PMB(Q1, {1: [(4.0, Q2)]})
    assert pmb.extends(0, Q1, bound=6.0, start=6.0)
    assert not pmb.extends(0, Q1, bound=6.5, start=6.0)
    assert pmb.extends(1, Q2, bound=4.0, start=9.0)
    assert not pmb.extends(1, Q2, bound=4.1, start=9.0)
    assert not pmb.extends(1, Q1, bound=0.0, start=9.0)


def test_resolve_keeps_each_query_with_its_latest_start_only() -> None:
    groups = [(3.0, Q1 | Q2), (7.0, Q2), (5.0, Q3), (7.0, Q4), (1.0, Q1 | Q3)]
    assert resolve_latest(groups) == [(7.0, Q2 | Q4), (5.0, Q3), (3.0, Q1)]
    assert resolve_latest([(2.0, Q1)]) == [(2.0, Q1)]
    assert resolve_latest([]) == []


def test_merge_folds_new_groups_in_latest_first_and_disjoint() -> None:
    groups = [(6.0, Q1), (4.0, Q2 | Q3)]
    merge_latest(groups, [(5.0, Q2), (4.0, Q4)], cutoff=0.0)
    assert groups == [(6.0, Q1), (5.0, Q2), (4.0, Q3 | Q4)]
    PMB(0, {1: groups})._check()


def test_a_newer_start_wins_over_an_older_one_of_the_same_query() -> None:
    groups = [(6.0, Q1 | Q2)]
    merge_latest(groups, [(9.0, Q2), (2.0, Q1)], cutoff=0.0)
    assert groups == [(9.0, Q2), (6.0, Q1)]


def test_merge_drops_groups_older_than_the_cutoff() -> None:
    groups = [(6.0, Q1), (2.0, Q2)]
    merge_latest(groups, [(3.0, Q3), (1.0, Q4)], cutoff=2.5)
    assert groups == [(6.0, Q1), (3.0, Q3)]
    merge_latest(groups, [], cutoff=6.0)  # a group at the cutoff stays
    assert groups == [(6.0, Q1)]
    merge_latest(groups, [], cutoff=7.0)
    assert groups == []


def test_the_check_catches_groups_that_share_a_query() -> None:
    with pytest.raises(AssertionError):
        PMB(0, {1: [(5.0, Q1 | Q2), (3.0, Q2)]})._check()
