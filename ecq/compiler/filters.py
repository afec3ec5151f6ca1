"""The filter index: which of many one-event filters an event passes, in O(log F + result).

Every query with its own bounds (``$20 < A.payment < $50``) is its own filter, so
evaluating the filters of a class one predicate at a time costs as many calls as there
are queries. The index does what Esper's and Siddhi's filter indexes do, with query
bitsets: a filter is split into **atoms** on one attribute compared with a constant
(:func:`split_filter`), and per attribute the index keeps

- **thresholds**, sorted, for ``<``, ``<=``, ``>``, ``>=`` on numbers and on strings,
  with a **cumulative bitset** per position: the filters whose lower bounds a value
  passes are a prefix of the lower bounds sorted ascending, those whose upper bounds it
  passes a suffix, so each is one bisect and one lookup (a bound pair is two
  half-lines, both of which must hold); for numbers, the thresholds of both families
  together cut the line into **cells** (between two thresholds, or at one), each with
  the filters a number there fails, so a number is one bisect and one lookup for both;
- **hash tables** for ``=`` (and ``IN`` lists) and ``!=`` on numbers, strings and
  booleans (``true`` is not ``1``: docs/semantics.md §7).

An event fails a filter on an attribute when one of the filter's atoms on it fails;
the index gathers those failures as one bitset per attribute (``has ^ passed`` per
family of atoms: only the failing filters' bits), and the filters passed are the
others. The conjuncts the index cannot take (conditions on several attributes,
arithmetic on the attribute, ``OR``, ``NOT``, equivalence tests) stay a **residual**
predicate, evaluated only for the filters whose atoms all passed.

Semantics are those of :mod:`ecq.compiler.conditions`, exactly (the property tests hold the
index to the filters' own predicates): a comparison reading a missing attribute is
false; numbers (``int``, ``float``) compare with numbers and strings with strings, any
other pair is unequal (``!=`` true, everything else false); booleans are equal or
unequal only to booleans; NaN equals nothing and compares false.

The caller (:class:`ecq.structures.ecq.SlotFilter`) gives each filter its queries (their
numbers) and reads the union of the passing filters' queries as a set (an int). A
filter keeps its queries as numbers, not as such a set (see :class:`FilterIndex`): the
sets, as wide as the highest query number, are made when an event first reads them
(the pure kernel's). The compiled kernel indexes the same filters over local numbers
(:class:`LocalSlots`), so that its sets are as wide as one class's queries rather than
all of them.
Registering is O(atoms); the sorted arrays and cumulative bitsets of an attribute are
rebuilt, once, the first time an event reads them after a change (O(F log F + F·w)
for F filters on the attribute, w words per bitset), so a burst of registrations costs
one rebuild, not one per query.
"""

from __future__ import annotations

import struct
import sys
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ecq.compiler.conditions import (
    FALLBACK_FIELDS,
    FLIPPED,
    MISSING,
    PredFn,
    compile_predicate,
    compile_value,
)
from ecq.compiler.shapes import fields_of
from ecq.language.ast import Agg, AttrRef, BoolOp, Compare, Equiv, Expr, InList, Lit

__all__ = [
    "Atom",
    "AttrIndex",
    "Bounds",
    "Constraint",
    "FilterIndex",
    "LocalSlots",
    "bits_of",
    "constraints_of",
    "filter_id",
    "filter_key",
    "filter_skeleton",
    "literal_key",
    "residual_predicate",
    "split_filter",
    "value_key",
]

_BOOL = "bool"  # the tag that keeps ``true`` apart from ``1`` in the hash tables


def value_key(value: Any) -> Any:
    """The hash-table key of a literal or an event's value: numbers and strings as
    themselves (``1 == 1.0``), booleans tagged (``true`` is not ``1``)."""
    return (_BOOL, value) if type(value) is bool else value


def _kind(value: Any) -> str:
    """``num`` (int, float: not bool, not NaN), ``str``, ``bool``, ``nan`` or ``other``,
    as :func:`ecq.compiler.conditions.compare_values` tells them apart (exact types)."""
    t = type(value)
    if t is int:
        return "num"
    if t is float:
        return "nan" if value != value else "num"
    if t is str:
        return "str"
    if t is bool:
        return "bool"
    return "other"


