"""The parser: every piece of docs/semantics.md §2 syntax, the papers' examples, and errors."""

from __future__ import annotations

from typing import Any

import pytest

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
    Func,
    InList,
    Kleene,
    Lit,
    Neg,
    Not,
    Query,
    ReturnItem,
    Seq,
    format_query,
    parse_queries,
    parse_query,
)

# --------------------------------------------------------------------- helpers


def c(*classes: str, **kw: object) -> Component:
    return Component(classes=classes, **kw)  # type: ignore[arg-type]


def sub(pattern: Seq | Conj | Disj, **kw: object) -> Component:
    return Component(sub=pattern, **kw)  # type: ignore[arg-type]


def seq(*items: str | Component) -> Seq:
    return Seq(tuple(c(i) if isinstance(i, str) else i for i in items))


def conj(*items: str | Component) -> Conj:
    return Conj(tuple(c(i) if isinstance(i, str) else i for i in items))


def disj(*items: str | Component) -> Disj:
    return Disj(tuple(c(i) if isinstance(i, str) else i for i in items))


def a(ref: str, attr: str) -> AttrRef:
    return AttrRef(ref, attr)


def where(text: str) -> Any:
    return parse_query(f"PATTERN A WHERE {text}").where


def error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_query(text)
    return info.value


# ------------------------------------------------------------ papers' examples

SEMANTICS_EXAMPLES = [
    """PATTERN Sequence WITH CNMA_A, RSTR_B, BAR_C
WHERE [symbol] $20 < CNMA_A.payment < $50 AND $80 < RSTR_B.payment < $120 AND BAR_C.payment < $50
WITHIN 5 hours""",
    """PATTERN Conjunction WITH BRND_A, BRND_B, BRND_C
WHERE [symbol] BRND_A.payment + BRND_B.payment + BRND_C.payment < $200
WITHIN 1.5 hours""",
    """SEQ(SHELF-READING, !COUNTER-READING, EXIT-READING) WHERE [id] WITHIN 3 hours""",
    """SEQ(SHELF-READING, SHELF-READING, !ANY(COUNTER-READING, SHELF-READING))
WHERE [id] AND $x1.shelf_id != $x2.shelf_id AND $x1.shelf_id = $x3.shelf_id WITHIN 1 hour""",
    """PATTERN IBM; !Sun; Oracle WITHIN 200 units""",
    """PATTERN IBM; Sun; Oracle; Google WHERE Oracle.price > Sun.price AND Oracle.price > Google.price WITHIN 100 units""",  # noqa: E501
]


@pytest.mark.parametrize("text", SEMANTICS_EXAMPLES)
def test_every_semantics_example_parses_verbatim_and_round_trips(text: str) -> None:
    query = parse_query(text)
    assert parse_query(format_query(query)) == query


def test_scemon_card_payment_example_gives_the_expected_ast() -> None:
    query = parse_query(SEMANTICS_EXAMPLES[0])
    assert query == Query(
        pattern=seq("CNMA_A", "RSTR_B", "BAR_C"),
        where=BoolOp(
            "and",
            (
                Compare("<", Lit(20), a("CNMA_A", "payment")),
                Compare("<", a("CNMA_A", "payment"), Lit(50)),
                Compare("<", Lit(80), a("RSTR_B", "payment")),
                Compare("<", a("RSTR_B", "payment"), Lit(120)),
                Compare("<", a("BAR_C", "payment"), Lit(50)),
            ),
        ),
        within=5 * 3600.0,
    )


def test_scemon_brand_example_gives_the_expected_ast() -> None:
    query = parse_query(SEMANTICS_EXAMPLES[1])
    total = Arith("+", Arith("+", a("BRND_A", "payment"), a("BRND_B", "payment")), a("BRND_C", "payment"))
    assert query == Query(
        pattern=conj("BRND_A", "BRND_B", "BRND_C"), where=Compare("<", total, Lit(200)), within=5400.0
    )


def test_sase_rfid_examples_give_the_expected_asts() -> None:
    shoplifting = parse_query(SEMANTICS_EXAMPLES[2])
    assert shoplifting == Query(
        pattern=seq("SHELF-READING", c("COUNTER-READING", negated=True), "EXIT-READING"),
        where=Equiv("id"),
        within=3 * 3600.0,
    )
    misplaced = parse_query(SEMANTICS_EXAMPLES[3])
    assert misplaced.pattern == seq(
        "SHELF-READING",
        "SHELF-READING",
        c("COUNTER-READING", "SHELF-READING", negated=True, any_of=True),
    )
    assert misplaced.where == BoolOp(
        "and",
        (
            Equiv("id"),
            Compare("!=", a("$x1", "shelf_id"), a("$x2", "shelf_id")),
            Compare("=", a("$x1", "shelf_id"), a("$x3", "shelf_id")),
        ),
    )
    assert misplaced.within == 3600.0


