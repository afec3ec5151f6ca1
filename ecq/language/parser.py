"""Query text to AST: the entry points and the clauses around a pattern.

::

    query := [QUERY name] [PATTERN | EVENT] pattern clause*
    clause := WHERE condition | WITHIN duration | MODE (RECENT | ALL | CHRONICLE)
            | RETURN expr [AS name] (, expr [AS name])* | PROBABILITY [>=] p
            | STRATEGY strategy | CONSUME (SHARED | EXCLUSIVE)
            | AFTER MATCH SKIP (PAST LAST ROW | TO NEXT ROW | TO [FIRST | LAST] ref)
            | PARTITION BY (NONE | attr (, attr)*)

The clauses may come in any order (each starts with its own keyword, so this is
unambiguous), each at most once. The pattern grammar is in :mod:`.patterns`, the
condition grammar in :mod:`.conditions`. Nothing here is ever evaluated with
``eval``/``exec``: the AST is compiled to closures elsewhere.
"""

from __future__ import annotations

from ecq.errors import QueryError
from ecq.language.ast import STRATEGIES, Expr, Query, ReturnItem
from ecq.language.conditions import parse_condition, parse_expression
from ecq.language.keywords import CLAUSE_KEYWORDS, DURATION_UNITS, duration_seconds
from ecq.language.lexer import IDENT, NUMBER, PERCENT, POSREF, STRING, Token, tokenize
from ecq.language.partition import parse_partition
from ecq.language.patterns import parse_pattern
from ecq.language.rizvi import is_rizvi, parse_rizvi
from ecq.language.shapes import parse_cached, parse_piece_cached
from ecq.language.spans import Span, collect_spans
from ecq.language.stream import TokenStream

__all__ = ["parse_query", "parse_query_fresh", "parse_queries", "parse_queries_fresh", "parse_tokens"]

_CLAUSES = frozenset(
    {"WHERE", "WITHIN", "MODE", "RETURN", "PROBABILITY", "STRATEGY", "CONSUME", "AFTER", "PARTITION"}
)


# Deeper nesting is rejected with its place rather than exhausting the interpreter's
# stack (the parser and the compiler are recursive).
MAX_NESTING = 64


def parse_query(text: str, tokens: list[Token] | None = None) -> Query:
    """Parse one query; raises :class:`ecq.errors.ParseError` with the place of the
    first syntax error. A query of a shape parsed before (the same text up to its names
    and literals) is built from that parse with its own tokens (:mod:`.shapes`).
    ``tokens``: ``tokenize(text)``, when the caller has them."""
    return parse_cached(text, parse_tokens, tokens)


def parse_query_fresh(text: str) -> Query:
    """:func:`parse_query` without the cache of shapes: the parser run on ``text``."""
    return parse_tokens(text, tokenize(text))


def parse_tokens(text: str, tokens: list[Token]) -> Query:
    """:func:`parse_query` of ``text`` already split into ``tokens``."""
    ts = TokenStream(text, tokens)
    _check_nesting(ts)
    try:
        query = _query(ts)
    except RecursionError:
        raise ts.error("the query is nested too deeply") from None
    if ts.tok.key == "QUERY":
        raise ts.error("a second query starts here; use parse_queries() for a text of several queries")
    return query


def parse_queries(text: str) -> list[Query]:
    """Parse a text of several queries, each starting with ``QUERY <name>``. Each query
    of a shape parsed before is built from that parse (:mod:`.shapes`); should any not
    be, the whole text is parsed as one, so that errors are the parser's."""
    tokens = tokenize(text)
    ts = TokenStream(text, tokens)
    _check_nesting(ts)
    try:
        return _queries_by_piece(text, tokens)
    except (QueryError, RecursionError, _NotThere):
        pass
    return parse_queries_fresh(text, tokens)


def parse_queries_fresh(text: str, tokens: list[Token] | None = None) -> list[Query]:
    """:func:`parse_queries` without the cache of shapes."""
    ts = TokenStream(text, tokens)
    _check_nesting(ts)
    out = []
    while not ts.at_end():
        if ts.tok.key != "QUERY":
            raise ts.error(f"expected QUERY <name> to start a query, found {ts.describe(ts.tok)}")
        try:
            out.append(_query(ts))
        except RecursionError:
            raise ts.error("the query is nested too deeply") from None
    return out


class _NotThere(Exception):
    """A piece's query did not end where the next one starts (see _parse_piece)."""