class Atom(NamedTuple):
    """``attr op value`` with ``op`` one of ``< <= > >= = !=``, or ``in`` with ``value``
    a tuple of literals (``attr IN (...)``). A named tuple: registering a query with
    its own bounds makes one per bound."""

    attr: str
    op: str
    value: Any


# ----------------------------------------------------------------- splitting


def filter_key(conjuncts: tuple[Expr, ...]) -> tuple[Any, ...]:
    """The key under which identical filters are one: the conjuncts (written with one
    placeholder for the component) and which of their literals are booleans, since
    ``Lit(True) == Lit(1)`` as Python values while ``x = true`` and ``x = 1`` are
    different filters (docs/semantics.md §7)."""
    return (conjuncts, tuple(type(v) is bool for v in _literals(conjuncts)))


# What identifies a filter where it is looked up once per query (a slot's filters, in
# a registration): its skeleton (a string) and its literals (see filter_id).
FilterId = tuple[str, tuple[tuple[str, Any], ...]]


def filter_id(conjuncts: tuple[Expr, ...]) -> FilterId:
    """What identifies the filter of ``conjuncts`` as :func:`filter_key` does, but cheap
    to hash and compare: the conjuncts written with their literals left out (a string,
    whose hash is kept) and the literals in order, each with its type
    (:func:`literal_key`). Two equal ids are equal filters (the same expressions, the
    same literals of the same types); hashing a :func:`filter_key` is a
    Python call per node of its expressions, and it was a quarter of registering
    100,000 conditioned queries. Plain strings and numbers in tuples, so a snapshot
    writes equal ids once. The compiler puts it on each component (``Comp.filter_id``),
    made for a query of a known shape from the shape's skeleton and the query's
    literals (:func:`filter_skeleton`)."""
    skeleton, lits = filter_skeleton(conjuncts)
    return skeleton, tuple([literal_key(lit.value) for lit in lits])


def literal_key(value: Any) -> tuple[str, Any]:
    """A literal's value in a :func:`filter_id`: tagged with its type, so that ``true``
    is not ``1`` (docs/semantics.md §7), nor ``1`` ``1.0``: arithmetic on an int is
    exact where a float's rounds (``x + 1 > 2**60`` and ``x + 1.0 > 2**60`` differ at
    ``x = 2**60``), so such filters are not taken for one another."""
    t = type(value)
    # (One name object per type: a builtin type's __name__ is a new string each time,
    # and every filter id's hash would then hash it anew.)
    name = _TYPE_NAMES.get(t)
    if name is None:
        name = _TYPE_NAMES[t] = sys.intern(t.__name__)
    return (name, value)


_TYPE_NAMES: dict[type, str] = {}


def filter_skeleton(conjuncts: tuple[Expr, ...]) -> tuple[str, list[Lit]]:
    """The first part of :func:`filter_id`, and the ``Lit`` nodes whose values make the
    second, in that order."""
    lits: list[Lit] = []
    return repr(_skeleton(conjuncts, lits)), lits


def _skeleton(node: Any, lits: list[Lit]) -> Any:
    # A node as (class name, its fields' skeletons), a literal as None (noted in lits).
    cls = type(node)
    if cls is Lit:
        lits.append(node)
        return None
    if cls is tuple:
        return tuple([_skeleton(x, lits) for x in node])
    names = fields_of(cls)
    if names is None:
        return node  # a plain value: a name, an operator
    return (cls.__name__, *[_skeleton(getattr(node, name), lits) for name in names])


def _literals(node: Any) -> list[Any]:
    """The literals' values in ``node`` (an expression or a tuple of them), in order."""
    out: list[Any] = []
    todo = [node]
    while todo:
        x = todo.pop()
        cls = type(x)
        if cls is Lit:
            out.append(x.value)
        elif cls is tuple:
            todo.extend(reversed(x))
        else:
            names = fields_of(cls)
            if names is not None:
                todo.extend(reversed([getattr(x, name) for name in names]))
    return out


