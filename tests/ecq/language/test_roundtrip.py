"""Property tests: every valid AST survives text and JSON round trips."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.errors import ParseError
from ecq.language import (
    Agg,
    Arith,
    AttrRef,
    BoolOp,
    Compare,
    Component,
    Conj,
    Disj,
    Equiv,
    Expr,
    Func,
    InList,
    Kleene,
    Lit,
    Neg,
    Not,
    Pattern,
    Query,
    ReturnItem,
    Seq,
    format_query,
    from_json,
    parse_query,
    to_json,
)
from ecq.language.keywords import NO_OP_EQUIVS, RESERVED

# ---------------------------------------------------------------------- names

_word = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}(-[A-Za-z0-9_]{1,3})?", fullmatch=True)
names = _word.filter(lambda w: w.upper() not in RESERVED)
class_names = st.one_of(
    names, names.map(lambda n: "@" + n), st.sampled_from(["SHELF-READING", "CNMA_A", "Sequence"])
)
refs = st.one_of(names, st.integers(1, 12).map(lambda i: f"$x{i}"), names.map(lambda n: "@" + n))
# Attributes may be any word, keywords included (they follow a '.').
attrs = st.one_of(_word, st.sampled_from(["where", "in", "and", "start", "end", "price"]))
free_names = st.one_of(names, st.text(max_size=8), st.sampled_from(["WHERE", "and", "it's", "a b"]))

# ----------------------------------------------------------------- expressions

numbers = st.one_of(st.integers(-(10**20), 10**20), st.floats(allow_nan=False, allow_infinity=False))
literals = st.builds(Lit, st.one_of(numbers, st.text(max_size=10), st.booleans()))
equivs = st.builds(
    Equiv,
    attrs.filter(lambda a: a.lower() not in NO_OP_EQUIVS),
    st.none() | literals,
)
aggs = st.one_of(
    st.builds(Agg, st.just("count"), refs, st.none() | attrs),
    st.builds(Agg, st.sampled_from(["sum", "avg", "min", "max"]), refs, attrs),
)
leaves = st.one_of(literals, st.builds(AttrRef, refs, attrs), aggs, equivs)


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.builds(Arith, st.sampled_from(["+", "-", "*", "/"]), children, children),
        st.builds(Neg, children),
        st.builds(Compare, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), children, children),
        st.builds(
            BoolOp, st.sampled_from(["and", "or"]), st.lists(children, min_size=2, max_size=4).map(tuple)
        ),
        st.builds(Not, children),
        st.builds(InList, children, st.lists(children, max_size=3).map(tuple)),
        st.builds(Func, st.just("abs"), st.lists(children, max_size=2).map(tuple)),
    )


exprs = st.recursive(leaves, _extend, max_leaves=12)

# -------------------------------------------------------------------- patterns


@st.composite
def components(draw: st.DrawFn, depth: int) -> Component:
    if depth > 0 and draw(st.integers(0, 3)) == 0:
        base = Component(sub=draw(patterns(depth - 1)))
    elif draw(st.booleans()):
        base = Component(classes=(draw(class_names),))
    else:
        base = Component(classes=tuple(draw(st.lists(class_names, min_size=1, max_size=3))), any_of=True)
    kleene = draw(
        st.none()
        | st.builds(Kleene, st.integers(1, 9), st.booleans())
        | st.integers(1, 9).flatmap(
            lambda m: st.builds(Kleene, st.just(m), st.just(False), st.integers(m + 1, 12))
        )
    )
    negated = draw(st.booleans())
    # first: / last: (a syntactic form: the parser takes it on any component but a
    # negated one; the compiler says where it means something).
    select = None if negated else draw(st.none() | st.sampled_from(("first", "last")))
    return dataclasses.replace(base, negated=negated, kleene=kleene, alias=draw(st.none() | names), select=select)


@st.composite
def patterns(draw: st.DrawFn, depth: int = 2) -> Pattern:
    """Patterns the parser accepts: its structural rules are applied as fix-ups."""
    kinds: list[type[Seq] | type[Conj] | type[Disj]] = [Seq, Conj, Disj]
    cls = draw(st.sampled_from(kinds))
    comps = draw(st.lists(components(depth), min_size=1, max_size=4))
    comps = [dataclasses.replace(c, kleene=None) if c.negated else c for c in comps]
    if cls is Seq:
        for i in range(1, len(comps)):
            if comps[i - 1].negated and comps[i].negated:
                comps[i] = dataclasses.replace(comps[i], negated=False)
    if cls is not Disj and all(c.negated for c in comps):
        comps[0] = dataclasses.replace(comps[0], negated=False)
    if cls is Seq:
        last = max(i for i, c in enumerate(comps) if not c.negated)
        comps[last] = dataclasses.replace(comps[last], kleene=None)
    pattern: Pattern = cls(tuple(comps))
    return pattern


queries = st.builds(
    Query,
    pattern=patterns(),
    where=st.none() | exprs,
    within=st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False),
    mode=st.sampled_from(["recent", "all"]),
    returns=st.lists(st.builds(ReturnItem, exprs, st.none() | free_names), max_size=3).map(tuple),
    probability=st.none() | st.floats(min_value=0, max_value=1),
    name=st.none() | free_names,
)

# ----------------------------------------------------------------------- tests

_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(queries)
def test_text_round_trip_gives_the_same_ast(query: Query) -> None:
    text = format_query(query)
    assert parse_query(text) == query, text


@_settings
@given(queries)
def test_canonical_text_is_a_fixed_point(query: Query) -> None:
    text = format_query(query)
    assert format_query(parse_query(text)) == text


@_settings
@given(queries)
def test_json_round_trip_gives_the_same_ast(query: Query) -> None:
    data = json.loads(json.dumps(to_json(query)))
    assert from_json(data) == query


@_settings
@given(exprs)
def test_any_expression_round_trips_as_a_where_clause(expr: Expr) -> None:
    query = Query(pattern=Seq((Component(classes=("A",)),)), where=expr)
    assert parse_query(format_query(query)).where == expr


@_settings
@given(queries)
def test_spans_point_at_real_tokens_of_the_text(query: Query) -> None:
    text = format_query(query)
    lines = text.splitlines()
    spans = parse_query(text).spans
    assert spans  # every query has a pattern, at least
    for key, (line, column, token) in spans.items():
        assert lines[line - 1][column - 1 :].startswith(token), key


_soup = st.lists(
    st.sampled_from(
        "SEQ AND OR ANY ( ) , ; & | ! + ^ { } [ ] . = < <= != - * / $20 $x1 20% 3 1.5 'a' \"b\" A B b "
        "@q WHERE WITHIN MODE ALL RETURN AS PROBABILITY >= QUERY PATTERN NOT IN BETWEEN symbol "
        "Sequence WITH count abs s hours \n -- ∧ ∨ ¬".split(" ")
    ),
    max_size=25,
).map(" ".join)


@_settings
@given(st.one_of(_soup, st.text(max_size=40)))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    try:
        query = parse_query(text)
    except ParseError as err:
        assert err.line >= 1 and err.column >= 1
        assert err.excerpt.endswith("^")
        assert err.token == "" or err.token in text
    else:
        assert parse_query(format_query(query)) == query
