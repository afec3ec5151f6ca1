"""The lexer gives exactly the tokens (kinds, texts, lines, columns, keys, values) and the
errors (message, line, column, token) of the character-at-a-time lexer written from its
rules (char_lexer.py, no shared code), on every query text of the docs and examples, on
generated queries and on arbitrary text."""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.errors import ParseError
from ecq.evaluation.workload import Workload, condition_queries, credit_card_workload, sequence_queries
from ecq.language import format_query, from_json
from ecq.language.lexer import Token, _tokenize_all, _tokenize_common, compiled_lexer, tokenize
from tests.ecq.language.char_lexer import LexError, char_tokenize
from tests.ecq.language.test_roundtrip import queries as ast_queries
from tests.strategies import query_sets_full

ROOT = Path(__file__).resolve().parents[3]


def lexed(text: str, lex: Callable[[str], list[Token]] = tokenize) -> Any:
    try:
        return [(t.kind, t.text, t.line, t.column, t.key, t.value, type(t.value)) for t in lex(text)]
    except ParseError as err:
        return ("error", err.message, err.line, err.column, err.token)


def expected(text: str) -> Any:
    try:
        return [(*t, type(t[5])) for t in char_tokenize(text)]
    except LexError as err:
        return ("error", *err.where)


def same(text: str) -> None:
    """Every path of the lexer (the compiled common tokens', when built, the Python
    common tokens' and the one for any text) gives what the reference gives."""
    want = expected(text)
    assert lexed(text) == want, text
    assert lexed(text, _tokenize_common) == want, text
    assert lexed(text, _tokenize_all) == want, text
    lexer = compiled_lexer()
    if lexer is not None:
        got = lexer.tokenize(text)
        # None: the text is left to the Python lexer (every error, every rare token)
        if got is not None:
            assert lexed(text, lambda _: got) == want, text


# ------------------------------------------------------------ written queries

_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.S | re.M)
_CODE = re.compile(r"`([^`\n]+)`")


def written_texts() -> list[str]:
    """Every fenced block and inline code span of the docs, and every query file of the
    examples (whole, and query by query)."""
    out: list[str] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        out += [m.group(2) for m in _FENCE.finditer(text)]
        out += [m.group(1) for m in _CODE.finditer(_FENCE.sub("", text))]
    for path in sorted((ROOT / "examples").rglob("*.txt")):
        text = path.read_text()
        out.append(text)
        out += [part for part in re.split(r"\n(?=QUERY )", text) if part.strip()]
    return out


def test_the_written_texts_are_read() -> None:
    texts = written_texts()
    assert len(texts) > 200
    assert sum("PATTERN" in t for t in texts) > 30
    assert any(isinstance(lexed(t), tuple) for t in texts)  # some are not query text at all


def test_the_written_queries() -> None:
    for text in written_texts():
        same(text)


def test_the_workload_queries() -> None:
    w = Workload(n_queries=300)
    texts = [t for _, t in sequence_queries(w)]
    texts += [t for _, t in credit_card_workload(n_queries=300)[0]]
    texts += [t for _, t in condition_queries(w, 2)]
    for text in texts:
        same(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "-- only a comment",
        "a -- comment\r\nb\rc\x85d\u2028e\x1cf\x1fg\vh",
        "SHELF-READING CNMA-1 a.x-b.y a.x - b.y a--b a- b -a a-",
        "12 1.5 2e-3 2E+3 1e 1e+ 1. 1.x 20% 2.5% 1.5e3% 12abc 007",
        "$20 $20.5 $20.5.1 $1e5 $x1 $X12 $x $y $ $20% $x1-a",
        "$x1a $x1_ $x12b-c",
        "@q @q-1 @ @1 @_x @Ωmega @² ²x",
        "'a' \"b\" 'it\\'s' \"\\\\\" '\\n\\r\\t' '\\u0041\\U0001F600' ''",
        "'abc",
        "'ab\ncd'",
        "'a\\q'",
        "'a\\",
        "'a\\\nb'",
        "'\\u12'",
        "'\\U00110000'",
        "'x' '\\U00110000",
        "== != <> <= >= = < > + - * / ; & | ! ^ { } [ ] ( ) , . ∧ ∨ ¬",
        "a # b",
        "a\tb\t\tc",
        "1" + "9" * 400 + ".5",
        "$1" + "9" * 400 + ".5",
        "1e999",
        "1e999%",
        "Ωmega straße ǅ x٣ ٣ ⅻ ½",
        "\u00a0a\u3000b",
    ],
)
def test_each_rule(text: str) -> None:
    same(text)