def split_filter(conjuncts: Iterable[Expr]) -> tuple[list[Atom], list[Expr]]:
    """A one-event filter (the conjunction of ``conjuncts``, each reading one component
    through ``AttrRef``) as the atoms the index takes and the residual conjuncts it
    does not. The conjunction of both is the filter, exactly."""
    atoms: list[Atom] = []
    rest: list[Expr] = []
    todo = list(conjuncts)
    while todo:
        expr = todo.pop(0)
        if isinstance(expr, BoolOp) and expr.op == "and":
            todo[:0] = expr.operands
            continue
        atom = _atom(expr)
        if atom is None:
            rest.append(expr)
        else:
            atoms.append(atom)
    return atoms, rest


def _atom(expr: Expr) -> Atom | None:
    if isinstance(expr, AttrRef):
        # A bare attribute as a condition is true when it is the boolean true: ``= true``.
        return Atom(expr.attr, "=", True)
    if isinstance(expr, Compare):
        left, right, op = expr.left, expr.right, expr.op
        if not isinstance(left, AttrRef):
            left, right, op = right, left, FLIPPED[op]
        if not isinstance(left, AttrRef):
            return None
        ok, value = _constant(right)
        if not ok or _kind(value) in ("nan", "other"):
            return None
        if op in ("<", "<=", ">", ">=") and _kind(value) == "bool":
            return None  # never true: left as a residual, it costs nothing to keep
        return Atom(left.attr, op, value)
    if isinstance(expr, InList) and isinstance(expr.operand, AttrRef):
        values = []
        for option in expr.values:
            ok, value = _constant(option)
            if not ok:
                return None
            if _kind(value) in ("num", "str", "bool"):
                values.append(value)  # NaN (or a missing value) equals nothing: dropped
        return Atom(expr.operand.attr, "in", tuple(values))
    return None


def _constant(expr: Expr) -> tuple[bool, Any]:
    """Whether ``expr`` reads no event, and then its value (literals, arithmetic on them)."""
    if isinstance(expr, Lit):
        return True, expr.value
    if _reads_events(expr):
        return False, None
    value = compile_value(expr, lambda ref: 0, single=True)(None)
    return value is not MISSING, value


def _reads_events(expr: Any) -> bool:
    if isinstance(expr, (AttrRef, Agg, Equiv)):
        return True
    if isinstance(expr, tuple):
        return any(_reads_events(x) for x in expr)
    fields = getattr(expr, "__dataclass_fields__", None)
    return fields is not None and any(_reads_events(getattr(expr, f)) for f in fields)


# --------------------------------------------------------------- constraints


@dataclass
class Constraint:
    """What one filter asks of one attribute, its atoms merged: the tightest lower and
    upper bound per kind (``(threshold, inclusive)``), the values it must equal (the
    intersection of its ``=`` and ``IN`` atoms; None: no such atom) and those it must
    not (the union of its ``!=`` atoms). Exactly the conjunction of the atoms."""

    lower: dict[str, tuple[Any, bool]] = field(default_factory=dict)  # kind -> bound
    upper: dict[str, tuple[Any, bool]] = field(default_factory=dict)
    equal: frozenset[Any] | None = None
    unequal: set[Any] = field(default_factory=set)

    def add(self, atom: Atom) -> None:
        op, value = atom.op, atom.value
        if op in ("=", "in"):
            keys = frozenset(value_key(v) for v in (value if op == "in" else (value,)))
            self.equal = keys if self.equal is None else self.equal & keys
        elif op == "!=":
            self.unequal.add(value_key(value))
        else:
            kind = _kind(value)
            inclusive = op in ("<=", ">=")
            if op in (">", ">="):
                old = self.lower.get(kind)
                # The tighter lower bound: the larger one; at a tie, the exclusive one.
                if old is None or value > old[0] or (value == old[0] and not inclusive):
                    self.lower[kind] = (value, inclusive)
            else:
                old = self.upper.get(kind)
                if old is None or value < old[0] or (value == old[0] and not inclusive):
                    self.upper[kind] = (value, inclusive)