def test_zstream_stock_examples_give_the_expected_asts() -> None:
    assert parse_query(SEMANTICS_EXAMPLES[4]) == Query(
        pattern=seq("IBM", c("Sun", negated=True), "Oracle"), within=200.0
    )
    query = parse_query(SEMANTICS_EXAMPLES[5])
    assert query.pattern == seq("IBM", "Sun", "Oracle", "Google")
    assert query.where == BoolOp(
        "and",
        (
            Compare(">", a("Oracle", "price"), a("Sun", "price")),
            Compare(">", a("Oracle", "price"), a("Google", "price")),
        ),
    )
    assert query.within == 100.0


# --------------------------------------------------------------- surface forms


@pytest.mark.parametrize(
    "texts",
    [
        ["PATTERN Sequence WITH A, B, C WITHIN 5 s", "SEQ(A, B, C) WITHIN 5 s", "A; B; C WITHIN 5 s"],
        ["PATTERN Conjunction WITH A, B, C WITHIN 5 s", "AND(A, B, C) WITHIN 5 s", "A & B & C WITHIN 5 s"],
        ["PATTERN Disjunction WITH A, B, C", "OR(A, B, C)", "A | B | C"],
        [
            "PATTERN Sequence WITH A a, !B, ANY(C, D) c, E WITHIN 1 min",
            "EVENT SEQ(A a, !B, ANY(C, D) c, E) WITHIN 60",
            "PATTERN A a; !B; ANY(C, D) c; E WITHIN 60 s",
        ],
    ],
)
def test_the_three_surface_forms_give_equal_asts(texts: list[str]) -> None:
    first, *others = [parse_query(t) for t in texts]
    for other in others:
        assert other == first


def test_surface_forms_give_the_pattern_kind_written() -> None:
    assert parse_query("A; B; C WITHIN 5 s").pattern == seq("A", "B", "C")
    assert parse_query("A & B & C WITHIN 5 s").pattern == conj("A", "B", "C")
    assert parse_query("A | B | C").pattern == disj("A", "B", "C")


def test_keywords_are_case_insensitive() -> None:
    lower = parse_query("pattern sequence with A, B where A.x > 1 and not B.y = 2 within 5 S mode all")
    upper = parse_query("PATTERN Sequence WITH A, B WHERE A.x > 1 AND NOT B.y = 2 WITHIN 5 s MODE ALL")
    assert lower == upper
    assert parse_query("seq(A, b) within 1 HOURS").pattern == seq("A", "b")


def test_pattern_and_event_keywords_are_optional() -> None:
    expected = parse_query("PATTERN SEQ(A, B) WITHIN 1")
    assert parse_query("EVENT SEQ(A, B) WITHIN 1") == expected
    assert parse_query("SEQ(A, B) WITHIN 1") == expected
    assert parse_query("A; B WITHIN 1") == expected


# ------------------------------------------------------------------- patterns


def test_a_single_component_is_a_sequence_of_one() -> None:
    assert parse_query("PATTERN A").pattern == Seq((Component(("A",)),))
    assert parse_query("PATTERN A a").pattern == seq(c("A", alias="a"))


def test_parentheses_around_the_whole_pattern_are_not_a_sub_pattern() -> None:
    assert parse_query("PATTERN (A; B) WITHIN 1").pattern == seq("A", "B")
    assert parse_query("PATTERN ((A; B)) WITHIN 1").pattern == seq("A", "B")
    assert parse_query("PATTERN (A)").pattern == seq("A")
    assert parse_query("PATTERN SEQ(A)").pattern == seq("A")


def test_parentheses_inside_a_pattern_make_a_sub_pattern_component() -> None:
    assert parse_query("(A; B) & C WITHIN 1").pattern == conj(sub(seq("A", "B")), "C")
    assert parse_query("A; (B) WITHIN 1").pattern == seq("A", sub(seq("B")))


def test_nested_functional_patterns_are_sub_pattern_components() -> None:
    expected = seq("A", sub(conj("B", "C")), "D")
    assert parse_query("SEQ(A, AND(B, C), D) WITHIN 1").pattern == expected
    assert parse_query("A; (B & C); D WITHIN 1").pattern == expected
    assert parse_query("PATTERN Sequence WITH A, AND(B, C), D WITHIN 1").pattern == expected
    assert parse_query("SEQ(A, OR(B, SEQ(C, D)) x) WITHIN 1").pattern == seq(
        "A", sub(disj("B", sub(seq("C", "D"))), alias="x")
    )


