"""The cache of query shapes (ecq.language.shapes): a query built from its shape's
template is exactly the query the parser makes of its text (AST, types of its values,
and spans), and a text the parser refuses is refused with the parser's own error."""

from __future__ import annotations

import ast as pyast
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.errors import ParseError
from ecq.language import Query, format_query
from ecq.language.lexer import IDENT, MONEY, NUMBER, PERCENT, STRING, compiled_lexer, tokenize
from ecq.language.parser import parse_queries, parse_queries_fresh, parse_query_fresh, parse_tokens
from ecq.language.shapes import WORDS, ShapeCache, _shape_of, shape_of
from tests.ecq.language.test_roundtrip import queries

LANGUAGE = Path(__file__).resolve().parents[3] / "ecq" / "language"


def outcome(parse: object, text: str) -> tuple[str, object]:
    """What parsing ``text`` gives: the AST's repr (which tells 1 from 1.0 and True) and
    its spans, or the error's message and place."""
    try:
        query = parse(text)  # type: ignore[operator]
    except ParseError as err:
        return ("error", (err.message, err.line, err.column, err.token, err.excerpt))
    if isinstance(query, list):
        return ("queries", [(repr(q), q.spans) for q in query])
    assert isinstance(query, Query)
    return ("query", (repr(query), query.spans))


def fresh_cache() -> ShapeCache:
    return ShapeCache(parse_tokens)


# Replacements for a free token, by kind: other names (words the parser knows among
# them, so that a free token may become a pinned one), and literals at the edges of the
# checks the parser makes (0 and 1 for Kleene bounds, [1] and probabilities).
_NAMES = ["a", "A", "b", "x-y", "Q7", "S", "h", "first", "i", "WHERE", "Sequence", "count", "symbol"]
_WORDS = [
    "WHERE",
    "within",
    "And",
    "NOT",
    "first",
    "last",
    "i",
    "h",
    "count",
    "abs",
    "symbol",
    "SEQ",
    "AS",
    "true",
]
_REPLACEMENTS = {
    IDENT: st.sampled_from(_NAMES),
    NUMBER: st.sampled_from(["0", "1", "2", "7", "1.0", "0.5", "2.5", "1e3", "12"]),
    "int": st.sampled_from(["0", "1", "2", "7", "12", "1.0"]),
    "float": st.sampled_from(["0.0", "1.0", "0.5", "2.5", "1e3", "7"]),
    MONEY: st.sampled_from(["$0", "$1", "$20", "$2.5"]),
    PERCENT: st.sampled_from(["0%", "50%", "100%", "150%"]),
    STRING: st.sampled_from(["'a'", "'A'", "''", "'x y'", '"b"', "'symbol'"]),
}


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


@st.composite
def variants(draw: st.DrawFn, text: str, n: int) -> list[str]:
    """``n`` texts made from ``text`` by renaming its free names (mostly one for one, so
    the shape stays; now and then onto a word the parser knows, or two onto one) and
    replacing some of its literals by others of their kind."""
    tokens = tokenize(text)
    _, free = shape_of(tokens)
    starts = _offsets(text)
    fresh_names = [f"n{i}" for i in range(12)]
    out = []
    for _ in range(n):
        renamed: dict[str, str] = {}
        edits = []
        for i in free:
            tok = tokens[i]
            if tok.kind == IDENT:
                if tok.text not in renamed:
                    pick = draw(st.integers(0, 7))
                    if pick == 0:
                        renamed[tok.text] = draw(st.sampled_from(_NAMES))
                    elif pick == 1:
                        renamed[tok.text] = draw(st.sampled_from(_WORDS))
                    else:
                        renamed[tok.text] = fresh_names[len(renamed) % len(fresh_names)]
                new = renamed[tok.text]
            elif draw(st.integers(0, 2)) == 0:
                continue
            elif tok.kind == NUMBER:
                new = draw(_REPLACEMENTS[type(tok.value).__name__])
            else:
                new = draw(_REPLACEMENTS[tok.kind])
            at = starts[tok.line - 1] + tok.column - 1
            edits.append((at, at + len(tok.text), new))
        variant = text
        for start, end, new in sorted(edits, reverse=True):
            variant = variant[:start] + new + variant[end:]
        out.append(variant)
    return out


