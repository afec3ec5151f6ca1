"""Queries files: query text where each query begins with ``QUERY <name>``, or a JSON
list of ``{"name", "text"}`` or ``{"name", "pattern", ...}`` (the AST's JSON form)
entries.

Every reader validates the whole file before anything is done with it and names the
place of the first mistake (file, entry, line and column), because a command that stops
halfway leaves the user with half an answer and no way to tell which half.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ecq.errors import QueryError, ScemonError
from ecq.language.ast import Query, from_json

if TYPE_CHECKING:
    from ecq.engine import Engine
    from ecq.evaluation.baseline import SeparateEngine

    # What ``scemon replay --engine`` picks: the shared network or the SP baseline.
    AnyEngine = Engine | SeparateEngine

__all__ = [
    "ENGINE_KINDS",
    "QueryFileError",
    "QuerySpec",
    "build_engine",
    "canonical_queries",
    "read_queries",
]

# A registered query as read from a file: its name and either its text (the engine
# parses it) or the Query already built from the JSON form.
QuerySpec = tuple[str, Query | str]


class QueryFileError(QueryError):
    """A queries file that cannot be read as queries; the message names the file and the
    entry (or the line and column, for query text)."""


def read_queries(path: Path) -> list[QuerySpec]:
    """Read a queries file: a JSON list of ``{"name", "text"}`` or ``{"name", "pattern",
    ...}`` (the AST's JSON form) entries, or query text where each query begins with
    ``QUERY <name>``. The content decides: a first non-blank ``[`` means JSON (so does
    ``{``, to say that a single object is not a list).

    Query text is parsed here; JSON entries with ``text`` are left for the engine to
    parse (their errors surface in :func:`build_engine`). Raises :class:`QueryFileError`.
    """
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise QueryFileError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    body = text.lstrip()
    if body.startswith(("[", "{")):  # query text never starts with either
        specs = _read_json_queries(path, text)
    elif body:
        specs = _read_text_queries(path, text)
    else:
        specs = []
    if not specs:
        raise QueryFileError(f"{path}: no queries found")
    seen: set[str] = set()
    for name, _ in specs:
        if name in seen:
            raise QueryFileError(f"{path}: query {name!r} is defined twice")
        seen.add(name)
    return specs


def _read_json_queries(path: Path, text: str) -> list[QuerySpec]:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise QueryFileError(
            f"{path}: invalid JSON: {err.msg} (line {err.lineno}, column {err.colno})"
        ) from None
    if not isinstance(data, list):
        raise QueryFileError(f"{path}: expected a JSON list of queries")
    specs: list[QuerySpec] = []
    for index, entry in enumerate(data):
        where = f"{path}: entry {index}"
        if not isinstance(entry, dict):
            raise QueryFileError(f"{where}: must be an object with 'name' and 'text' or 'pattern'")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise QueryFileError(f"{where}: 'name' must be a non-empty string")
        if ("text" in entry) == ("pattern" in entry):
            raise QueryFileError(f"{where} ({name!r}): give exactly one of 'text' and 'pattern'")
        if "text" in entry:
            if not isinstance(entry["text"], str):
                raise QueryFileError(f"{where} ({name!r}): 'text' must be a string")
            specs.append((name, entry["text"]))
            continue
        try:
            # "pattern" holds a whole query's AST JSON, or the pattern with the other
            # clauses (where, within, mode, ...) beside it in the entry.
            inner = entry["pattern"]
            whole = isinstance(inner, dict) and inner.get("kind") == "query"
            query = from_json(inner if whole else entry)
        except QueryError as err:
            raise QueryFileError(f"{where} ({name!r}): {_first_line(err)}") from err
        specs.append((name, query))
    return specs


def _read_text_queries(path: Path, text: str) -> list[QuerySpec]:
    from ecq.language import parse_queries  # the parser is optional for JSON files

    try:
        queries = parse_queries(text)
    except QueryError as err:
        raise QueryFileError(f"{path}: {_first_line(err)}") from err
    specs: list[QuerySpec] = []
    for index, query in enumerate(queries):
        if not query.name:
            raise QueryFileError(f"{path}: query {index + 1} has no name (begin it with QUERY <name>)")
        specs.append((query.name, query))
    return specs


def canonical_queries(specs: Sequence[QuerySpec], source: Path) -> list[Query]:
    """Every query as a parsed, named :class:`Query` (JSON text entries parsed now), so
    that ``scemon parse`` can print each one's canonical form."""
    from ecq.language import parse_query

    out: list[Query] = []
    for name, spec in specs:
        if isinstance(spec, str):
            try:
                spec = parse_query(spec)
            except QueryError as err:
                raise QueryFileError(f"{source}: query {name!r}: {_first_line(err)}") from err
        if spec.name != name:
            spec = _renamed(spec, name)
        out.append(spec)
    return out


def _renamed(query: Query, name: str) -> Query:
    from dataclasses import replace

    return replace(query, name=name)


ENGINE_KINDS = ("shared", "separate")


def build_engine(specs: Sequence[QuerySpec], source: Path, kind: str = "shared") -> AnyEngine:
    """A fresh engine with every query registered in file order (the order that breaks
    ties between matches, docs/semantics.md). Raises :class:`QueryFileError` naming the
    query the engine rejects. ``kind``: ``shared`` (the ECQ network) or ``separate`` (the
    separate-processing baseline, :mod:`ecq.evaluation.baseline`; same matches, for comparison)."""
    if kind not in ENGINE_KINDS:
        raise ScemonError(f"unknown engine {kind!r} (expected {' or '.join(ENGINE_KINDS)})")
    # Only the engine asked for is imported: the baseline is a comparison, not a run's cost.
    engine: AnyEngine
    if kind == "shared":
        from ecq.engine import Engine
        from ecq.errors import BatchQueryError

        engine = Engine()
        try:
            # One pass (Engine.register_many): what depends on the whole set of queries
            # is made once, not once per query.
            engine.register_many(specs)
        except BatchQueryError as err:
            raise QueryFileError(f"{source}: query {err.name!r}: {_first_line(err.inner)}") from err
        return engine
    from ecq.evaluation.baseline import SeparateEngine

    engine = SeparateEngine()
    for name, spec in specs:
        try:
            engine.register(name, spec)
        except QueryError as err:
            raise QueryFileError(f"{source}: query {name!r}: {_first_line(err)}") from err
    return engine


def _first_line(err: Exception) -> str:
    return str(err).split("\n", 1)[0]