def test_infix_precedence_is_or_then_and_then_seq() -> None:
    assert parse_query("A; B | C WITHIN 1").pattern == disj(sub(seq("A", "B")), "C")
    assert parse_query("A & B; C WITHIN 1").pattern == conj("A", sub(seq("B", "C")))
    assert parse_query("A | B & C WITHIN 1").pattern == disj("A", sub(conj("B", "C")))
    assert parse_query("A; B & C | D; E WITHIN 1").pattern == disj(
        sub(conj(sub(seq("A", "B")), "C")), sub(seq("D", "E"))
    )


def test_infix_operators_of_one_level_are_flattened() -> None:
    assert parse_query("A; B; C; D WITHIN 1").pattern == seq("A", "B", "C", "D")
    assert parse_query("A; (B; C) WITHIN 1").pattern == seq("A", sub(seq("B", "C")))


def test_items_of_functional_patterns_may_be_infix_patterns() -> None:
    assert parse_query("SEQ(A, B | C, D) WITHIN 1").pattern == seq("A", sub(disj("B", "C")), "D")


def test_negated_components() -> None:
    assert parse_query("SEQ(A, !B, C) WITHIN 1").pattern == seq("A", c("B", negated=True), "C")
    assert parse_query("SEQ(!B, A, C) WITHIN 1").pattern == seq(c("B", negated=True), "A", "C")
    assert parse_query("SEQ(A, C, !B b) WITHIN 1").pattern == seq("A", "C", c("B", negated=True, alias="b"))
    assert parse_query("SEQ(A, !ANY(B, C), D) WITHIN 1").pattern == seq(
        "A", c("B", "C", negated=True, any_of=True), "D"
    )
    assert parse_query("A; !(B; C); D WITHIN 1").pattern == seq("A", sub(seq("B", "C"), negated=True), "D")


def test_any_is_one_component_with_several_classes() -> None:
    assert parse_query("SEQ(A, ANY(B, C) x) WITHIN 1").pattern == seq(
        "A", c("B", "C", any_of=True, alias="x")
    )
    assert parse_query("PATTERN ANY(B)").pattern == seq(c("B", any_of=True))


@pytest.mark.parametrize(
    ("written", "kleene"),
    [
        ("B+", Kleene(1, False)),
        ("B^5", Kleene(5, True)),
        ("B^1", Kleene(1, True)),
        ("B{3}", Kleene(3, True)),
        ("B{2,}", Kleene(2, False)),
        ("B{1,}", Kleene(1, False)),
    ],
)
def test_kleene_closure_forms(written: str, kleene: Kleene) -> None:
    assert parse_query(f"A; {written}; C WITHIN 1").pattern == seq("A", c("B", kleene=kleene), "C")


def test_sase_array_alias_is_the_alias() -> None:
    assert parse_query("SEQ(A a, B+ b[], C c) WITHIN 1").pattern == seq(
        c("A", alias="a"), c("B", kleene=Kleene(1, False), alias="b"), c("C", alias="c")
    )


def test_kleene_and_alias_apply_to_sub_patterns() -> None:
    assert parse_query("SEQ(A, (B; C)+ g, D) WITHIN 1").pattern == seq(
        "A", sub(seq("B", "C"), kleene=Kleene(1, False), alias="g"), "D"
    )


def test_class_names_may_contain_dashes_and_underscores() -> None:
    assert parse_query("SEQ(SHELF-READING s, CNMA_A, EXIT-READING-2) WITHIN 1").pattern == seq(
        c("SHELF-READING", alias="s"), "CNMA_A", "EXIT-READING-2"
    )


def test_derived_class_reference_starts_with_at() -> None:
    query = parse_query("SEQ(@big_spend b, A) WHERE @big_spend.total > 3 WITHIN 1")
    assert query.pattern == seq(c("@big_spend", alias="b"), "A")
    assert query.where == Compare(">", a("@big_spend", "total"), Lit(3))


def test_a_class_may_be_named_like_a_scemon_word() -> None:
    assert parse_query("PATTERN Sequence").pattern == seq("Sequence")
    assert parse_query("Sequence; Conjunction WITHIN 1").pattern == seq("Sequence", "Conjunction")


# ------------------------------------------------------------------ conditions


def test_attribute_references() -> None:
    assert where("a.x = Class.y") == Compare("=", a("a", "x"), a("Class", "y"))
    assert where("$x2.price > 1") == Compare(">", a("$x2", "price"), Lit(1))
    assert where("SHELF-READING.shelf_id = 1") == Compare("=", a("SHELF-READING", "shelf_id"), Lit(1))


def test_literals() -> None:
    assert where("a.x = 12") == Compare("=", a("a", "x"), Lit(12))
    assert where("a.x = 1.5") == Compare("=", a("a", "x"), Lit(1.5))
    assert where("a.x = 2e-3") == Compare("=", a("a", "x"), Lit(0.002))
    assert where("a.x = 'text'") == Compare("=", a("a", "x"), Lit("text"))
    assert where('a.x = "text"') == Compare("=", a("a", "x"), Lit("text"))
    assert where("a.x = true") == Compare("=", a("a", "x"), Lit(True))
    assert where("a.x = FALSE") == Compare("=", a("a", "x"), Lit(False))
    assert where("a.x = $20") == Compare("=", a("a", "x"), Lit(20))
    assert where("a.x = $20.5") == Compare("=", a("a", "x"), Lit(20.5))
    assert where("a.x = 20%") == Compare("=", a("a", "x"), Lit(0.2))