def constraints_of(atoms: list[Atom]) -> dict[str, Constraint]:
    """The atoms of one filter merged per attribute."""
    constraints: dict[str, Constraint] = {}
    for atom in atoms:
        c = constraints.get(atom.attr)
        if c is None:
            c = constraints[atom.attr] = Constraint()
        c.add(atom)
    return constraints


# ------------------------------------------------------------------- the index


class Bounds:
    """One family of half-lines (the lower or the upper bounds of one kind): sorted
    thresholds and, per position, the bitset of the filters a value there *fails*
    (cumulative: lower bounds a value fails are a suffix of the ascending thresholds,
    upper bounds a prefix), so a family is one bisect and one lookup per event."""

    __slots__ = ("lower", "t", "inclusive", "fail", "has")

    def __init__(self, entries: dict[tuple[Any, bool], int], lower: bool) -> None:
        # Lower bounds: ascending, inclusive first at a tie (``x >= 5`` passes at 5,
        # ``x > 5`` does not). Upper bounds: ascending, exclusive first at a tie.
        order = sorted(entries, key=lambda b: (b[0], not b[1] if lower else b[1]))
        self.lower = lower
        self.t = [b[0] for b in order]
        self.inclusive = [b[1] for b in order]
        bits = [entries[b] for b in order]
        fail = [0] * (len(bits) + 1)
        if lower:
            for i in range(len(bits) - 1, -1, -1):  # fail[i]: thresholds i .. (none passed)
                fail[i] = fail[i + 1] | bits[i]
            self.has = fail[0]
        else:
            for i, b in enumerate(bits):  # fail[j]: thresholds .. j - 1
                fail[i + 1] = fail[i] | b
            self.has = fail[-1]
        self.fail = fail

    def at(self, v: Any) -> int:
        """Where ``v`` cuts the thresholds: the index of ``fail`` for ``v``. Lower
        bounds pass when ``t < v`` or ``t == v`` inclusive; upper bounds when ``t > v``
        or ``t == v`` inclusive."""
        t = self.t
        if self.lower:
            i = bisect_left(t, v)
            if i < len(t) and t[i] == v and self.inclusive[i]:
                i += 1
            return i
        j = bisect_right(t, v)
        if j > 0 and t[j - 1] == v and self.inclusive[j - 1]:
            j -= 1
        return j

    def failed(self, v: Any) -> int:
        """The filters of this family that ``v`` fails. O(log F)."""
        return self.fail[self.at(v)]