HITS: list[int] = []
_settings = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(st.data(), queries)
def test_a_query_built_from_its_shape_is_the_query_the_parser_makes(
    data: st.DataObject, query: Query
) -> None:
    text = format_query(query)
    cache = fresh_cache()
    # Twice: the second sighting of a shape makes its template.
    for _ in range(2):
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    for variant in data.draw(variants(text, 4)):
        assert outcome(cache.parse, variant) == outcome(parse_query_fresh, variant)
        # A variant parsed before may have made a template of its own.
        assert outcome(cache.parse, variant) == outcome(parse_query_fresh, variant)


# Shapes whose literals the parser reads (and pins), names it compares, and the
# workloads' own forms.
_SEEDS = [
    "PATTERN Sequence WITH A, B+, C WHERE [symbol] A.x > 3.5 AND B[i].y < B[i-1].y WITHIN 4 h",
    "PATTERN Sequence WITH A, B{2,5}, C WHERE [symbol] B[1].x > 1 AND C.y = 'z' WITHIN 10 s",
    "SEQ(A, B^3, C) WHERE A.p BETWEEN $20 AND $50 WITHIN 90 min PROBABILITY >= 0.5",
    "SEQ(A x, B y) WHERE x.v IN (1, 2, 3) AND y.w = x.w PARTITION BY k, m WITHIN 5 units",
    "AND(A, B, !C) WHERE [src, k='v'] count(A) > 2 RETURN A.x AS 'total', B.y WITHIN 2 days",
    "QUERY 'q1' PATTERN Conjunction WITH CNMA_A, RSTR_B\nWHERE CNMA_A.payment < $30 WITHIN 3 hours",
    "SEQ(first: A, last: B) WHERE A.x > -5 AND abs(B.y) < 10% STRATEGY skip-till-next-match",
    "SEQ(A, B) AFTER MATCH SKIP TO LAST B MODE ALL WITHIN 1 ms",
    "SELECT R1.*\nFROM RFIDStream R1 R2\nPARTITION BY tag_id\nEVENT NOTPRECEDES(R1, R2, '1 sec')",
    "SELECT *\nFROM Person P1 P2, Book B\nPARTITION BY loc_id\nEVENT ANYONE(\n"
    "  FOLLOWS(B, BOTH(P1, P2, '3 sec'), '3 sec'),\n  FOLLOWS(BOTH(P1, P2, '3 sec'), B, '3 sec')\n)",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(_SEEDS))
def test_variants_of_known_shapes_parse_as_the_parser_parses_them(data: st.DataObject, seed: str) -> None:
    cache = fresh_cache()
    texts = [seed, seed, *data.draw(variants(seed, 6))]
    for text in texts:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    HITS.append(cache.hits)


def test_the_variants_were_built_from_templates() -> None:
    """Not vacuous: most variants of the known shapes were built from a template (run
    after the test above; alone, it runs it)."""
    if not HITS:
        test_variants_of_known_shapes_parse_as_the_parser_parses_them()
    assert sum(HITS) >= len(HITS) // 2


def test_the_cache_is_used_for_queries_of_one_shape() -> None:
    """Not vacuous: the workloads' forms are built from templates."""
    cache = fresh_cache()
    texts = [
        f"PATTERN Sequence WITH C{i}, C{i + 1}, C{i + 2} WHERE [symbol] C{i}.a0 > {i}.5 WITHIN {i % 3 + 1} h"
        for i in range(20)
    ]
    for text in texts:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    assert cache.hits == 18


def test_the_second_query_of_a_shape_is_built_from_the_firsts_template() -> None:
    """A shape's template is made from its first query's parse on the second sighting:
    the second text is not parsed as such, only the first with its placeholders."""
    parsed: list[str] = []

    def counting(text: str, tokens: list) -> Query:  # type: ignore[type-arg]
        parsed.append("placeholders" if any(type(t[1]) is not str for t in tokens) else text)
        return parse_tokens(text, tokens)

    cache = ShapeCache(counting)
    texts = [f"SEQ(A{i} a, B{i} b) WHERE a.x > {i} AND b.y = 'v{i}' WITHIN {i + 1} s" for i in range(4)]
    for text in texts:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    # The first text, then one placeholder parse (or more, pinning) made from it.
    assert parsed[0] == texts[0]
    assert set(parsed[1:]) == {"placeholders"}
    assert cache.hits == 2
    # Its pinned tokens known, another value of them makes its own template later.
    pinned = ["SEQ(A, B{2}, C) WHERE A.x > 1", "SEQ(D, E{3}, F) WHERE D.x > 2", "SEQ(G, H{3}, I) WHERE G.x > 3"]
    for text in [*pinned, pinned[-1]]:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)