def _queries_by_piece(text: str, tokens: list[Token]) -> list[Query]:
    """The queries of ``text``, each parsed from its own piece of ``tokens``: from its
    ``QUERY`` to the next ``QUERY`` and that query's name, then the end. Raises if the
    text does not start with ``QUERY`` or a piece is not one query that ends there."""
    starts = [i for i, tok in enumerate(tokens) if tok.key == "QUERY" and tok.kind == IDENT]
    if not starts or starts[0] != 0:
        raise _NotThere
    end = tokens[-1]
    out = []
    for n, start in enumerate(starts):
        if n + 1 < len(starts):
            stop = starts[n + 1]
            piece = tokens[start : stop + 2]
            # The next query's name, there only for the parser's one token of lookahead
            # past its QUERY, written the same in every piece (so it is no part of a
            # query's shape).
            if len(piece) == stop - start + 2:
                name = piece[-1]
                piece[-1] = name._replace(text="q", key="Q", value="q" if name.kind == STRING else None)
            piece.append(end)
        else:
            piece = tokens[start:]
        out.append(parse_piece_cached(text, piece, _parse_piece))
    return out


def _parse_piece(text: str, tokens: list[Token]) -> Query:
    """One query of a piece made by :func:`_queries_by_piece`; raises :class:`_NotThere`
    unless it ends right before the piece's closing ``QUERY <name>`` (or at its end).
    The parser looks at most one token past the one it stands on, so a query that
    stops at that ``QUERY`` here stops there in the whole text too."""
    ts = TokenStream(text, tokens)
    query = _query(ts)
    stop = len(tokens) - 3
    if not (stop > 0 and tokens[stop].key == "QUERY" and tokens[stop].kind == IDENT):
        stop = len(tokens) - 1
    if ts.pos != stop:
        raise _NotThere
    return query


def _check_nesting(ts: TokenStream) -> None:
    if len(ts.tokens) <= MAX_NESTING:
        return  # too few tokens to open that many brackets
    depth = 0
    for tok in ts.tokens:
        if tok.key in ("(", "[", "{"):
            depth += 1
            if depth > MAX_NESTING:
                raise ts.error(
                    f"the query is nested too deeply: more than {MAX_NESTING} nested brackets", tok
                )
        elif tok.key in (")", "]", "}"):
            depth -= 1


def _query(ts: TokenStream) -> Query:
    """One query, ending before the next QUERY or at the end of the text."""
    clauses: dict[str, Span] = {}
    name: str | None = None
    if ts.tok.key == "QUERY":
        ts.next()
        tok = ts.tok
        if tok.kind == STRING or (tok.kind == IDENT and tok.key not in CLAUSE_KEYWORDS):
            ts.next()
            name = _name(tok)
            clauses["name"] = _span(tok)
        else:
            raise ts.error(f"expected a query name after QUERY, found {ts.describe(tok)}")
    if is_rizvi(ts):
        # Rizvi's SELECT ... FROM ... EVENT form (ecq.language.rizvi).
        rizvi = parse_rizvi(ts, name)
        rizvi.spans.update(collect_spans(ts, rizvi, clauses))
        return rizvi
    if ts.tok.key in ("PATTERN", "EVENT"):
        ts.next()
    pattern = parse_pattern(ts)
    where: Expr | None = None
    within: float | None = None
    mode = "recent"
    returns: tuple[ReturnItem, ...] = ()
    probability: float | None = None
    policy: dict[str, str | None] = {}
    partition: tuple[str, ...] | None = None
    seen: set[str] = set()
    while ts.tok.key in _CLAUSES:
        tok = ts.next()
        if tok.key in seen:
            raise ts.error(f"duplicate {tok.key} clause", tok)
        seen.add(tok.key)
        if tok.key == "WHERE":
            where = parse_condition(ts)
        elif tok.key == "WITHIN":
            within = _duration(ts)
            clauses["within"] = _span(tok)
        elif tok.key == "MODE":
            mode = _mode(ts)
            clauses["mode"] = _span(tok)
        elif tok.key == "RETURN":
            returns = _returns(ts)
        elif tok.key == "STRATEGY":
            policy["strategy"] = _strategy(ts)
            clauses["strategy"] = _span(tok)
        elif tok.key == "CONSUME":
            policy["consume"] = _one_of(ts, ("SHARED", "EXCLUSIVE"), "CONSUME")
            clauses["consume"] = _span(tok)
        elif tok.key == "AFTER":
            policy["skip"], policy["skip_var"] = _after_match(ts)
            clauses["skip"] = _span(tok)
        elif tok.key == "PARTITION":
            partition = parse_partition(ts)
            clauses["partition"] = _span(tok)
        else:
            probability = _probability(ts)
            clauses["probability"] = _span(tok)
    if not (ts.at_end() or ts.tok.key == "QUERY"):
        found = ts.tok.text
        raise ts.error(
            "expected WHERE, WITHIN, MODE, RETURN, PROBABILITY, STRATEGY, CONSUME, AFTER MATCH SKIP, "
            f"PARTITION BY or the end of the query, found {found!r}"
        )
    query = Query(
        pattern=pattern,
        where=where,
        within=within,
        mode=mode,
        returns=returns,
        probability=probability,
        name=name,
        **policy,  # type: ignore[arg-type]
        partition=partition,
    )
    query.spans.update(collect_spans(ts, query, clauses))
    return query