# ------------------------------------------------------------- every character


def test_the_patterns_character_classes_are_strs() -> None:
    """The token pattern's \\w and \\s are str.isalnum() (or "_") and str.isspace()."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    assert set(re.findall(r"\w", every)) == {c for c in every if c.isalnum() or c == "_"}
    assert set(re.findall(r"\s", every)) == {c for c in every if c.isspace()}


def _kinds_of_characters() -> list[str]:
    """One character of each combination of the properties the lexer looks at."""
    seen: dict[tuple[Any, ...], str] = {}
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        props = (
            unicodedata.category(c), c.isalpha(), c.isalnum(), c.isspace(), c.isdigit(),
            c.isdecimal(), c.isnumeric(), c.upper() != c, len(c.upper()), len(c.splitlines()),
        )
        seen.setdefault(props, c)
    return sorted(set(seen.values()) | {chr(code) for code in range(128)})


def test_every_kind_of_character_in_every_place() -> None:
    chars = _kinds_of_characters()
    assert len(chars) > 150
    for c in chars:
        for text in (c, f"a{c}b", f"{c}a", f"a-{c}", f"@{c}", f"$x1{c}", f"'{c}'", f"1{c}", f"$1{c}", f"a\n{c}"):
            same(text)


# ---------------------------------------------------------------- generated

_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_pieces = st.sampled_from(
    [
        " ", "\n", "\r\n", "\r", "\t", "\x0b", "\u2028", "\x85", "-", "--", "$", "$x", "@", "'", '"', "\\",
        "\\u", "\\U0010FFFF", "\\U00110000", "%", ".", "e", "E", "+", "1", "x", "X", "_", "Ω", "²",
        "=", "<", ">", "!", "[", "]", "(", ")", ",", ";", "#",
    ]
)


@st.composite
def edited(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> str:
    """A text with a few lexer-relevant pieces inserted at random places."""
    text = draw(texts)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_pieces) + text[at:]
    return text


_query_texts = st.one_of(
    ast_queries.map(format_query),
    query_sets_full().map(lambda qs: "\n".join(format_query(from_json({**q, "name": n})) for n, q in qs)),
)


@settings(_settings, max_examples=100)
@given(_query_texts)
def test_generated_queries(text: str) -> None:
    same(text)


@settings(_settings, max_examples=100)
@given(edited(_query_texts))
def test_generated_queries_edited(text: str) -> None:
    same(text)


@_settings
@given(st.one_of(st.text(max_size=40), st.lists(_pieces, max_size=20).map("".join), edited(st.text(max_size=20))))
def test_any_text(text: str) -> None:
    same(text)


def test_the_common_tokens_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Query text of the usual shapes never needs the lexer for any text (which is slower)."""

    def refuse(text: str) -> list[Token]:
        raise AssertionError(f"slow path for {text!r}")

    monkeypatch.setattr("ecq.language.lexer._tokenize_all", refuse)
    w = Workload(n_queries=50)
    texts = [t for _, t in sequence_queries(w)] + [t for _, t in condition_queries(w, 2)]
    texts += [t for _, t in credit_card_workload(n_queries=50)[0]]
    texts += [(ROOT / "examples" / "queries.txt").read_text(), "@q $x1 'a' -- c\r\n$2.5 5%"]
    lexer = compiled_lexer()
    for text in texts:
        tokenize(text)
        # and the compiled lexer reads them itself, when built
        assert lexer is None or lexer.tokenize(text) is not None, text
    with pytest.raises(AssertionError, match="slow path"):
        tokenize("'it\\'s'")