def test_the_queries_of_a_text_of_several_are_built_from_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text of many queries of one shape (a queries file): each query is a piece of the
    text's tokens, and the pieces after the second are built from the template made from
    the first piece (its own tokens, not the whole text's)."""
    from ecq.language import shapes

    monkeypatch.setattr(shapes, "_PIECES", None)
    text = "\n".join(f"QUERY q{i} SEQ(A{i} a, B{i} b) WHERE a.x > {i} WITHIN {i + 1} s" for i in range(20))
    assert outcome(parse_queries, text) == outcome(parse_queries_fresh, text)
    assert shapes._PIECES is not None
    assert shapes._PIECES.hits >= 17


def test_a_name_spelled_like_a_word_is_not_a_name() -> None:
    cache = fresh_cache()
    texts = ["SEQ(A, B) WHERE A.x > 1", "SEQ(C, D) WHERE C.y > 2", "SEQ(E, F) WHERE E.z > 3"]
    texts += ["SEQ(WHERE, B) WHERE WHERE.x > 1", "SEQ(first, B) WHERE first.x > 1"]
    texts += ["SEQ(A, B) WHERE abs(A.x) > 1", "SEQ(A, B) WHERE foo(A.x) > 1", "SEQ(A, B) WHERE A[i].x > 1"]
    # [symbol] is dropped where [k] is an equivalence test: the word is in the shape.
    texts += ["SEQ(A, B) WHERE [k] A.x > 1", "SEQ(A, B) WHERE [m] A.x > 1", "SEQ(A, B) WHERE [n] A.x > 1"]
    texts += ["SEQ(A, B) WHERE [symbol] A.x > 1", "SEQ(A, B) WHERE [src] A.x > 1"]
    texts += [
        "SEQ(A, B) WHERE A[j].x > 1",
        "SEQ(A, B) WHERE A.x > 1 WITHIN 4 h",
        "SEQ(A, B) WHERE A.x > 1 WITHIN 4 k",
    ]
    for text in texts:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    assert outcome(cache.parse, "SEQ(WHERE, B) WHERE WHERE.x > 1")[0] == "error"
    assert cache.hits >= 2


def test_pinned_literals_keep_the_parsers_checks() -> None:
    cache = fresh_cache()
    for text in ["SEQ(A, B{2}, C)", "SEQ(A, B{3}, C)", "SEQ(A, B{0}, C)", "SEQ(A, B{4}, C)"]:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    assert outcome(cache.parse, "SEQ(A, B{0}, C)")[0] == "error"
    for text in ["SEQ(A, B) PARTITION BY a, b", "SEQ(A, B) PARTITION BY c, d", "SEQ(A, B) PARTITION BY e, e"]:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
    assert outcome(cache.parse, "SEQ(A, B) PARTITION BY e, e")[0] == "error"


# Strings in the parser's modules that are Python's names, not words of the language.
_NOT_WORDS = re.compile(r"[A-Z0-9_]*_[A-Z0-9_]*|[A-Z]|TOK|POS|MARKS|ITEMS|BRACKET|TOKENS|OPERATORS")


@pytest.mark.parametrize(
    "module", ["parser", "conditions", "patterns", "partition", "rizvi", "stream", "keywords"]
)
def test_every_word_the_parser_compares_is_never_free(module: str) -> None:
    """A token spelled like a word the parser knows is kept in the shape as written."""
    tree = pyast.parse((LANGUAGE / f"{module}.py").read_text())
    defined = {n.name for n in pyast.walk(tree) if isinstance(n, (pyast.FunctionDef, pyast.ClassDef))}
    defined |= {n.id for n in pyast.walk(tree) if isinstance(n, pyast.Name)}
    words = set()
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", node.value) and node.value not in defined:
                words.add(node.value.upper())
    missing = {w for w in words if w not in WORDS and not _NOT_WORDS.fullmatch(w)}
    assert not missing


def test_the_soup_parses_as_the_parser_parses_it() -> None:
    """Texts the parser refuses give its errors through the cache, each seen twice."""
    cache = fresh_cache()
    for text in [
        "SEQ(A, B",
        "SEQ(A, B) WITHIN 5 fortnights",
        "SEQ(A, B) WHERE A.x >",
        "SEQ(A, B) WHERE A[2].x > 1",
    ]:
        for _ in range(3):
            assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
            assert outcome(cache.parse, text)[0] == "error"


def _several(texts: list[str]) -> str:
    return "\n".join(f"QUERY q{i}\n{text}" for i, text in enumerate(texts))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(st.sampled_from(_SEEDS[:8]), min_size=1, max_size=4))