def _name(tok: Token) -> str:
    """A query or output name written as a word or as a string."""
    return tok.value if tok.kind == STRING and isinstance(tok.value, str) else tok.text


def _span(tok: Token) -> Span:
    return (tok.line, tok.column, tok.text)


def _duration(ts: TokenStream) -> float:
    """``<number> [unit]`` in seconds; a bare number is seconds."""
    tok = ts.tok
    if tok.kind != NUMBER:
        raise ts.error(
            f"expected a duration (a number and a unit, e.g. 5 s) after WITHIN, found {ts.describe(tok)}"
        )
    ts.next()
    assert isinstance(tok.value, (int, float))
    unit = ts.tok
    if unit.kind != IDENT or unit.key in CLAUSE_KEYWORDS:
        return duration_seconds(tok.value, None)
    ts.next()
    if unit.text.lower() not in DURATION_UNITS:
        known = "ms, s, sec(s), second(s), min(s), minute(s), h, hour(s), day(s), units"
        raise ts.error(f"unknown duration unit {unit.text!r} (known: {known})", unit)
    return duration_seconds(tok.value, unit.text)


def _mode(ts: TokenStream) -> str:
    tok = ts.tok
    if tok.kind == IDENT and tok.key in ("RECENT", "ALL", "CHRONICLE"):
        ts.next()
        return tok.key.lower()
    raise ts.error(f"expected RECENT or ALL (or CHRONICLE) after MODE, found {ts.describe(tok)}")


def _strategy(ts: TokenStream) -> str:
    """SASE+'s strategy names, hyphenated (``-`` between letters is part of a name)."""
    tok = ts.tok
    if tok.kind == IDENT and tok.text.lower() in STRATEGIES:
        ts.next()
        return tok.text.lower()
    raise ts.error(f"expected {', '.join(STRATEGIES)} after STRATEGY, found {ts.describe(tok)}")


def _one_of(ts: TokenStream, words: tuple[str, ...], after: str) -> str:
    tok = ts.tok
    if tok.kind == IDENT and tok.key in words:
        ts.next()
        return tok.key.lower()
    raise ts.error(f"expected {' or '.join(words)} after {after}, found {ts.describe(tok)}")


def _after_match(ts: TokenStream) -> tuple[str, str | None]:
    """MATCH_RECOGNIZE's ``AFTER MATCH SKIP`` (``AFTER`` already read): PAST LAST ROW, TO
    NEXT ROW, TO FIRST v, TO LAST v, TO v (= TO LAST v)."""
    for word in ("MATCH", "SKIP"):
        _one_of(ts, (word,), "AFTER" if word == "MATCH" else "AFTER MATCH")
    how = _one_of(ts, ("PAST", "TO"), "AFTER MATCH SKIP")
    if how == "past":
        _one_of(ts, ("LAST",), "SKIP PAST")
        _one_of(ts, ("ROW",), "SKIP PAST LAST")
        return "past-last-row", None
    tok = ts.tok
    if tok.kind == IDENT and tok.key == "NEXT":
        ts.next()
        _one_of(ts, ("ROW",), "SKIP TO NEXT")
        return "next-row", None
    where = "last"
    if tok.kind == IDENT and tok.key in ("FIRST", "LAST"):
        nxt = ts.tokens[ts.pos + 1] if ts.pos + 1 < len(ts.tokens) else None
        if nxt is not None and nxt.kind in (IDENT, POSREF):
            ts.next()
            where = tok.key.lower()
    tok = ts.tok
    if tok.kind == POSREF or (tok.kind == IDENT and tok.key not in CLAUSE_KEYWORDS):
        ts.next()
        return where, tok.text
    raise ts.error(f"expected a component after AFTER MATCH SKIP TO, found {ts.describe(tok)}")


def _returns(ts: TokenStream) -> tuple[ReturnItem, ...]:
    items = []
    while True:
        start = ts.tok
        expr = parse_expression(ts)
        name = None
        if ts.accept("AS"):
            tok = ts.tok
            if tok.kind not in (IDENT, STRING):
                raise ts.error(f"expected a name after AS, found {ts.describe(tok)}")
            ts.next()
            name = _name(tok)
        items.append(ts.mark(ReturnItem(expr, name), start))
        if not ts.accept(","):
            return tuple(items)


def _probability(ts: TokenStream) -> float:
    if not ts.accept(">="):
        if ts.tok.kind not in (NUMBER, PERCENT):
            raise ts.error(f"expected '>=' after PROBABILITY, found {ts.describe(ts.tok)}")
    tok = ts.tok
    if tok.kind not in (NUMBER, PERCENT):
        raise ts.error(f"expected a probability between 0 and 1, found {ts.describe(tok)}")
    assert isinstance(tok.value, (int, float))
    if not 0 <= tok.value <= 1:
        raise ts.error(f"a probability must be between 0 and 1, not {tok.text}", tok)
    ts.next()
    return float(tok.value)