def test_currency_and_positional_references_are_told_apart() -> None:
    assert where("$x1.p > $20") == Compare(">", a("$x1", "p"), Lit(20))


def test_string_escapes() -> None:
    assert where(r"a.x = 'it\'s \"q\" \\ \n\t\u00e9'") == Compare("=", a("a", "x"), Lit('it\'s "q" \\ \n\té'))
    assert where('a.x = "it\'s"') == Compare("=", a("a", "x"), Lit("it's"))


def test_comparison_operators_and_synonyms() -> None:
    for op in ("=", "!=", "<", "<=", ">", ">="):
        assert where(f"a.x {op} 1") == Compare(op, a("a", "x"), Lit(1))
    assert where("a.x == 1") == Compare("=", a("a", "x"), Lit(1))
    assert where("a.x <> 1") == Compare("!=", a("a", "x"), Lit(1))


def test_chained_comparison_is_an_and_of_comparisons() -> None:
    assert where("$20 < CNMA_A.payment < $50") == BoolOp(
        "and",
        (Compare("<", Lit(20), a("CNMA_A", "payment")), Compare("<", a("CNMA_A", "payment"), Lit(50))),
    )
    assert where("1 < a.x <= a.y < 9") == BoolOp(
        "and",
        (
            Compare("<", Lit(1), a("a", "x")),
            Compare("<=", a("a", "x"), a("a", "y")),
            Compare("<", a("a", "y"), Lit(9)),
        ),
    )


def test_chained_comparisons_and_between_join_the_surrounding_and() -> None:
    assert where("1 < a.x < 2 AND a.y BETWEEN 3 AND 4") == BoolOp(
        "and",
        (
            Compare("<", Lit(1), a("a", "x")),
            Compare("<", a("a", "x"), Lit(2)),
            Compare(">=", a("a", "y"), Lit(3)),
            Compare("<=", a("a", "y"), Lit(4)),
        ),
    )


def test_between_is_an_and_of_two_comparisons() -> None:
    assert where("a.x BETWEEN 1 AND a.y + 1") == BoolOp(
        "and",
        (Compare(">=", a("a", "x"), Lit(1)), Compare("<=", a("a", "x"), Arith("+", a("a", "y"), Lit(1)))),
    )
    assert where("a.x NOT BETWEEN 1 AND 2") == Not(
        BoolOp("and", (Compare(">=", a("a", "x"), Lit(1)), Compare("<=", a("a", "x"), Lit(2))))
    )


def test_in_list() -> None:
    assert where("a.s IN ('x', 'y', 3)") == InList(a("a", "s"), (Lit("x"), Lit("y"), Lit(3)))
    assert where("a.s NOT IN ('x')") == Not(InList(a("a", "s"), (Lit("x"),)))


def test_arithmetic_precedence_and_associativity() -> None:
    x, y, z = a("a", "x"), a("a", "y"), a("a", "z")
    assert where("a.x + a.y * a.z > 0").left == Arith("+", x, Arith("*", y, z))
    assert where("a.x - a.y - a.z > 0").left == Arith("-", Arith("-", x, y), z)
    assert where("(a.x + a.y) / a.z > 0").left == Arith("/", Arith("+", x, y), z)


def test_minus_inside_a_name_versus_minus_with_spaces() -> None:
    assert where("a.x - b.y > 0") == Compare(">", Arith("-", a("a", "x"), a("b", "y")), Lit(0))
    assert where("a.x-b > 0") == Compare(">", a("a", "x-b"), Lit(0))


def test_unary_minus() -> None:
    assert where("-a.x > -5") == Compare(">", Neg(a("a", "x")), Lit(-5))
    assert where("a.x > -(5)") == Compare(">", a("a", "x"), Neg(Lit(5)))
    assert where("a.x > - -a.y") == Compare(">", a("a", "x"), Neg(Neg(a("a", "y"))))
    assert where("a.x > -$20") == Compare(">", a("a", "x"), Lit(-20))


