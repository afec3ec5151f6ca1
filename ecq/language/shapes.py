"""Parsing once per query shape: many queries that differ only in their names and
literals are parsed once, the others built from that parse with their own tokens.

A query's **shape** is its token sequence with each *free* token abstracted: a name
(an identifier the language never reads as a word) and a literal (number, amount,
percentage, string). The shape keeps every other token as written, the kind and type of
each free token, and which free tokens are equal to which (so a check such as "PARTITION
BY names 'a' twice" is part of the shape). Two queries of one shape take the same path
through the parser; they differ only in the values the parser copies into the AST.

**Template.** The second time a shape is seen, its first query (text, tokens and AST,
kept until then) is parsed once more with a placeholder in each free token (a
``str``/``int``/``float`` subclass naming the token, so that a value the parser copies
unchanged can be told from one it computed). A placeholder may land only where the
parser copies a token as it is: a literal's value into a ``Lit`` node, a name's text
into any name field. A free token whose placeholder lands anywhere else, or nowhere, or
that makes the placeholder parse fail (``{3}``, ``[1]``, ``WITHIN 10 h``, ``PROBABILITY
>= 0.5``) is **pinned**: it is written into the key as it is, and the template is made
again without its placeholder. The template is kept only if filling it with the tokens
of the query it was made from gives exactly the AST (and spans) a fresh parse gave. The
second query is then built from it, never parsed as such (where its pinned tokens differ
from the first's, it is parsed and counts as the first of its values).

A query whose shape has a template is built from it: its tokens are read (the lexer still
runs on every text) and put where the template's placeholders are; source positions are
taken from the token each span was written at. A query whose shape was not seen before,
or has no template, is parsed as usual, so every error is the parser's own: only queries
that parse are ever cached.

Why this is exact: the parser's choices depend on the kinds and keys of the tokens, on
the words it knows (every word any of the language's modules compares a token with is in
:data:`WORDS`, and such a token is never free), and on a few literal values (which pin
their tokens as above). Equal free tokens keep their equality in the shape.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

from ecq.errors import ParseError
from ecq.language.ast import SELECTIONS, SKIPS, STRATEGIES, Component, Lit, Query, ReturnItem
from ecq.language.keywords import (
    AGGREGATES,
    CLAUSE_KEYWORDS,
    DURATION_UNITS,
    FUNCTIONS,
    NO_OP_EQUIVS,
    PREVIOUS,
    RESERVED,
    duration_seconds,
)
from ecq.language.lexer import IDENT, MONEY, NUMBER, PERCENT, STRING, Token, compiled_lexer, tokenize

__all__ = ["WORDS", "Origin", "ShapeCache", "parse_cached", "parse_piece_cached", "shape_of", "template_of"]

# Every word the parser compares a token with (upper-cased): a name spelled like one of
# them is never free. Beyond keywords.py's: the clause words, the strategies and skips,
# Rizvi's operators (ecq.language.rizvi) and the parser's own names of things.
# tests/ecq/language/test_shapes.py checks that every word-like string constant of the
# parser's modules is here.
WORDS = frozenset(
    {w.upper() for w in RESERVED | AGGREGATES | FUNCTIONS | NO_OP_EQUIVS | {PREVIOUS}}
    | {w.upper() for w in (*STRATEGIES, *SKIPS, *SELECTIONS)}
    | {w.upper() for w in DURATION_UNITS}
    | set(
        """
        PATTERN EVENT SEQUENCE CONJUNCTION DISJUNCTION NEGATION KLEENE RECENT ALL CHRONICLE
        SHARED EXCLUSIVE MATCH SKIP PAST LAST ROW TO NEXT FIRST BY NONE I I-1 SELECT FROM
        WHEN STRICT-CONTIGUITY PARTITION-CONTIGUITY SKIP-TILL-NEXT-MATCH SKIP-TILL-ANY-MATCH
        STRICT CONTIGUITY CNJ DSJ OR AND ANY SEQ UNLESS WINDOW WHERE INTERVAL RETURN AS IN
        NOT TRUE FALSE BETWEEN WITH QUERY PARTITION WITHIN MODE PROBABILITY STRATEGY CONSUME
        AFTER
        FOLLOWS NOTFOLLOWS NOTPRECEDES PRECEDES BOTH ANYONE
        THIS NAME TEXT ITEMS TOKEN NEXT-ROW PAST-LAST-ROW
        """.split()
    )
)

_LITERALS = frozenset({NUMBER, MONEY, PERCENT, STRING})
# Shapes and pinned values kept at most; past that the cache starts again (a bound on
# its memory, not a tuning knob: workloads of many queries have few shapes).
MAX_SHAPES = 4096
# Placeholder parses tried per shape before it is left uncached.
_ATTEMPTS = 8


class _PhStr(str):
    """A placeholder for a token's text (``where`` = "text") or a string's value."""

    __slots__ = ("slot",)
    slot: tuple[int, str]


class _PhInt(int):
    slot: tuple[int, str]


class _PhFloat(float):
    slot: tuple[int, str]


_PLACEHOLDERS = (_PhStr, _PhInt, _PhFloat)


def _placeholder(kind: type, base: Any, slot: tuple[int, str]) -> Any:
    ph = kind(base)
    ph.slot = slot
    return ph


def shape_of(tokens: list[Token]) -> tuple[str, list[int]]:
    """The shape key of ``tokens`` and the indexes of its free tokens.

    The key is one string (one comparison when it is looked up): the tokens' parts
    joined by NUL, a token the parser reads as written as its text (no token's text
    holds a NUL or starts with \\x01 or \\x02), a free name as ``\\x01``, the index
    of the first free token of equal text and of the first of equal upper-cased text
    (and, outside ASCII, of equal lower-cased text), a literal as ``\\x02``, its
    kind, its value's type and the index of the first free token of equal text or
    value."""
    lexer = compiled_lexer()
    if lexer is not None:
        got: tuple[str, list[int]] = lexer.shape(tokens, WORDS)
        return got
    return _shape_of(tokens)


def _shape_of(tokens: list[Token]) -> tuple[str, list[int]]:
    """:func:`shape_of` in Python (the compiled kernel's lexer does the same in C)."""
    key: list[str] = []
    append = key.append
    free: list[int] = []
    # Per free token, the first free token equal to it: by text, and as the parser
    # compares names (upper-cased; for ASCII the same as lower-cased) and literals.
    by_text: dict[object, int] = {}
    by_key: dict[str, int] = {}
    words = WORDS
    literals = _LITERALS
    for i, tok in enumerate(tokens):
        kind = tok[0]
        if kind == IDENT:
            upper = tok[4]
            if upper in words:
                append(tok[1])
                continue
            text = tok[1]
            if text.isascii():
                append(f"\x01{by_text.setdefault(text, i)}.{by_key.setdefault(upper, i)}")
            else:
                append(
                    f"\x01{by_text.setdefault(text, i)}.{by_key.setdefault(upper, i)}"
                    f".{by_key.setdefault(chr(0) + text.lower(), i)}"
                )
            free.append(i)
        elif kind in literals:
            value = tok[5]
            # A string may be a name (QUERY 'x', AS 'y'): in the names' classes too.
            append(f"\x02{kind}.{type(value).__name__}.{by_text.setdefault(value, i)}")
            free.append(i)
        else:
            append(tok[1])
    return "\x00".join(key), free


class Origin:
    """What a query built from a template keeps of how it was built (``Query._origin``,
    not a field of the query): the template, and the texts of its tokens that the
    compiler's shape of a query keeps as written (:attr:`_Template.as_written`). Two
    queries with the same of both have the same compiler's shape key
    (``ecq.compiler.shapes.shape_parts`` reads it from here, not walking the tree).
    Pickled as nothing: an unpickled query has none."""

    __slots__ = ("template", "values")

    def __init__(self, template: _Template, values: tuple[str, ...]) -> None:
        self.template = template
        self.values = values

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _nothing, ()


def _nothing() -> None:
    return None


class _Template:
    """An AST with placeholders, and how to fill them from another query's tokens."""

    __slots__ = ("tree", "build", "spans", "pinned", "within", "as_written", "compiled_shapes")

    def __init__(
        self,
        ast: Query,
        live: set[int],
        spans: dict[str, int],
        pinned: tuple[int, ...],
        within: tuple[int, str | None] | None,
        as_written: tuple[int, ...] | None = None,
    ) -> None:
        self.tree = ast  # with the placeholders
        self.build = _builder(ast, live)  # tokens -> a new Query
        self.spans = tuple(spans.items())  # (span path, index of the token it was written at)
        self.pinned = pinned
        # The WITHIN clause's number (its token's index) and unit, when not pinned.
        self.within = within
        # The free tokens the compiler's shape keeps as written (None: the queries of
        # this template carry no Origin), and what the compiler keeps per their texts
        # (ecq.compiler.shapes).
        self.as_written = as_written
        self.compiled_shapes: dict[tuple[str, ...], Any] = {}

    def slot_of(self, value: Any) -> tuple[int, int] | None:
        """Where a value of :attr:`tree` comes from in a query of this template: its
        token's index and field (1 the text, 5 the value), or None when it is not a
        placeholder (the same in every query of the template)."""
        return _slot_of(value) if type(value) in _PLACEHOLDERS else None

    def within_of(self, tokens: list[Token]) -> float | None:
        """The window (WITHIN, in seconds) of the query of ``tokens``, as :meth:`fill`
        makes it."""
        if self.within is None:
            return self.tree.within  # type: ignore[no-any-return]
        index, unit = self.within
        return duration_seconds(tokens[index][5], unit)  # type: ignore[arg-type]

    def fill(self, tokens: list[Token]) -> Query:
        query: Query = self.build(tokens)
        spans = {}
        for path, i in self.spans:
            tok = tokens[i]
            spans[path] = (tok[2], tok[3], tok[1])
        _set(query, "spans", spans)
        if self.within is not None:
            _set(query, "within", self.within_of(tokens))
        as_written = self.as_written
        if as_written is not None:
            query.__dict__["_origin"] = Origin(self, tuple([tokens[i][1] for i in as_written]))
        return query


# Fields the compiler's shape reads a class reference from (ecq.compiler.shapes
# _REF_FIELDS): a name there equal to a class is that class's number, else as written.
_REF_FIELDS = frozenset({"ref", "skip_var"})


def _as_written(ast: Query, fresh: Query, tokens: list[Token]) -> tuple[int, ...] | None:
    """The free tokens of ``ast`` (a template, with placeholders) that the compiler's
    shape of a query (``ecq.compiler.shapes``) keeps as written: all but those that land
    only as a component's class, as a reference equal to one of the query's classes
    (a class's number there), as a literal's value (kept by type, and the type is part
    of this shape) or as the query's own name (not kept). Which free tokens are equal
    is part of this shape, so what holds for ``fresh`` (the query the template was made
    from) holds for every query of the template. None when a component is a
    sub-pattern (the compiler's shape has none)."""
    classes: set[str] = set()
    for comp in fresh.pattern.items:
        if comp.sub is not None:
            return None
        classes.update(comp.classes)
    kept: set[int] = set()

    def walk(node: Any, owner: type, name: str) -> None:
        cls = type(node)
        if cls in _PLACEHOLDERS:
            index, where = node.slot
            if owner is Lit or (owner is Query and name == "name"):
                return
            if where == "text" and owner is Component and name == "classes":
                return
            if where == "text" and name in _REF_FIELDS and tokens[index][1] in classes:
                return
            kept.add(index)
        elif cls is tuple:
            for x in node:
                walk(x, owner, name)
        elif _is_node(cls):
            for f in _fields(cls):
                if f != "spans":
                    value = getattr(node, f)
                    if type(value) not in _LEAVES:
                        walk(value, cls, f)

    walk(ast, Query, "")
    return tuple(sorted(kept))


_new = object.__new__
_set = object.__setattr__
# A token made by hand (NamedTuple's _replace goes through a keyword-argument call).
_new_token = tuple.__new__


# The plain values of a tree, as types: a placeholder is of a subclass of one.
_LEAVES = frozenset({str, int, float, bool, type(None)})
_NODES: dict[type, bool] = {}


def _is_node(cls: type) -> bool:
    """Whether instances of ``cls`` are nodes of a syntax tree (dataclass instances)."""
    found = _NODES.get(cls)
    if found is None:
        found = _NODES[cls] = is_dataclass(cls)
    return found
Builder = Callable[[list[Token]], Any]


def _builder(node: Any, live: set[int]) -> Builder:
    """A function of a query's tokens making ``node`` with the tokens' texts and values in
    place of its placeholders; what holds none is shared, not copied. A placeholder
    directly in a node or a tuple is read there (its token's index and field), not
    through a function of its own: a query's tree has a dozen or more of them."""
    cls = type(node)
    if cls in _PLACEHOLDERS:
        index, at = _slot_of(node)
        return lambda tokens: tokens[index][at]
    if id(node) not in live and cls is not Query:
        return lambda tokens: node
    if cls is tuple:
        if all(type(x) in _PLACEHOLDERS for x in node):
            slots = [_slot_of(x) for x in node]
            if len(slots) == 1:
                ((index, at),) = slots
                return lambda tokens: (tokens[index][at],)
            return lambda tokens: tuple([tokens[i][a] for i, a in slots])
        parts = [_builder(x, live) for x in node]
        return lambda tokens: tuple([part(tokens) for part in parts])
    state = dict(node.__dict__)
    leaves = []
    made = []
    for name, value in state.items():
        if name == "spans" or id(value) not in live:
            continue
        if type(value) in _PLACEHOLDERS:
            leaves.append((name, *_slot_of(value)))
        else:
            made.append((name, _builder(value, live)))

    def build(tokens: list[Token]) -> Any:
        d = state.copy()
        for name, index, at in leaves:
            d[name] = tokens[index][at]
        for name, part in made:
            d[name] = part(tokens)
        new = _new(cls)
        _set(new, "__dict__", d)
        return new

    return build


def _slot_of(placeholder: Any) -> tuple[int, int]:
    """The index of a placeholder's token, and the token's field it stands for."""
    index, where = placeholder.slot
    return index, (1 if where == "text" else 5)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


class _Shape:
    """What is known of one shape: how often it was seen until its pinned tokens are
    known, then per values of its pinned tokens their template, or how often they were
    seen (an int), or None (that combination is not cached)."""

    __slots__ = ("seen", "pinned", "templates", "first")

    def __init__(self) -> None:
        self.seen = 0
        self.pinned: tuple[int, ...] | None = None
        self.templates: dict[tuple[str, ...], _Template | int | None] = {}
        # The first query seen (its text, tokens and tree) while no template was tried:
        # the second sighting makes the template from it rather than parsing its own
        # text. Its tokens are kept, not made again from the text: a query of a text of
        # several (parse_piece_cached) is some of its text's tokens.
        self.first: tuple[str, list[Token], Query] | None = None


class ShapeCache:
    """Parsed queries by shape (see the module's docstring). Thread-safe: a template is
    made outside the lock and published whole."""

    def __init__(
        self, parse_tokens: Callable[[str, list[Token]], Query], max_shapes: int = MAX_SHAPES
    ) -> None:
        self._parse = parse_tokens
        self._max = max_shapes
        self._shapes: dict[str, _Shape] = {}
        self._entries = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._shapes.clear()

    def parse(self, text: str) -> Query:
        return self.parse_tokens(text, tokenize(text))

    def template_of(self, tokens: list[Token]) -> _Template | None:
        """The template :meth:`parse_tokens` would fill for ``tokens``, or None (no
        parse, and not counted as a hit or a miss)."""
        shape = self._shapes.get(shape_of(tokens)[0])
        if shape is None or shape.pinned is None:
            return None
        entry = shape.templates.get(tuple([tokens[i][1] for i in shape.pinned]))
        return entry if type(entry) is _Template else None

    def parse_tokens(self, text: str, tokens: list[Token]) -> Query:
        """:meth:`parse` of ``text`` already split into ``tokens`` (for the parser's
        function, which may read only some of ``text``'s tokens)."""
        key, free = shape_of(tokens)
        shape = self._shapes.get(key)
        seen = 0  # sightings of this shape (with these pinned values) before this one
        if shape is not None:
            first = shape.first if shape.pinned is None else None
            if first is not None and free:
                built = self._second(shape, first, tokens, free)
                if built is not None:
                    self.misses += 1
                    return built
                # Else its pinned tokens are known now, and these tokens' values have no
                # template yet (or the shape none at all): as below.
            if shape.pinned is None:
                seen = shape.seen
            else:
                entry = shape.templates.get(tuple([tokens[i][1] for i in shape.pinned]), 0)
                if type(entry) is _Template:
                    self.hits += 1
                    return entry.fill(tokens)
                if entry is None:
                    self.misses += 1
                    return self._parse(text, tokens)
                seen = entry  # type: ignore[assignment]
        self.misses += 1
        query = self._parse(text, tokens)  # the parser's own errors, if any
        with self._lock:
            if shape is None or self._shapes.get(key) is not shape:
                shape = self._shapes.get(key)
                if shape is None:
                    self._grow()
                    shape = self._shapes[key] = _Shape()
            if shape.pinned is None:
                shape.seen = seen = max(shape.seen, seen) + 1
                if seen == 1 and free:
                    shape.first = (text, tokens, query)
            else:
                values = tuple([tokens[i][1] for i in shape.pinned])
                if values not in shape.templates:
                    self._grow()
                seen += 1
                shape.templates[values] = seen
        # A template is made on a shape's second sighting (with the same pinned values),
        # so that a batch of queries of as many shapes costs no more than parsing them.
        if seen < 2 or not free:
            return query
        made = _make_template(self._parse, text, tokens, free, query, shape.pinned)
        with self._lock:
            kept = self._keep(shape, made, tokens)[0]
        # The query as its template fills it (equal to the parser's, checked): compiling
        # it teaches the template the compiler's shape, and the next query of the shape
        # is compiled from its tokens (ecq.compiler.shapes.text_parts).
        return query if kept is None else kept.fill(tokens)

    def _second(
        self, shape: _Shape, first: tuple[str, list[Token], Query], tokens: list[Token], free: list[int]
    ) -> Query | None:
        """A shape's second sighting (no template tried yet): its template made from the
        first query's tokens and tree, which it is checked against, then filled with
        ``tokens``; None when there is no template for ``tokens``' pinned values (the
        caller parses them). The tokens have the first's shape, so they parse as its do,
        and their free tokens (``free``) are at the same places."""
        text, first_tokens, query = first
        made = _make_template(self._parse, text, first_tokens, free, query, None)
        with self._lock:
            if shape.first is first:
                shape.first = None
            kept, values = self._keep(shape, made, first_tokens)
            if kept is not None and tuple([tokens[i][1] for i in kept.pinned]) != values:
                kept = None  # these tokens' pinned values are not the first's
        return None if kept is None else kept.fill(tokens)

    def _keep(
        self, shape: _Shape, made: _Template | None, tokens: list[Token]
    ) -> tuple[_Template | None, tuple[str, ...]]:
        """Keep ``made``, the template made from ``tokens`` (None: none could be), as
        the template of ``tokens``' pinned values, the shape's pinned tokens set by the
        first template tried; returns what is kept (None when the pinned tokens differ)
        and those values. Called with the lock held."""
        if shape.pinned is None:
            shape.pinned = made.pinned if made is not None else ()
        values = tuple([tokens[i][1] for i in shape.pinned])
        if values not in shape.templates:
            self._grow()
        kept = made if made is not None and made.pinned == shape.pinned else None
        shape.templates[values] = kept
        return kept, values

    def _grow(self) -> None:
        """Count one more entry (a shape, or a shape's pinned values); past the bound the
        cache starts again. Called with the lock held."""
        self._entries += 1
        if self._entries > self._max:
            self._shapes.clear()
            self._entries = 1


def _make_template(
    parse: Callable[[str, list[Token]], Query],
    text: str,
    tokens: list[Token],
    free: list[int],
    fresh: Query,
    pinned_before: tuple[int, ...] | None,
) -> _Template | None:
    """The template of ``tokens``' shape, or None where its placeholders cannot stand
    for the free tokens (see the module's docstring)."""
    pinned = set(pinned_before or ())
    free_tokens = frozenset(free)
    # WITHIN's number is not copied but made seconds (duration_seconds): found by its value.
    durations = [
        i
        for i in free
        if i > 0 and tokens[i][0] == NUMBER and tokens[i - 1][0] == IDENT and tokens[i - 1][4] == "WITHIN"
    ]
    within: tuple[int, str | None] | None = None
    if len(durations) == 1:
        unit_tok = tokens[durations[0] + 1]
        unit = unit_tok[1] if unit_tok[0] == IDENT and unit_tok[4] not in CLAUSE_KEYWORDS else None
        within = (durations[0], unit)
    for _ in range(_ATTEMPTS):
        slots: dict[tuple[int, str], Token] = {}
        marked: list[Token] = []
        for i, tok in enumerate(tokens):
            # Each token at line i, column 0: a span or an error names its token's index.
            if i in pinned or i not in free_tokens:
                marked.append(_new_token(Token, (tok[0], tok[1], i, 0, tok[4], tok[5])))
                continue
            kind, raw, value = tok[0], tok[1], tok[5]
            ph_text = _placeholder(_PhStr, f"\x00{i}", (i, "text"))
            if kind == IDENT:
                marked.append(_new_token(Token, (kind, ph_text, i, 0, tok[4], value)))
                slots[(i, "text")] = tok
            else:
                if isinstance(value, str):
                    ph_value: Any = _placeholder(_PhStr, f"\x00v{i}", (i, "value"))
                elif isinstance(value, int):
                    ph_value = _placeholder(_PhInt, 10**40 + i, (i, "value"))
                else:
                    ph_value = _placeholder(_PhFloat, 1e10 + i, (i, "value"))
                marked.append(_new_token(Token, (kind, ph_text, i, 0, tok[4], ph_value)))
                slots[(i, "text")] = tok
                slots[(i, "value")] = tok
            del raw
        try:
            ast = parse(text, marked)
        except Exception as err:  # noqa: BLE001 - any failure of a placeholder pins a token
            at = err.line if isinstance(err, ParseError) else None
            candidates = [i for i in free if i not in pinned and (at is None or i <= at)]
            if not candidates:
                return None
            pinned.add(candidates[-1])
            continue
        live: set[int] = set()
        landed: dict[int, bool] = {}
        bad: set[int] = set()
        try:
            _walk(ast, None, live, landed, bad)
        except TypeError:
            return None
        held = None
        if within is not None and within[0] not in pinned and not landed.get(within[0]):
            ph = marked[within[0]][5]
            if type(ast.within) is float and ast.within == duration_seconds(ph, within[1]):  # type: ignore[arg-type]
                held = within
                landed[within[0]] = True
        unused = {i for i in free if i not in pinned and not landed.get(i)}
        if bad or unused:
            pinned |= bad | unused
            continue
        spans: dict[str, int] = {}
        for path, (line, column, _) in ast.spans.items():
            if column != 0 or not 0 <= line < len(tokens):
                return None
            spans[path] = line
        template = _Template(ast, live, spans, tuple(sorted(pinned)), held, _as_written(ast, fresh, tokens))
        if pinned_before is not None and template.pinned != tuple(sorted(pinned_before)):
            return None
        try:
            again = template.fill(tokens)
        except (IndexError, TypeError):
            return None
        if repr(again) != repr(fresh) or again.spans != fresh.spans:
            return None
        return template
    return None


def _walk(node: Any, parent: Any, live: set[int], landed: dict[int, bool], bad: set[int]) -> bool:
    """Note in ``live`` every object holding a placeholder, in ``landed`` every token whose
    placeholder was found, in ``bad`` every one found where the parser may have read it
    (a literal's value outside a ``Lit``). True if ``node`` holds a placeholder."""
    cls = type(node)
    if cls in _PLACEHOLDERS:
        index, where = node.slot
        landed[index] = True
        if where == "value" and not isinstance(node, str) and type(parent) is not Lit:
            bad.add(index)
        if where == "value" and isinstance(node, str) and type(parent) not in (Lit, Query, ReturnItem):
            bad.add(index)
        live.add(id(node))
        return True
    if cls in _LEAVES:
        return False
    if cls is tuple:
        holds = False
        for x in node:
            holds |= _walk(x, parent, live, landed, bad)
    elif _is_node(cls):
        holds = False
        for f in _fields(cls):
            if f == "spans":
                continue
            value = getattr(node, f)
            # (a plain value holds no placeholder: a placeholder is of a subclass)
            if type(value) not in _LEAVES:
                holds |= _walk(value, node, live, landed, bad)
    elif isinstance(node, (str, int, float, bool, type(None))):
        return False
    else:
        # Something the template cannot rebuild (a dict, a list): counts as holding a
        # placeholder nowhere, and every free token it might hide is left pinned.
        raise TypeError(f"unexpected {cls.__name__} in a parsed query")
    if holds:
        live.add(id(node))
    return holds


_CACHE: ShapeCache | None = None
_PIECES: ShapeCache | None = None


def parse_cached(
    text: str, parse_tokens: Callable[[str, list[Token]], Query], tokens: list[Token] | None = None
) -> Query:
    """``parse_tokens(text, tokenize(text))`` (``tokens``: that, when given), from the
    process's shape cache."""
    global _CACHE
    cache = _CACHE
    if cache is None:
        cache = _CACHE = ShapeCache(parse_tokens)
    return cache.parse_tokens(text, tokenize(text) if tokens is None else tokens)


def template_of(tokens: list[Token]) -> _Template | None:
    """The template of the process's shape cache (:func:`parse_cached`) that parsing the
    query of ``tokens`` would fill, or None."""
    cache = _CACHE
    return None if cache is None else cache.template_of(tokens)


def parse_piece_cached(
    text: str, tokens: list[Token], parse_piece: Callable[[str, list[Token]], Query]
) -> Query:
    """``parse_piece(text, tokens)`` (one query of a text of several), from the process's
    shape cache of such pieces."""
    global _PIECES
    cache = _PIECES
    if cache is None:
        cache = _PIECES = ShapeCache(parse_piece)
    return cache.parse_tokens(text, tokens)
