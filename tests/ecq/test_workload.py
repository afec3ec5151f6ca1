"""The workload generators (ecq/evaluation/workload.py): seeded, prefixes of each other, and every
template a valid query set that the shared engine and the baseline agree on."""

from __future__ import annotations

import pytest

from ecq.engine import Engine
from ecq.evaluation.baseline import SeparateEngine
from ecq.evaluation.workload import (
    FAMILIES,
    TEMPLATES,
    Workload,
    condition_queries,
    credit_card_workload,
    events,
    family_queries,
    sequence_queries,
    template_queries,
)

SMALL = Workload(n_queries=30, n_sources=8, n_classes=6, source_gap=300.0, n_attrs=3)


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_registers_and_both_engines_agree(template: str) -> None:
    queries = template_queries(SMALL, template)
    assert len(queries) == SMALL.n_queries
    assert len({name for name, _ in queries}) == len(queries)
    shared, separate = Engine(), SeparateEngine()
    for name, text in queries:
        shared.register(name, text)
        separate.register(name, text)
    stream = list(events(SMALL, 600))
    got = [(m.query, m.seq) for m in shared.process(stream)]
    assert got == [(m.query, m.seq) for m in separate.process(list(events(SMALL, 600)))]
    if template not in ("neg-trailing",):
        # Every family finds matches on the small, dense workload (trailing negation
        # waits for its window to close: the stream is too short for some).
        assert got


def test_templates_share_the_sequence_templates_classes_and_windows() -> None:
    seq = sequence_queries(SMALL)
    assert condition_queries(SMALL, 0) == seq
    for template in set(FAMILIES.values()) - {"seq", "cnj3", "cnj-sum"}:
        for (_, plain), (_, other) in zip(seq, template_queries(SMALL, template), strict=True):
            assert plain.split("WITHIN")[1] == other.split("WITHIN")[1]
            classes = plain.split("WITH ")[1].split(" WHERE")[0].split(", ")
            if template == "kleene-count":  # a count threshold of the middle class alone
                classes = classes[1:2]
            assert all(c in other for c in classes)


def test_conditions_read_one_attribute_per_condition_and_component() -> None:
    for n in (1, 3):
        for _, text in condition_queries(SMALL, n):
            where = text.split("WHERE [symbol] ")[1].split(" WITHIN")[0]
            conds = where.split(" AND ")
            assert len(conds) == 3 * n
            assert {c.split(".")[1].split(" ")[0] for c in conds} == {f"a{j}" for j in range(n)}


def test_attributes_do_not_change_the_stream() -> None:
    bare = [(e.src, e.type, e.start) for e in events(Workload(n_sources=5), 200)]
    with_attrs = list(events(Workload(n_sources=5, n_attrs=2), 200))
    assert bare == [(e.src, e.type, e.start) for e in with_attrs]
    assert all(set(e.attrs) == {"a0", "a1"} for e in with_attrs)
    assert all(isinstance(v, float) and 0 <= v < 100 for e in with_attrs for v in e.attrs.values())
    assert not any(e.attrs for e in events(Workload(n_sources=5), 50))


def test_query_sets_are_prefixes_of_larger_ones() -> None:
    for template in TEMPLATES:
        small = template_queries(SMALL, template)
        large = template_queries(Workload(n_queries=60, n_sources=8, n_classes=6, n_attrs=3), template)
        assert large[: len(small)] == small


def test_unknown_templates_and_too_short_sequences_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown template 'nonsense'"):
        template_queries(SMALL, "nonsense")
    with pytest.raises(ValueError, match="unknown template 'cnj'"):
        template_queries(SMALL, "cnj")
    with pytest.raises(ValueError, match="at least 3 steps"):
        family_queries(Workload(n_steps=2), "kleene")


def test_the_credit_card_workload_is_seeded() -> None:
    q1, e1 = credit_card_workload(n_cards=20, n_queries=10, n_events=100)
    q2, e2 = credit_card_workload(n_cards=20, n_queries=10, n_events=100)
    assert q1 == q2
    assert [e.to_dict() for e in e1] == [e.to_dict() for e in e2]