def test_boolean_operators_flatten_chains_but_not_parentheses() -> None:
    p, q, r = (Compare("=", a("a", n), Lit(1)) for n in "pqr")
    assert where("a.p = 1 AND a.q = 1 AND a.r = 1") == BoolOp("and", (p, q, r))
    assert where("a.p = 1 OR a.q = 1 OR a.r = 1") == BoolOp("or", (p, q, r))
    assert where("(a.p = 1 AND a.q = 1) AND a.r = 1") == BoolOp("and", (BoolOp("and", (p, q)), r))
    assert where("a.p = 1 OR a.q = 1 AND a.r = 1") == BoolOp("or", (p, BoolOp("and", (q, r))))
    assert where("NOT a.p = 1 AND a.q = 1") == BoolOp("and", (Not(p), q))
    assert where("NOT (a.p = 1 OR a.q = 1)") == Not(BoolOp("or", (p, q)))


def test_unicode_boolean_operators() -> None:
    assert where("a.p = 1 ∧ ¬ a.q = 1 ∨ a.r = 1") == where("a.p = 1 AND NOT a.q = 1 OR a.r = 1")


def test_functions_and_aggregates() -> None:
    assert where("abs(a.x - a.y) < 3").left == Func("abs", (Arith("-", a("a", "x"), a("a", "y")),))
    assert where("count(b) >= 2").left == Agg("count", "b", None)
    for func in ("sum", "avg", "min", "max"):
        assert where(f"{func}(b.price) > 1").left == Agg(func, "b", "price")
    assert where("COUNT(b) > 1").left == Agg("count", "b", None)


def test_equivalence_tests() -> None:
    assert where("[id]") == Equiv("id")
    assert where("[id, shelf]") == BoolOp("and", (Equiv("id"), Equiv("shelf")))
    assert where("[color='red']") == Equiv("color", Lit("red"))
    assert where("[n = -3, id]") == BoolOp("and", (Equiv("n", Lit(-3)), Equiv("id")))


def test_symbol_and_src_equivalences_are_dropped() -> None:
    assert where("[symbol]") is None
    assert where("[src]") is None
    assert where("[symbol] AND [src]") is None
    assert where("[symbol, id]") == Equiv("id")
    assert where("[symbol] AND a.x = 1") == Compare("=", a("a", "x"), Lit(1))


def test_a_condition_may_directly_follow_an_equivalence_test() -> None:
    assert where("[symbol] $20 < X.p < $50 AND Y.q > 1") == BoolOp(
        "and",
        (
            Compare("<", Lit(20), a("X", "p")),
            Compare("<", a("X", "p"), Lit(50)),
            Compare(">", a("Y", "q"), Lit(1)),
        ),
    )
    assert where("[id] a.x = 1") == BoolOp("and", (Equiv("id"), Compare("=", a("a", "x"), Lit(1))))
    assert where("[id] -5 < a.x") == BoolOp("and", (Equiv("id"), Compare("<", Lit(-5), a("a", "x"))))
    assert where("[id] [shelf]") == BoolOp("and", (Equiv("id"), Equiv("shelf")))


def test_an_equivalence_test_used_as_a_value_needs_parentheses() -> None:
    assert where("([id]) = true") == Compare("=", Equiv("id"), Lit(True))


def test_comments_run_to_the_end_of_the_line() -> None:
    query = parse_query("PATTERN A; B -- the two events\nWITHIN 5 s -- five seconds\n-- done")
    assert query == Query(pattern=seq("A", "B"), within=5.0)


# --------------------------------------------------------------------- clauses


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("5", 5.0),
        ("1.5", 1.5),
        ("250 ms", 0.25),
        ("5 s", 5.0),
        ("5s", 5.0),
        ("5 sec", 5.0),
        ("5 secs", 5.0),
        ("1 second", 1.0),
        ("5 seconds", 5.0),
        ("2 min", 120.0),
        ("2 mins", 120.0),
        ("1 minute", 60.0),
        ("2 minutes", 120.0),
        ("2 h", 7200.0),
        ("1 hour", 3600.0),
        ("1.5 hours", 5400.0),
        ("1 day", 86400.0),
        ("2 days", 172800.0),
        ("200 units", 200.0),
        ("3 HOURS", 10800.0),
    ],
)
def test_durations_are_in_seconds(written: str, seconds: float) -> None:
    within = parse_query(f"A; B WITHIN {written}").within
    assert within == seconds
    assert isinstance(within, float)


def test_mode() -> None:
    assert parse_query("A; B WITHIN 1").mode == "recent"
    assert parse_query("A; B WITHIN 1 MODE RECENT").mode == "recent"
    assert parse_query("A; B WITHIN 1 MODE all").mode == "all"


def test_return_items_with_and_without_names() -> None:
    query = parse_query(
        "SEQ(A a, B+ b[], C) WITHIN 1 RETURN a.x AS ax, count(b), sum(b.p) / 2 AS 'avg price'"
    )
    assert query.returns == (
        ReturnItem(a("a", "x"), "ax"),
        ReturnItem(Agg("count", "b", None)),
        ReturnItem(Arith("/", Agg("sum", "b", "p"), Lit(2)), "avg price"),
    )