def test_a_text_of_several_queries_parses_as_the_parser_parses_it(
    data: st.DataObject, seeds: list[str]
) -> None:
    texts = [v for seed in seeds for v in [seed, seed, *data.draw(variants(seed, 2))]]
    text = _several(texts)

    def every(parse: object) -> tuple[str, object]:
        try:
            out = parse(text)  # type: ignore[operator]
        except ParseError as err:
            return ("error", (err.message, err.line, err.column, err.token, err.excerpt))
        return ("queries", [(repr(q), q.spans) for q in out])

    assert every(parse_queries) == every(parse_queries_fresh)


def test_a_query_that_reads_the_next_query_keyword_is_parsed_whole() -> None:
    """Pieces split at every QUERY: where the keyword is read as a name, or the text is
    not one query after another, the whole text is parsed as the parser parses it."""
    texts = [
        "QUERY a SEQ(A, B) RETURN A.x AS QUERY b SEQ(C, D)",
        "QUERY a SEQ(A, B) AFTER MATCH SKIP TO LAST\nQUERY b SEQ(C, D)",
        "SEQ(A, B) QUERY b SEQ(C, D)",
        "QUERY a SEQ(A, B) WHERE [QUERY] A.x > 1 QUERY b SEQ(C, D)",
        "QUERY a SEQ(A, B)\nQUERY 'b c' SEQ(C, D)\nQUERY d SEQ(E, F) WITHIN 5 s",
    ]
    for text in texts:
        for _ in range(3):
            fresh = outcome(parse_queries_fresh, text)
            assert outcome(parse_queries, text) == fresh


def test_pinned_values_seen_once_make_no_template_and_the_cache_is_bounded() -> None:
    cache = ShapeCache(parse_tokens, max_shapes=8)
    texts = [f"SEQ(A, B{{{n}}}, C) WHERE A.x > {n}" for n in range(1, 40)]
    for text in texts:
        assert outcome(cache.parse, text) == outcome(parse_query_fresh, text)
        assert cache._entries <= 8
    assert cache.hits == 0
    for _ in range(3):
        assert outcome(cache.parse, texts[-1]) == outcome(parse_query_fresh, texts[-1])
    assert cache.hits == 2


_compiled = pytest.mark.skipif(compiled_lexer() is None, reason="the compiled kernel is off or not built")


def _same_shape(text: str) -> None:
    try:
        tokens = tokenize(text)
    except ParseError:
        return
    lexer = compiled_lexer()
    got, want = lexer.shape(tokens, WORDS), _shape_of(tokens)
    # repr: 1 and 1.0 (and True) are equal keys but different literals
    assert repr(got) == repr(want), text


@_compiled
def test_the_compiled_shape_key_is_the_pythons_on_the_written_texts() -> None:
    from tests.ecq.language.test_lexer import written_texts

    texts = written_texts()
    assert len(texts) > 100
    for text in texts:
        _same_shape(text)
    # names outside ASCII, equal and unequal folded, and literals equal across kinds
    _same_shape("PATTERN SEQ(Straße s, STRASSE t, ǅx u) WHERE s.a = 1 AND t.b = 1.0 AND u.c = '1' AND s.d = 'Straße'")


@_compiled
@_settings
@given(queries)
def test_the_compiled_shape_key_is_the_pythons(query: Query) -> None:
    _same_shape(format_query(query))