class AttrIndex:
    """The atoms of every filter on one attribute (see the module's docstring)."""

    __slots__ = (
        "name",
        "members",
        "dirty",
        "fallback",
        "bounds",
        "equal",
        "has_equal",
        "unequal",
        "has",
        "cmp_all",
        "not_num",
        "not_str",
        "cuts",
        "cells",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        # An event field read when the attribute is absent (ecq.compiler.conditions.lookup).
        self.fallback = name in FALLBACK_FIELDS
        # filter id -> (its queries, ascending: the list its FilterIndex holds, shared,
        # so a query joining the filter is seen here; its constraint on this attribute)
        self.members: dict[int, tuple[list[int], Constraint]] = {}
        self.dirty = True
        # Built from ``members`` by ``build``:
        self.bounds: list[Bounds | None] = [None] * 4  # num lower, num upper, str lower, str upper
        self.equal: dict[Any, int] = {}  # value key -> filters that must equal it
        self.has_equal = 0
        self.unequal: dict[Any, int] = {}  # value key -> filters that must not equal it
        self.has = 0  # filters with any atom here
        self.cmp_all = 0  # filters with a bound (a boolean, NaN or other value fails them)
        self.not_num = 0  # filters with a bound a number fails by kind (a string bound)
        self.not_str = 0
        # The numeric thresholds of both families, distinct and ascending, and per cell
        # of the line they cut (2i: below cuts[i] and above cuts[i - 1]; 2i + 1: cuts[i]
        # itself) the filters a number there fails, so a number is one bisect and one
        # lookup however many families: the numbers' side of ``failed``.
        self.cuts: list[Any] = []
        self.cells: list[int] = []

    def build(self) -> None:
        """Sort the thresholds and make the cumulative bitsets. O(F log F + F·w)."""
        entries: list[dict[tuple[Any, bool], int]] = [{}, {}, {}, {}]
        self.equal, self.unequal = {}, {}
        self.has = self.has_equal = 0
        for queries, c in self.members.values():
            # The filter's set made here, when first read after a change, not kept by
            # the filter: as wide as the highest query number, it made each of 100,000
            # registrations an operation on a 12 KB integer (see FilterIndex).
            bits = bits_of(queries)
            self.has |= bits
            for lower, bounds in ((True, c.lower), (False, c.upper)):
                for kind, bound in bounds.items():
                    family = entries[_FAMILY[kind, lower]]
                    family[bound] = family.get(bound, 0) | bits
            if c.equal is not None:
                self.has_equal |= bits
                for key in c.equal:
                    self.equal[key] = self.equal.get(key, 0) | bits
            for key in c.unequal:
                self.unequal[key] = self.unequal.get(key, 0) | bits
        self.bounds = [Bounds(e, f % 2 == 0) if e else None for f, e in enumerate(entries)]
        has = [b.has if b is not None else 0 for b in self.bounds]
        self.not_num = has[2] | has[3]
        self.not_str = has[0] | has[1]
        self.cmp_all = self.not_num | self.not_str
        self._cells()
        self.dirty = False

    def _cells(self) -> None:
        """The cells of the numeric thresholds (see ``__init__``): in the open cell
        below ``u`` no threshold lies between the value and ``u``, so each family is
        cut where ``u`` is (``bisect_left``); at ``u`` itself, as ``Bounds.at`` says.
        O(D·w) for D distinct thresholds."""
        lo, up = self.bounds[0], self.bounds[1]
        self.cuts = sorted({*(lo.t if lo else ()), *(up.t if up else ())})
        self.cells = []

        def cell(i: int, j: int) -> int:
            return self.not_num | (lo.fail[i] if lo else 0) | (up.fail[j] if up else 0)

        for u in self.cuts:
            self.cells.append(cell(bisect_left(lo.t, u) if lo else 0, bisect_left(up.t, u) if up else 0))
            self.cells.append(cell(lo.at(u) if lo else 0, up.at(u) if up else 0))
        self.cells.append(cell(len(lo.t) if lo else 0, len(up.t) if up else 0))

    def failed(self, event: Any) -> int:
        """The filters (bits) that ``event`` fails on this attribute. O(log F)."""
        if self.dirty:
            self.build()
        v = event.attrs.get(self.name, MISSING)
        if v is MISSING:
            if not self.fallback:
                return self.has
            v = getattr(event, self.name)
        t = type(v)
        if t is int or t is float:
            if v != v:  # NaN: every comparison false, unequal to everything
                return self.cmp_all | self.has_equal
            # The cell of v: one bisect for both families of bounds.
            cuts = self.cuts
            i = bisect_left(cuts, v)
            out = self.cells[2 * i + 1 if i < len(cuts) and cuts[i] == v else 2 * i]
            lo = up = None
        elif t is str:
            out = self.not_str
            lo, up = self.bounds[2], self.bounds[3]
        elif t is bool:
            out = self.cmp_all
            lo = up = None
            v = (_BOOL, v)
        else:
            return self.cmp_all | self.has_equal  # another kind: only != holds
        if lo is not None:
            out |= lo.fail[lo.at(v)]
        if up is not None:
            out |= up.fail[up.at(v)]
        if self.has_equal:
            out |= self.has_equal ^ self.equal.get(v, 0)
        if self.unequal:
            out |= self.unequal.get(v, 0)
        return out


# The place of each kind of bound in AttrIndex.bounds.
_FAMILY = {("num", True): 0, ("num", False): 1, ("str", True): 2, ("str", False): 3}


class FilterIndex:
    """The filters of one place (a class's position in the sequences, for
    :class:`ecq.structures.ecq.SlotFilter`): each has an id, queries, atoms and perhaps
    a residual predicate. ``passing(event)`` is the union of the bits of the queries of
    the filters ``event`` passes.

    A filter's queries are kept as their numbers (``queries``: an ascending list), not as
    a bitset over the query numbers: such a set is as wide as the highest number, so with
    sets, registering the 100,000th query (a filter of its own) made and merged 12 KB
    integers, and registering grew with the number of queries registered (71 µs a
    conditioned query at 100,000 against 36 at 10,000; the sets of 100,000 queries'
    filters were ~600 MB). The sets over query numbers are made only where they are read
    (the pure kernel's ``passing``: the attributes' cumulative sets when they are rebuilt,
    ``all`` and the residual filters' sets when first read after a change); the compiled
    kernel reads the numbers (:class:`LocalSlots`) and never makes them."""

    __slots__ = ("attrs", "queries", "residual", "_attrs_of", "_all", "_residual_bits")

    def __init__(self) -> None:
        self.attrs: dict[str, AttrIndex] = {}
        # filter id -> its queries, ascending (the list each of its attributes shares).
        self.queries: dict[int, list[int]] = {}
        # filter id -> its residual predicate (evaluated after the atoms).
        self.residual: dict[int, PredFn] = {}
        self._attrs_of: dict[int, dict[str, Constraint]] = {}
        # Made from ``queries`` when read (``all``, ``residual_bits``); None after a change.
        self._all: int | None = 0
        self._residual_bits: list[tuple[PredFn, int]] | None = []

    def add(self, fid: int, queries: list[int], atoms: list[Atom], residual: PredFn | None) -> None:
        """Add filter ``fid`` (new) with ``queries`` (query numbers, ascending; the list
        is kept, not copied). O(atoms)."""
        self.add_constraints(fid, queries, constraints_of(atoms), residual)

    def add_constraints(
        self, fid: int, queries: list[int], constraints: dict[str, Constraint], residual: PredFn | None
    ) -> None:
        """Add filter ``fid`` (new) with ``queries`` (ascending, kept), its atoms already
        merged per attribute (``constraints``, not copied: they are not changed once
        added). O(attributes), whatever the number of queries registered."""
        self.add_many([(fid, queries, constraints, residual)])

    def add_many(
        self, filters: Iterable[tuple[int, list[int], dict[str, Constraint], PredFn | None]]
    ) -> None:
        """:meth:`add_constraints` of each of ``filters`` (``(fid, queries,
        constraints, residual)``), in order: a bulk registration's new filters of a
        place in one call."""
        attrs_of, queries_of, attrs, residuals = self._attrs_of, self.queries, self.attrs, self.residual
        for fid, queries, constraints, residual in filters:
            attrs_of[fid] = constraints
            queries_of[fid] = queries
            for name, c in constraints.items():
                a = attrs.get(name)
                if a is None:
                    a = attrs[name] = AttrIndex(name)
                a.members[fid] = (queries, c)
                a.dirty = True
            if residual is not None:
                residuals[fid] = residual
                self._residual_bits = None
        self._all = None

    def join(self, fid: int, numbers: Iterable[int]) -> None:
        """Queries ``numbers`` (none of them in it) join filter ``fid``. O(its atoms +
        its queries)."""
        queries = self.queries[fid]
        for n in numbers:
            if not queries or n > queries[-1]:
                queries.append(n)  # the usual case: query numbers are handed out ascending
            else:
                insort(queries, n)
        self._changed(fid)

    def leave(self, fid: int, numbers: Iterable[int]) -> None:
        """Queries ``numbers`` leave filter ``fid`` (those not in it are ignored); one
        left without queries is then removed by the caller (:meth:`remove`). O(its atoms + its
        queries)."""
        queries = self.queries[fid]
        for n in numbers:
            i = bisect_left(queries, n)
            if i < len(queries) and queries[i] == n:
                del queries[i]
        self._changed(fid)

    def _changed(self, fid: int) -> None:
        # The filter's list changed in place: what was made from it is made again.
        for name in self._attrs_of[fid]:
            self.attrs[name].dirty = True
        if fid in self.residual:
            self._residual_bits = None
        self._all = None

    def remove(self, fid: int) -> None:
        """Remove filter ``fid``. O(its atoms)."""
        for name in self._attrs_of.pop(fid):
            a = self.attrs[name]
            del a.members[fid]
            if a.members:
                a.dirty = True
            else:
                del self.attrs[name]
        del self.queries[fid]
        if self.residual.pop(fid, None) is not None:
            self._residual_bits = None
        self._all = None

    @property
    def all(self) -> int:
        """The queries of every filter, as a set of query numbers. Made when first read
        after a change, O(queries + its width / 8)."""
        got = self._all
        if got is None:
            got = self._all = bits_of([n for queries in self.queries.values() for n in queries])
        return got

    def residual_bits(self) -> list[tuple[PredFn, int]]:
        """Each residual predicate with its filter's queries as a set of query numbers,
        in the order the filters came. Made when first read after a change."""
        got = self._residual_bits
        if got is None:
            got = self._residual_bits = [
                (pred, bits_of(self.queries[f])) for f, pred in self.residual.items()
            ]
        return got

    def passing(self, event: Any) -> int:
        """The bits of the filters ``event`` passes. O(attributes · log F) big-integer
        operations, plus one residual predicate per filter with one whose atoms passed."""
        failed = 0
        for a in self.attrs.values():
            failed |= a.failed(event)
        out = self.all & ~failed
        for pred, bits in self.residual_bits():
            if out & bits and not pred(event):
                out &= ~bits
        return out

    def constraints(self, fid: int) -> dict[str, Constraint]:
        """What filter ``fid`` asks of each attribute it reads."""
        return self._attrs_of[fid]

    def __len__(self) -> int:
        return len(self.queries)

    def _check(self) -> None:
        seen: set[int] = set()
        for queries in self.queries.values():
            assert queries and queries == sorted(set(queries)), "a filter's queries: some, ascending"
            assert seen.isdisjoint(queries), "a query has one filter in a place"
            seen.update(queries)
        for a in self.attrs.values():
            assert a.members, "an attribute without filters goes"
            for fid, (queries, _c) in a.members.items():
                assert self.queries[fid] is queries
        assert set(self.residual) <= set(self.queries)
        assert self.all == bits_of(sorted(seen))


def bits_of(numbers: Sequence[int]) -> int:
    """The set (an int) of exactly these numbers (not negative). O(numbers + largest /
    8); up to 8 numbers, each ORed in (O(numbers · largest / 64), one C operation each):
    most sets made from numbers (a filter's queries, a class's reverse links) hold a few
    of thousands, and a bytearray as wide as the largest, zeroed, filled and read back
    for each, cost more."""
    if len(numbers) <= 8:
        out = 0
        for b in numbers:
            out |= 1 << b
        return out
    buf = bytearray((max(numbers) >> 3) + 1)
    for b in numbers:
        buf[b >> 3] |= 1 << (b & 7)
    return int.from_bytes(buf, "little")


def _bit_numbers(bits: int) -> list[int]:
    """The numbers of the set bits of ``bits`` (not negative), ascending. A dense set is
    read as little-endian 64-bit words once, O(bits' words + set bits) (shifting it right
    by a word at a time would copy the rest of it each time, quadratic in its width: 13 ms
    for a set of 100,000 queries). A sparse one (a filter of a few queries among 100,000:
    most of a big index's) takes its highest bit off at a time, one C operation over its
    width each (up to a set bit per 256 of its width: measured, the two ways cost the
    same at about one per 200), about 20 times quicker than a pass over its words."""
    out: list[int] = []
    if bits <= 0:
        return out
    if bits.bit_count() <= max(16, bits.bit_length() >> 8):
        while bits:
            top = bits.bit_length() - 1
            out.append(top)
            bits ^= 1 << top
        out.reverse()
        return out
    data = bits.to_bytes((bits.bit_length() + 63) // 64 * 8, "little")
    for i, (word,) in enumerate(_WORDS.iter_unpack(data)):
        if word:
            base = i * 64
            while word:
                low = word & -word
                out.append(base + low.bit_length() - 1)
                word ^= low
    return out


_WORDS = struct.Struct("<Q")


class LocalSlots:
    """The filters of several places (the positions one class fills in the sequences,
    or a single place) as one :class:`FilterIndex` over **local numbers**: the queries
    of each place numbered densely (ascending by query number; each place's from a
    multiple of 64), so that a set of them is as wide as the class's own queries, not
    as all the registered queries.

    Why: over query numbers, the cumulative bitsets of a family of F thresholds are
    F sets as wide as every query registered: at 10,000 queries a family of a hundred
    thresholds is 120 KB, the look-up of one event reads a cold 1.2 KB set, and the
    search grows with the number of queries though its work (a bisect, an OR) does not.
    Over local numbers the same family is a few KB and one set a cache line or two.
    The compiled kernel's test phase reads a place's passing queries in place, each by
    its local number (its place's start plus its rank there: ``glob`` is ascending
    within a place), and puts back at their query numbers only position 0's, which the
    summaries store. The compiled kernel's index (``ecq.kernel._filters``) is
    made from this; the pure kernel's stays over query numbers (a Python int of any
    width is one C operation, and putting bits back one by one is not)."""

    __slots__ = ("index", "glob", "starts", "always", "filtered")

    def __init__(self, places: list[tuple[int, FilterIndex]]) -> None:
        """``places``: per place, the queries without a filter there (bits) and the
        index of its filters. O(filters' atoms + queries)."""
        self.index = FilterIndex()
        # Local number -> query number (-1: padding between two places).
        self.glob: list[int] = []
        # Place i's local numbers are starts[i] .. starts[i + 1] - 1.
        self.starts: list[int] = []
        self.always: list[int] = []
        # Per place, the queries with a filter there (its index's ``all``, over query
        # numbers): the place's own numbers in ``glob``, as one set.
        self.filtered: list[int] = []
        fid = 0
        for always, index in places:
            start = -(-len(self.glob) // 64) * 64
            self.glob += [-1] * (start - len(self.glob))
            # A place's filters have disjoint sets of queries (a query has one filter
            # at a place), so their numbers sorted are the place's, each once.
            mine = sorted([g for queries in index.queries.values() for g in queries])
            local = dict(zip(mine, range(len(self.glob), len(self.glob) + len(mine)), strict=True))
            self.glob += mine
            for f, queries in index.queries.items():
                self.index.add_constraints(
                    fid, [local[g] for g in queries], index.constraints(f), index.residual.get(f)
                )
                fid += 1
            self.starts.append(start)
            self.always.append(always)
            self.filtered.append(index.all)
        self.starts.append(len(self.glob))

    def passing(self, event: Any) -> list[int]:
        """Per place, the queries whose filter ``event`` passes (query numbers): what
        each place's own index gives, through the local numbers. O(attributes · log F
        + result) big-integer operations on sets of local numbers."""
        passed = self.index.passing(event)
        out = []
        for i, always in enumerate(self.always):
            lo, hi = self.starts[i], self.starts[i + 1]
            for j in _bit_numbers((passed >> lo) & ((1 << (hi - lo)) - 1)):
                always |= 1 << self.glob[lo + j]
            out.append(always)
        return out

    def _check(self) -> None:
        self.index._check()
        assert self.starts == sorted(self.starts) and all(s % 64 == 0 for s in self.starts[:-1])
        for i, always in enumerate(self.always):
            mine = [g for g in self.glob[self.starts[i] : self.starts[i + 1]] if g >= 0]
            assert mine == sorted(set(mine)) and not any(always >> g & 1 for g in mine)


def residual_predicate(rest: list[Expr]) -> PredFn | None:
    """The residual conjuncts of a filter as one predicate on an event (None: none)."""
    if not rest:
        return None
    expr = rest[0] if len(rest) == 1 else BoolOp("and", tuple(rest))
    return compile_predicate(expr, lambda ref: 0, single=True)