def test_probability() -> None:
    assert parse_query("A; B WITHIN 1 PROBABILITY >= 0.75").probability == 0.75
    assert parse_query("A; B WITHIN 1 PROBABILITY >= 1").probability == 1.0
    assert parse_query("A; B WITHIN 1 PROBABILITY >= 90%").probability == 0.9


def test_query_name() -> None:
    assert parse_query("QUERY fraud-1 PATTERN A").name == "fraud-1"
    assert parse_query("QUERY 'two words' PATTERN A").name == "two words"
    assert parse_query("PATTERN A").name is None


def test_clauses_may_come_in_any_order() -> None:
    expected = parse_query("A a; B WHERE a.x > 1 WITHIN 5 s MODE ALL RETURN a.x PROBABILITY >= 0.5")
    assert parse_query("A a; B PROBABILITY >= 0.5 MODE ALL RETURN a.x WITHIN 5 s WHERE a.x > 1") == expected


def test_a_full_query_gives_the_expected_ast() -> None:
    text = """
    QUERY bar_hopping
    PATTERN SEQ(RSTR_B r, BAR_C+ b[], CNMA_A c)
    WHERE count(b) >= 2 AND b.payment > r.payment
    WITHIN 4 hours
    MODE ALL
    RETURN count(b) AS bars, sum(b.payment) AS spent
    PROBABILITY >= 0.5
    """
    assert parse_query(text) == Query(
        pattern=seq(
            c("RSTR_B", alias="r"), c("BAR_C", kleene=Kleene(1, False), alias="b"), c("CNMA_A", alias="c")
        ),
        where=BoolOp(
            "and",
            (
                Compare(">=", Agg("count", "b", None), Lit(2)),
                Compare(">", a("b", "payment"), a("r", "payment")),
            ),
        ),
        within=4 * 3600.0,
        mode="all",
        returns=(
            ReturnItem(Agg("count", "b", None), "bars"),
            ReturnItem(Agg("sum", "b", "payment"), "spent"),
        ),
        probability=0.5,
        name="bar_hopping",
    )


def test_parse_queries_reads_several_named_queries() -> None:
    text = """
    -- two queries
    QUERY first
    PATTERN A; B WITHIN 5 s

    QUERY second PATTERN C WHERE C.x > 1
    """
    queries = parse_queries(text)
    assert [q.name for q in queries] == ["first", "second"]
    assert queries[0].pattern == seq("A", "B")
    assert queries[1].where == Compare(">", a("C", "x"), Lit(1))
    assert parse_queries("  -- nothing\n") == []


def test_parse_queries_reads_the_example_file() -> None:
    from pathlib import Path

    path = Path(__file__).parents[3] / "examples" / "queries.txt"
    queries = parse_queries(path.read_text())
    assert len(queries) >= 1
    assert all(q.name for q in queries)


# ----------------------------------------------------------------------- spans


def test_spans_locate_components_expressions_and_clauses() -> None:
    text = "SEQ(A a, !B, SEQ(C, D) s)\nWHERE a.x > 1 AND abs(a.y) IN (2, 3)\nWITHIN 5 s MODE ALL\nRETURN -a.x AS n\nPROBABILITY >= 0.5"  # noqa: E501
    spans = parse_query(text).spans
    assert spans["pattern.items[0]"] == (1, 5, "A")
    assert spans["pattern.items[1]"] == (1, 10, "!")
    assert spans["pattern.items[2]"] == (1, 14, "SEQ")
    assert spans["pattern.items[2].sub.items[1]"] == (1, 21, "D")
    assert spans["where"] == (2, 15, "AND")
    assert spans["where.operands[0]"] == (2, 11, ">")
    assert spans["where.operands[0].left"] == (2, 7, "a")
    assert spans["where.operands[0].right"] == (2, 13, "1")
    assert spans["where.operands[1]"] == (2, 28, "IN")
    assert spans["where.operands[1].operand"] == (2, 19, "abs")
    assert spans["where.operands[1].operand.args[0]"] == (2, 23, "a")
    assert spans["where.operands[1].values[1]"] == (2, 35, "3")
    assert spans["within"] == (3, 1, "WITHIN")
    assert spans["mode"] == (3, 12, "MODE")
    assert spans["return[0].expr"] == (4, 8, "-")
    assert spans["return[0].expr.operand"] == (4, 9, "a")
    assert spans["probability"] == (5, 1, "PROBABILITY")


def test_spans_are_not_part_of_equality() -> None:
    assert parse_query("A;B WITHIN 1") == parse_query("A ;\n   B\nWITHIN 1")


# ---------------------------------------------------------------------- errors


def test_error_carries_line_column_token_and_caret_excerpt() -> None:
    err = error("PATTERN SEQ(A, B\nWITHIN 5 s")
    assert (err.line, err.column, err.token) == (2, 1, "WITHIN")
    assert err.excerpt == "WITHIN 5 s\n^"
    assert "expected ',' or ')' after component" in err.message
    assert "line 2, column 1" in str(err)


def test_unbalanced_parentheses() -> None:
    err = error("SEQ(A, (B; C) WITHIN 1")
    assert (err.line, err.column, err.token) == (1, 15, "WITHIN")
    err = error("SEQ(A, B)) WITHIN 1")
    assert (err.line, err.column, err.token) == (1, 10, ")")
    err = error("PATTERN A WHERE (A.x > 1")
    assert (err.line, err.column, err.token) == (1, 25, "")
    assert err.excerpt == "PATTERN A WHERE (A.x > 1\n                        ^"


def test_missing_pattern() -> None:
    err = error("PATTERN WHERE A.x > 1")
    assert (err.line, err.column, err.token) == (1, 9, "WHERE")
    assert "expected a pattern" in err.message
    err = error("")
    assert (err.line, err.column, err.token) == (1, 1, "")


def test_unknown_duration_unit() -> None:
    err = error("A; B\nWITHIN 2 fortnights")
    assert err.message.startswith("unknown duration unit 'fortnights'")
    assert (err.line, err.column, err.token) == (2, 10, "fortnights")
    assert err.excerpt == "WITHIN 2 fortnights\n         ^"


def test_missing_or_negative_duration() -> None:
    assert error("A; B WITHIN hours").token == "hours"
    assert error("A; B WITHIN -5 s").token == "-"
    assert error("A; B WITHIN").token == ""


def test_two_negations_in_a_row() -> None:
    err = error("SEQ(A, !!B, C) WITHIN 1")
    assert (err.line, err.column, err.token) == (1, 9, "!")


def test_adjacent_negated_components_in_a_sequence() -> None:
    err = error("SEQ(A, !B, !C) WITHIN 1")
    assert (err.line, err.column, err.token) == (1, 12, "!")
    assert "adjacent negated" in err.message
    assert error("A; !B; !C WITHIN 1").column == 8


def test_negation_as_the_only_component() -> None:
    err = error("PATTERN !B")
    assert (err.line, err.column, err.token) == (1, 9, "!")
    assert "only component" in err.message
    assert error("AND(!A, !B) WITHIN 1").column == 5


def test_kleene_as_the_last_component_of_a_sequence() -> None:
    # Every Kleene form may end a sequence or stand alone (docs/semantics.md §6).
    assert parse_query("SEQ(A, B+) WITHIN 1").pattern.items[1].kleene == Kleene(1, False)
    assert parse_query("SEQ(A, B{2,}, !C) WITHIN 1").pattern.items[1].kleene == Kleene(2, False)
    assert parse_query("A; B^3 WITHIN 1").pattern.items[1].kleene == Kleene(3, True)
    assert parse_query("PATTERN FAIL{5} WITHIN 60").pattern.items[0].kleene == Kleene(5, True)


def test_kleene_upper_bounds() -> None:
    assert parse_query("SEQ(A, B{2,4}, C) WITHIN 1").pattern.items[1].kleene == Kleene(2, False, 4)
    assert parse_query("SEQ(A, B{,3}, C) WITHIN 1").pattern.items[1].kleene == Kleene(1, False, 3)
    # {n,n} is {n}: exactly n, sliding.
    assert parse_query("SEQ(A, B{2,2}, C) WITHIN 1").pattern.items[1].kleene == Kleene(2, True)
    err = error("SEQ(A, B{3,2}, C) WITHIN 1")
    assert err.token == "2" and "at least its lower bound" in err.message
    assert error("SEQ(A, B{,0}, C) WITHIN 1").token == "0"


def test_negated_kleene_component() -> None:
    assert error("SEQ(A, !B+, C) WITHIN 1").token == "+"


def test_bad_kleene_counts() -> None:
    assert error("SEQ(A, B^0, C) WITHIN 1").token == "0"
    assert error("SEQ(A, B{2,x}, C) WITHIN 1").token == "x"
    assert error("SEQ(A, B^x, C) WITHIN 1").token == "x"


def test_bad_mode() -> None:
    err = error("A; B WITHIN 1 MODE FIRST")
    assert (err.line, err.column, err.token) == (1, 20, "FIRST")
    assert "RECENT or ALL" in err.message


def test_trailing_garbage() -> None:
    err = error("A; B WITHIN 1 s extra")
    assert (err.line, err.column, err.token) == (1, 17, "extra")
    err = error("A; B WITHIN 1 s )")
    assert err.token == ")"


def test_duplicate_clause() -> None:
    err = error("A; B WITHIN 1 WITHIN 2")
    assert (err.column, err.token) == (15, "WITHIN")


def test_a_second_query_needs_parse_queries() -> None:
    err = error("QUERY a PATTERN A\nQUERY b PATTERN B")
    assert (err.line, err.column, err.token) == (2, 1, "QUERY")


def test_parse_queries_needs_query_names() -> None:
    with pytest.raises(ParseError) as info:
        parse_queries("PATTERN A")
    assert (info.value.line, info.value.column, info.value.token) == (1, 1, "PATTERN")


def test_condition_errors() -> None:
    assert error("PATTERN A WHERE").token == ""
    assert error("PATTERN A WHERE A.x >").token == ""
    assert error("PATTERN A WHERE A > 1").token == ">"
    assert error("PATTERN A WHERE foo(A.x) > 1").token == "foo"
    assert error("PATTERN A WHERE sum(b) > 1").token == ")"
    assert error("PATTERN A WHERE A.x BETWEEN 1 2").token == "2"
    assert error("PATTERN A WHERE A.x IN 1, 2").token == "1"
    assert error("PATTERN A WHERE [symbol] OR A.x = 1").token == "["
    assert error("PATTERN A WHERE [] ").token == "]"
    assert error("PATTERN A WHERE [id] + 1").token == "+"
    assert error("PATTERN A WHERE A.x = 1 AND WITHIN 5").token == "WITHIN"


def test_lexical_errors() -> None:
    err = error("PATTERN A WHERE A.x = 'open")
    assert (err.line, err.column, err.token) == (1, 23, "'open")
    err = error("PATTERN A WHERE A.x = 3 # 4")
    assert (err.column, err.token) == (25, "#")
    assert error("PATTERN A WHERE $y.x = 1").token == "$"
    assert error("PATTERN A WHERE A.x = 'a\\qb'").token == "\\q"
    assert error("PATTERN A WHERE $x1a.p = 1").token == "$x1a"


def test_probability_out_of_range() -> None:
    err = error("A; B WITHIN 1 PROBABILITY >= 1.5")
    assert (err.column, err.token) == (30, "1.5")
    assert error("A; B WITHIN 1 PROBABILITY > 0.5").token == ">"


def test_reserved_words_are_not_class_names_or_aliases() -> None:
    assert error("SEQ(A, WHERE) WITHIN 1").token == "WHERE"
    assert error("SEQ(A, B) SEQ").token == "SEQ"


def test_caret_lines_up_under_tabs() -> None:
    err = error("PATTERN A\n\tWHERE A.x >> 1")
    assert (err.line, err.column) == (2, 13)
    assert err.excerpt == "\tWHERE A.x >> 1\n\t           ^"


# --------------------------------------------------------------------- printer


def test_canonical_text_uses_the_functional_form() -> None:
    query = parse_query(
        "QUERY q A a; !B; ANY(C, D) c; E+ e; (F & G)^3; H{2,}; I WHERE a.x > 1 WITHIN 1.5 hours"
    )
    assert format_query(query) == (
        "QUERY q\n"
        "PATTERN SEQ(A a, !B, ANY(C, D) c, E+ e, AND(F, G)^3, H{2,}, I)\n"
        "WHERE a.x > 1\n"
        "WITHIN 5400 s\n"
        "MODE RECENT"
    )


def test_canonical_text_of_a_filter_is_the_bare_component() -> None:
    assert format_query(parse_query("SEQ(A)")) == "PATTERN A\nMODE RECENT"


def test_canonical_text_parenthesises_only_where_needed() -> None:
    query = parse_query(
        "PATTERN A WHERE (a.x + a.y) * -a.z > 2 - (3 - 4) AND (a.p = 1 OR NOT a.q IN (1, 2)) "
        'RETURN -(5), [id] AS e, "it\'s" AS s PROBABILITY >= 0.5'
    )
    assert format_query(query) == (
        "PATTERN A\n"
        "WHERE (a.x + a.y) * -a.z > 2 - (3 - 4) AND (a.p = 1 OR NOT a.q IN (1, 2))\n"
        "MODE RECENT\n"
        "RETURN -(5), [id] AS e, 'it\\'s' AS s\n"
        "PROBABILITY >= 0.5"
    )


def test_canonical_text_escapes_strings() -> None:
    query = Query(pattern=seq("A"), where=Compare("=", a("A", "s"), Lit("it's\n\\ \x00")), name="my query")
    text = format_query(query)
    assert text.startswith("QUERY 'my query'\n")
    assert "'it\\'s\\n\\\\ \\u0000'" in text
    assert parse_query(text) == query


def test_printer_refuses_asts_without_a_text_form() -> None:
    with pytest.raises(ValueError):
        format_query(Query(pattern=seq("WHERE")))
    with pytest.raises(ValueError):
        format_query(Query(pattern=seq("A"), where=Lit(float("nan"))))
    with pytest.raises(ValueError):
        format_query(Query(pattern=seq("A"), where=BoolOp("and", (Lit(True),))))
