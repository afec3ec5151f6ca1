"""Compile a query's AST into an immutable :class:`CompiledQuery`.

Compilation resolves every component reference (alias, ``$xN``, unique class name),
turns each parenthesised sub-pattern into its own node whose instances form a derived
event class (SCEMon's virtual primitive event classes), splits ``WHERE`` into conjuncts
and classifies them (docs/semantics.md):

- *filters*: read one positive component; tested before an event is stored for it;
- *checks*: read several positive components; tested as soon as all are bound;
- *element conditions*: read a Kleene component's events one by one (they decide which
  events qualify for the group);
- *blocker conditions*: mention a negated component (they decide which events block;
  a missing attribute makes a comparison true there).

Errors point into the query text through ``Query.spans``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar, overload

from ecq.compiler.conditions import PredFn, ValueFn, compile_predicate, compile_value, predicate_maker
from ecq.compiler.filters import FilterId, filter_id, filter_key, filter_skeleton, literal_key
from ecq.compiler.policy import Policy, has_policy
from ecq.compiler.shapes import fields_of, literal_id, shape_parts, text_parts
from ecq.errors import SemanticError
from ecq.language.ast import (
    Agg,
    AttrRef,
    BoolOp,
    Compare,
    Component,
    Conj,
    Disj,
    Equiv,
    Expr,
    Lit,
    Pattern,
    Prev,
    Query,
    Seq,
    pattern_to_json,
)
from ecq.language.lexer import tokenize
from ecq.language.partition import partition_key

__all__ = ["Comp", "CompiledQuery", "compile_query", "retag", "KIND_SEQ", "KIND_AND", "KIND_OR", "MAX_WITHIN"]


_T = TypeVar("_T")


class cached_property(Generic[_T]):  # noqa: N801 (a drop-in for functools')
    """``functools.cached_property`` without its lock: on Python 3.11 that one takes an
    ``RLock`` at every first read, a tenth of what installing a plain sequence cost. A
    compiled query is made and read by one thread (a race would compute the same
    value twice, harmlessly). The value lands in the instance's ``__dict__``, so later
    reads never reach this descriptor."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...

    def __get__(self, instance: object, owner: type | None = None) -> _T | cached_property[_T]:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value


class NodeLayout(NamedTuple):
    """:attr:`CompiledQuery.node_layout`: the Kleene components among the positive ones,
    whether a match is emitted as found (``simple``), per check the skeleton position it
    is checked at (-1: on the whole candidate), per position whether only a group's
    latest event counts, whether the kernels check the negated components themselves
    (``has_negs``), whether a skeleton match needs its leaf, and whether the compiled
    kernel applies the policy (see ``ecq.structures.qstate.QState``)."""

    kleene: tuple[int, ...]
    simple: bool
    check_at: tuple[int, ...]
    latest_only: tuple[bool, ...]
    has_negs: bool
    leafy: bool
    kernel_policy: bool


# The most positive components of a query whose policy the compiled kernel applies
# (its buffers' size, ecq/kernel/_kernel.pyx _POS); longer ones are chosen in Python.
KERNEL_POLICY_POSITIVES = 32


KIND_SEQ = "seq"
KIND_AND = "and"
KIND_OR = "or"

# The longest WITHIN taken: 366 days. A window decides how long instances (and the
# service's event log, twice as long) are kept; a longer one is almost surely a unit
# mistake, and WITHIN 1e308 would keep everything forever (docs/semantics.md).
MAX_WITHIN = 366 * 86_400.0


@dataclass(frozen=True)
class Comp:
    """A compiled component.

    ``classes`` are the event classes it accepts (for a sub-pattern, the sub-pattern's
    derived class). ``filter`` is the conjunction of the conditions that read only this
    component; ``filter_id`` identifies it independently of how the query names the
    component (ecq.compiler.filters.filter_id), so identical filters of different queries are
    one filter of the filter index.
    """

    index: int
    classes: frozenset[str]
    alias: str | None
    filter: PredFn | None
    negated: bool = False
    kleene: tuple[int, bool] | None = None  # (min, exact)
    # The upper bound of ``B{m,n}`` (None: none; docs/semantics.md §6).
    kleene_max: int | None = None
    sub: CompiledQuery | None = None
    # The filter's conjuncts, the component written ``$self`` (what the filter index
    # splits into atoms: ecq.compiler.filters).
    filter_conjuncts: tuple[Expr, ...] = ()
    # What the filter indexes know the filter by (ecq.compiler.filters.filter_id: equal
    # exactly for equal conjuncts, literals of the same types, and cheap to hash); None
    # without a filter.
    filter_id: FilterId | None = None

    @property
    def derived(self) -> bool:
        """Whether its instances are derived: a sub-pattern's or an ``@name`` query's
        matches (they can share events, so a Kleene group of them is a chain,
        docs/semantics.md §6), not primitive events."""
        return self.sub is not None or any(x.startswith("@") for x in self.classes)


@dataclass(frozen=True)
class CompiledQuery:
    """Everything the network needs to run one query (or one sub-pattern); never
    mutated after compile."""

    name: str
    ast: Query
    kind: str
    comps: tuple[Comp, ...]
    window: float | None
    mode_all: bool
    # Multi-component conjuncts over positive components: (positions, predicate).
    checks: tuple[tuple[frozenset[int], PredFn], ...]
    element_conds: dict[int, tuple[PredFn, ...]]
    blocker_conds: dict[int, tuple[PredFn, ...]]
    returns: tuple[tuple[str, ValueFn], ...]
    probability: float | None
    never: bool
    # Conjunction: for each component, the previous component with the same class set
    # (-1 if none); same-class events fill such components in arrival order.
    same_before: tuple[int, ...]
    overlapping: bool
    top: bool = True
    # Sub-patterns, deepest first, one per derived class.
    subs: tuple[CompiledQuery, ...] = ()
    # ``@name`` classes this query reads.
    depends: frozenset[str] = frozenset()
    # The registration point its sub-patterns' derived classes are named for (see
    # :func:`compile_query`); :func:`retag` moves it to another.
    tag: str = ""
    # Beside each of ``checks``, what it computes independently of how the query names
    # its components: the conjunct with every reference written ``#<component index>``
    # (ecq.compiler.filters.filter_key of it), and the indexes it reads. Two queries whose
    # checks have the same key once the indexes are mapped to roles compute the same
    # thing on the same events (ecq.matching.conjunction.kernel_shape shares their evaluation).
    check_keys: tuple[tuple[Any, ...], ...] = ()
    # Iteration conditions (they read ``b[i-1]``), per Kleene component: called with the
    # binding (the component holding the candidate element) followed by the run's
    # previous element (docs/semantics.md §6).
    iteration_conds: dict[int, tuple[PredFn, ...]] = dataclasses.field(default_factory=dict)
    # The selection and consumption policy (docs/semantics.md §11-§12); None: none
    # (MODE RECENT or ALL as §3-§10 say). A query with one runs in MODE ALL and the
    # policy chooses among its candidates (ecq.matching.policy).
    policy: Policy | None = None

    @cached_property
    def partition(self) -> tuple[str, ...]:
        """The partition key: the attributes whose values the events of one match share
        (``("src",)`` by default, ``()`` for PARTITION BY NONE; ecq.language.partition)."""
        return partition_key(self.ast)

    @cached_property
    def mode(self) -> str:
        """The query's ``MODE`` as written (one of ``ecq.language.ast.MODES``)."""
        return self.ast.mode

    @cached_property
    def length(self) -> int:
        return len(self.comps)

    @cached_property
    def positives(self) -> tuple[int, ...]:
        return tuple(c.index for c in self.comps if not c.negated)

    @cached_property
    def positive_tests(self) -> tuple[tuple[frozenset[str], PredFn | None], ...]:
        """``(classes, filter)`` of each positive component, in order: what an event
        must pass to fill it (a conjunction's assembly asks this of every event)."""
        return tuple((self.comps[i].classes, self.comps[i].filter) for i in self.positives)

    @cached_property
    def kleene_comps(self) -> tuple[int, ...]:
        """The indexes of the Kleene components."""
        return tuple(c.index for c in self.comps if c.kleene is not None)

    @cached_property
    def positive_classes(self) -> tuple[str, ...]:
        """The classes of the positive components, sorted."""
        return tuple(sorted(frozenset().union(*(c for c, _ in self.positive_tests))))

    @cached_property
    def is_filter(self) -> bool:
        """One positive, non-Kleene component: every passing event is a match."""
        c = self.comps[0]
        return self.kind != KIND_OR and len(self.comps) == 1 and not c.negated and c.kleene is None

    @property
    def stores(self) -> bool:
        """Whether the node keeps instances (sequence or conjunction of two or more, or a
        Kleene component alone: its group is made of stored instances)."""
        return self.kind != KIND_OR and (len(self.comps) >= 2 or self.comps[0].kleene is not None)

    @cached_property
    def plain(self) -> bool:
        """A sequence of positive, non-Kleene components over primitive classes: the
        bitset fast path of the network handles it."""
        return self.kind == KIND_SEQ and all(
            not c.negated and c.kleene is None and not c.derived for c in self.comps
        )

    @cached_property
    def skeletal(self) -> bool:
        """A sequence of primitive classes with negated or Kleene components: the
        kernels match it through its positive skeleton (``ecq.matching.skeleton``)."""
        return (
            self.kind == KIND_SEQ
            and not self.plain
            and not self.open_kleene
            and not any(c.derived for c in self.comps)
        )

    @cached_property
    def open_kleene(self) -> bool:
        """A Kleene form the skeleton does not take (docs/semantics.md §6): a Kleene
        component alone (a skeleton of one position would be a filter); matched by
        ``ecq.matching.composite``. Trailing groups, upper bounds and iteration
        conditions go through the skeleton: the leaf builds the group whose latest
        element the skeleton bound."""
        pos = self.positives
        return self.kind == KIND_SEQ and len(pos) == 1 and self.comps[pos[0]].kleene is not None

    @cached_property
    def trailing(self) -> tuple[int, ...]:
        """Negated components after the last positive one (sequences)."""
        if self.kind != KIND_SEQ:
            return ()
        last = self.positives[-1]
        return tuple(c.index for c in self.comps if c.negated and c.index > last)

    @cached_property
    def group_bounds(self) -> dict[int, tuple[int, int]]:
        """For each Kleene component, the nearest positive non-Kleene components before
        and after it (-1: none): what bounds its group (docs/semantics.md §6, two groups
        side by side). Read at every group built, so made once."""
        plain = [p for p in self.positives if self.comps[p].kleene is None]
        out = {}
        for k in self.kleene_comps:
            left = [p for p in plain if p < k]
            right = [p for p in plain if p > k]
            out[k] = (left[-1] if left else -1, right[0] if right else -1)
        return out

    @cached_property
    def node_layout(self) -> NodeLayout:
        """What the network's state of this node (``ecq.structures.qstate.QState``)
        derives from the query's structure alone: the same for every query of one shape
        (``compile_query`` keeps it with the shape), so installing reads it, not
        recomputes it."""
        kleene = tuple(i for i in self.positives if self.comps[i].kleene is not None)
        simple = (
            self.top
            and not self.trailing
            and not self.returns
            and self.probability is None
            and not kleene
            and self.policy is None  # its candidates are chosen in Python (ecq.matching.policy)
        )
        position = {i: p for p, i in enumerate(self.positives)}
        # Per check, the position once bound it is checked at (-1: on the whole
        # candidate, ecq.matching.skeleton.leaf, as it reads a Kleene group).
        check_at = tuple(
            -1 if not comps.isdisjoint(kleene) else min(position[i] for i in comps) for comps, _ in self.checks
        )
        latest_only = tuple(
            i in kleene
            and not self.comps[i].kleene[1]  # type: ignore[index]
            and not self.element_conds.get(i)
            # A run built with an iteration condition may end before its latest event.
            and not self.iteration_conds.get(i)
            for i in self.positives
        )
        trailing = set(self.trailing)
        negated = [c for c in self.comps if c.negated]
        has_negs = (
            bool(negated) and self.skeletal and not kleene and all(len(c.classes) == 1 for c in negated)
        )
        leafy = self.skeletal and (bool(kleene) or (not has_negs and any(c.index not in trailing for c in negated)))
        kernel_policy = (
            self.policy is not None
            and self.top
            and not self.trailing
            and not self.returns
            and self.probability is None
            and not kleene
            and ((self.kind == KIND_SEQ and (self.plain or self.skeletal) and not leafy) or self.kind == KIND_AND)
            and len(self.positives) <= KERNEL_POLICY_POSITIVES
        )
        return NodeLayout(kleene, simple, check_at, latest_only, has_negs, leafy, kernel_policy)

    def neighbours(self, index: int) -> tuple[int, int]:
        """The nearest positive components before and after ``index`` (-1: none)."""
        pos = self.positives
        left = [p for p in pos if p < index]
        right = [p for p in pos if p > index]
        return (left[-1] if left else -1, right[0] if right else -1)

    def classes(self) -> frozenset[str]:
        # Kept once made (a snapshot writes it: a start lists every query's classes).
        found: frozenset[str] | None = self.__dict__.get("_classes")
        if found is None:
            out: set[str] = set()
            for comp in self.comps:
                out |= comp.classes
            found = self.__dict__["_classes"] = frozenset(out)
        return found


class _PackedTree:
    """``CompiledQuery.ast`` of a query read from a snapshot (service.server.snapshot)
    with its syntax tree packed, or made from its tokens (:func:`compile_text`), as
    ``_packed_ast``: (how to unpack, the packed form or the text).
    Matching never reads the tree, and unpacking the trees of 100,000 queries was a
    third of reading them: unpacked once, when first read (explain, formatting, a
    re-registration). A non-data descriptor: a query whose ``__dict__`` holds its tree
    (every compiled one) never reaches it. (Not a class-level ``__getattr__``: pickle
    asks each object it reads for ``__setstate__``, which would call that for every
    query of a snapshot.)"""

    def __get__(self, instance: CompiledQuery | None, owner: type | None = None) -> Any:
        if instance is None:
            return self
        state = instance.__dict__
        packed = state.get("_packed_ast")
        if packed is None:
            tree = state.get("ast")  # unpacked meanwhile by another thread
            if tree is None:
                raise AttributeError(f"{type(instance).__name__!r} object has no attribute 'ast'")
            return tree
        unpack, data = packed
        tree = state["ast"] = unpack(data)
        state.pop("_packed_ast", None)
        return tree


# Set after the dataclass is made (its field ``ast`` has no default, so no class attribute).
CompiledQuery.ast = _PackedTree()  # type: ignore[assignment,misc]

# What made one predicate or value function of a compiled query: the function, the
# expression, its path, ``single``, ``negated`` and whether it is a value function.
_Made = tuple[Callable[[Any], Any], Expr, str, bool, bool, bool]


@dataclass
class _Model:
    """A compiled query kept for its shape: its classes in order of first appearance, its
    literals (``Lit`` nodes) and their :func:`literal_id`, and the compiler that made it
    with what it compiled (to make its functions again for other literals)."""

    cq: CompiledQuery
    classes: tuple[str, ...]
    lits: list[Any]
    ids: tuple[Any, ...]
    compiler: _Compiler
    # The ids of the nodes that hold a literal, in the expressions of ``compiler.made``
    # and of ``cq`` (:func:`_holding`).
    holding: dict[int, None] = dataclasses.field(default_factory=dict)
    # What a query made from it keeps of ``cq`` (``_SHAPE_FREE``).
    state: dict[str, Any] = dataclasses.field(default_factory=dict)
    # How a query of other literals is made of it (:class:`_Recipe`); made when the
    # first such query comes.
    recipe: _Recipe | None = None

    def __post_init__(self) -> None:
        self.state = {k: v for k, v in self.cq.__dict__.items() if k in _SHAPE_FREE}


# One compiled query per shape (ecq.compiler.shapes); the least recently used goes first
# past _SHAPES_MAX shapes. A shape whose compiling read a literal's value (``_EXACT``)
# keeps its queries by shape and literals instead.
_SHAPES: OrderedDict[Any, _Model | str] = OrderedDict()
_SHAPES_MAX = 4096
_EXACT = "exact"
# The service compiles in more than one thread.
_SHAPES_LOCK = threading.Lock()
# What a CompiledQuery made from another of its shape keeps of the other's: its fields,
# and the values computed on first read that no class name or literal changes.
_SHAPE_FREE = frozenset(
    [f.name for f in dataclasses.fields(CompiledQuery)]
    + ["length", "positives", "is_filter", "plain", "skeletal", "open_kleene", "trailing", "node_layout"]
    # The partition key reads PARTITION BY and WHERE's [attr] tests, both in the shape.
    + ["partition", "mode"]
)


def compile_query(
    name: str, ast: Query, text: str | None = None, tag: str = "", shapes: bool = True
) -> CompiledQuery:
    """Check and compile ``ast``; ``text`` (when the query came as text) lets errors show
    an excerpt with a caret. ``tag`` is appended to the derived class names of the
    sub-patterns, so that only queries registered at the same point share them.
    Raises :class:`SemanticError`.

    A query of a shape compiled before (``ecq.compiler.shapes``: the same query up to
    its class names, literals and window) is that compiled query with its classes
    renamed and its literals and window put in, which is what compiling it gives;
    ``shapes=False`` compiles it anew all the same."""
    parts = shape_parts(ast) if shapes else None
    if parts is None:
        return _compile(name, ast, text, tag)[0]
    key, classes, lits = parts
    ids = tuple([literal_id(lit.value) for lit in lits])
    within = ast.within
    hit, key, keyed_exact = _lookup(key, ids)
    if hit is not None and (within is None or within <= MAX_WITHIN):
        return _instance(hit, classes, lits, ids, name, ast, within, tag)
    cq, compiler = _compile(name, ast, text, tag)
    # Computed once for the shape, and kept by every query made from it.
    cq.length, cq.positives, cq.is_filter, cq.plain, cq.skeletal, cq.open_kleene, cq.trailing  # noqa: B018
    cq.node_layout, cq.partition, cq.mode  # noqa: B018
    model = _Model(cq, classes, lits, ids, compiler)
    exact = compiler.reads_values or not _literals_traced(model)
    if not exact:
        model.holding = _holding(
            [m[1] for m in compiler.made]
            + [cq.check_keys]
            + [c.filter_conjuncts for c in cq.comps]
        )
    with _SHAPES_LOCK:
        if exact and not keyed_exact:
            _SHAPES[key] = _EXACT
            key = (key, ids)
        _SHAPES[key] = model
        while len(_SHAPES) > _SHAPES_MAX:
            _SHAPES.popitem(last=False)
    return cq


def compile_text(name: str, text: str, tag: str = "") -> CompiledQuery:
    """``compile_query(name, parse_query(text), text, tag)``. A text whose tokens have the
    shape of a query compiled before (its parse template and the texts the compiler's
    shape keeps: ``ecq.compiler.shapes.text_parts``) is made from that query's model
    straight from its tokens: its syntax tree is not built, but parsed from ``text``
    when first read (``CompiledQuery.ast``), so registering many queries of a few
    shapes neither fills nor walks a tree per query. The text is split into tokens
    once, for both ways (the lexer's errors are the parser's)."""
    tokens = tokenize(text)
    parts = text_parts(tokens)
    if parts is not None:
        key, classes, lits, within = parts
        ids = tuple([literal_id(lit.value) for lit in lits])
        hit = _lookup(key, ids)[0]
        if hit is not None and (within is None or within <= MAX_WITHIN):
            return _instance(hit, classes, lits, ids, name, None, within, tag, text)
    from ecq.language.parser import parse_query

    return compile_query(name, parse_query(text, tokens), text, tag)


def _lookup(key: Any, ids: tuple[Any, ...]) -> tuple[_Model | None, Any, bool]:
    """The model kept for a query's shape key and literals' ids, the key it is kept
    under (the shape's, or with the literals for a shape kept by literals), and
    whether that is the latter."""
    keyed_exact = False
    with _SHAPES_LOCK:
        hit = _SHAPES.get(key)
        if hit is _EXACT:
            _SHAPES.move_to_end(key)
            key, keyed_exact = (key, ids), True
            hit = _SHAPES.get(key)
        if hit is not None:
            _SHAPES.move_to_end(key)
    return (hit if isinstance(hit, _Model) else None), key, keyed_exact


def _parsed(text: str) -> Query:
    """The syntax tree of a query made by :func:`compile_text` from its tokens, when
    first read (``CompiledQuery.ast``)."""
    from ecq.language.parser import parse_query

    return parse_query(text)


def _instance(
    model: _Model,
    classes: tuple[str, ...],
    lits: list[Any],
    ids: tuple[Any, ...],
    name: str,
    ast: Query | None,
    within: float | None,
    tag: str,
    text: str | None = None,
) -> CompiledQuery:
    """``model`` (a compiled query of the same shape) for ``ast``: named ``name``, its
    classes ``model.classes[i]`` renamed ``classes[i]``, its literals ``lits`` and its
    window ``within``. Its predicates are shared when its literals are the model's
    (they read components by position, never by class name), else made again from the
    model's expressions with ``lits`` in place of the model's literals. Without
    ``ast``, its tree is parsed from ``text`` when first read."""
    cq = model.cq
    comps = cq.comps
    state = model.state.copy()
    # Each component is copied once, for its literals and its classes both.
    rename = dict(zip(model.classes, classes, strict=True)) if model.classes != classes else None
    recipe: _Recipe | None = None
    values: list[Any] = []
    funcs: dict[int, Callable[[Any], Any]] = {}
    if ids != model.ids:
        recipe = model.recipe
        if recipe is None:
            recipe = model.recipe = _Recipe(model)
        values = [lit.value for lit in lits]
        compiler = model.compiler
        for fn_id, make, rebuild, expr, path, single, negated, is_value in recipe.made:
            if make is not None:
                funcs[fn_id] = make(values)
                continue
            if rebuild is not None:
                expr = rebuild(lits)
            resolve = compiler.resolver(path)
            funcs[fn_id] = (
                compile_value(expr, resolve)
                if is_value
                else compile_predicate(expr, resolve, single=single, negated=negated)
            )
        # (Only what holds functions is made anew: most queries have no checks and no
        # element, blocker or iteration conditions, and share the model's empty ones.)
        if cq.checks:
            state["checks"] = tuple([(at, funcs[id(fn)]) for at, fn in cq.checks])
        if recipe.check_keys is not None:
            state["check_keys"] = recipe.check_keys(lits)
        for field in ("element_conds", "blocker_conds", "iteration_conds"):
            conds = state[field]
            if conds:
                state[field] = {k: tuple([funcs[id(f)] for f in v]) for k, v in conds.items()}
        if cq.returns:
            state["returns"] = tuple([(label, funcs[id(fn)]) for label, fn in cq.returns])
    if recipe is not None or rename is not None:
        new_comps = []
        for k, comp in enumerate(comps):
            new_comp = _new(Comp)
            fields = comp.__dict__.copy()
            _set(new_comp, "__dict__", fields)
            if rename is not None:
                fields["classes"] = frozenset([rename[c] for c in comp.classes])
            if recipe is not None and comp.filter is not None:
                fields["filter"] = funcs[id(comp.filter)]
                rebuild = recipe.conjuncts[k]
                if rebuild is not None:
                    fields["filter_conjuncts"] = rebuild(lits)
                    made = recipe.filter_ids[k]
                    if made is None:
                        fields["filter_id"] = filter_id(fields["filter_conjuncts"])
                    elif len(made[1]) == 1:  # most filters: one constant (no loop)
                        fields["filter_id"] = (made[0], (literal_key(values[made[1][0]]),))
                    else:
                        fields["filter_id"] = (made[0], tuple([literal_key(values[j]) for j in made[1]]))
            new_comps.append(new_comp)
        comps = tuple(new_comps)
    state["name"] = name
    if ast is not None:
        state["ast"] = ast
    else:
        del state["ast"]
        state["_packed_ast"] = (_parsed, text)
    state["comps"] = comps
    state["tag"] = tag
    state["window"] = within
    new = _new(CompiledQuery)
    _set(new, "__dict__", state)
    return new


_new = object.__new__
_set = object.__setattr__


class _Recipe:
    """How :func:`_instance` makes a query of a model's shape with other literals, made
    once per model (when the first such query comes): per function the compiler made,
    its maker (``ecq.compiler.conditions.predicate_maker``) or else how to rebuild its
    expression for compiling; per component, how to rebuild its filter's conjuncts and
    make its ``filter_id``; how to rebuild the checks' keys. Literals are addressed by
    their place in the model's ``lits``."""

    __slots__ = ("made", "conjuncts", "filter_ids", "check_keys")

    def __init__(self, model: _Model) -> None:
        at = {id(lit): i for i, lit in enumerate(model.lits)}
        holding = model.holding
        self.made = [
            (
                id(fn),
                predicate_maker(expr, at, negated) if single and not is_value else None,
                _rebuilder(expr, at, holding),
                expr,
                path,
                single,
                negated,
                is_value,
            )
            for fn, expr, path, single, negated, is_value in model.compiler.made
        ]
        comps = model.cq.comps
        self.conjuncts = [_rebuilder(c.filter_conjuncts, at, holding) for c in comps]
        self.filter_ids = [_filter_id_recipe(c.filter_conjuncts, at) for c in comps]
        self.check_keys = _rebuilder(model.cq.check_keys, at, holding)


def _filter_id_recipe(conjuncts: tuple[Expr, ...], at: dict[int, int]) -> tuple[str, tuple[int, ...]] | None:
    """How a query of a model's shape makes a component's ``filter_id`` from its own
    literals (the skeleton is the model's; the literals are the query's at the places
    ``at`` gives the model's), so that it is what ``filter_id(conjuncts)`` gives without
    walking the conjuncts again; None when a literal is not among the model's."""
    skeleton, lits = filter_skeleton(conjuncts)
    places = [at.get(id(lit)) for lit in lits]
    return None if None in places else (skeleton, tuple(places))  # type: ignore[arg-type]


# Of a query's literals (``Lit`` nodes in the order of its model's), a node of the model
# rebuilt with them.
_Rebuild = Callable[[list[Any]], Any]


def _rebuilder(node: Any, at: dict[int, int], holding: dict[int, None]) -> _Rebuild | None:
    """A function of a query's literals making ``node`` (an expression, or tuples of
    them and of plain values) with them in place of the model's literals: the literal
    at place ``at[id(x)]`` for each literal ``x``, every part that holds none
    (``holding``: :func:`_holding`) shared as it is. None when ``node`` holds none."""
    if id(node) not in holding:
        return None
    cls = type(node)
    if cls is Lit:
        place = at.get(id(node))
        return None if place is None else operator.itemgetter(place)
    if cls is tuple:
        parts = [(_rebuilder(x, at, holding), x) for x in node]
        only = parts[0][0] if len(parts) == 1 else None
        if only is not None:
            return lambda lits: (only(lits),)
        return lambda lits: tuple([x if rebuild is None else rebuild(lits) for rebuild, x in parts])
    state = dict(node.__dict__)
    fields = [(name, rebuild) for name, value in state.items() if (rebuild := _rebuilder(value, at, holding))]
    if not fields:
        return None

    def rebuilt(lits: list[Any]) -> Any:
        made = _new(cls)
        own = made.__dict__
        own.update(state)
        for name, rebuild in fields:
            own[name] = rebuild(lits)
        return made

    return rebuilt


def _holding(roots: list[Any]) -> dict[int, None]:
    """The ids of the nodes under ``roots`` that hold a literal (a ``Lit`` is one), for
    :func:`_rebuilder`."""
    out: dict[int, None] = {}

    def walk(node: Any) -> bool:
        cls = type(node)
        if cls is Lit:
            holds = True
        elif cls is tuple:
            holds = False
            for x in node:
                holds = walk(x) or holds
        else:
            names = fields_of(cls)
            if names is None:
                return False
            holds = False
            for name in names:
                holds = walk(getattr(node, name)) or holds
        if holds:
            out[id(node)] = None
        return holds

    for root in roots:
        walk(root)
    return out


def _literals_traced(model: _Model) -> bool:
    """Whether every literal and function of the model's compiled query is one
    :func:`_instance` replaces: its literals are the query's own ``Lit`` nodes and its
    functions are those the compiler recorded. What is not (a literal copied, a function
    made otherwise) keeps the shape to queries with equal literals."""
    cq = model.cq
    lits = {id(x) for x in model.lits}
    made = {id(m[0]) for m in model.compiler.made}
    funcs: list[Any] = [c.filter for c in cq.comps if c.filter is not None]
    funcs += [fn for _, fn in cq.checks] + [fn for _, fn in cq.returns]
    for conds in (cq.element_conds, cq.blocker_conds, cq.iteration_conds):
        for fns in conds.values():
            funcs += fns
    if len(lits) != len(model.lits) or not all(id(fn) in made for fn in funcs):
        return False
    found: list[Any] = []
    todo: list[Any] = [cq.check_keys] + [c.filter_conjuncts for c in cq.comps]
    while todo:
        node = todo.pop()
        cls = type(node)
        if cls is Lit:
            found.append(node)
        elif cls is tuple:
            todo.extend(node)
        else:
            names = fields_of(cls)
            if names is not None:
                todo.extend(getattr(node, name) for name in names)
    return all(id(x) in lits for x in found) and cq.subs == () and cq.policy is None


def _compile(name: str, ast: Query, text: str | None, tag: str) -> tuple[CompiledQuery, _Compiler]:
    compiler = _Compiler(name, ast, text, tag)
    if ast.within is not None and not ast.within <= MAX_WITHIN:
        raise compiler.error(
            f"WITHIN {ast.within:g} s is longer than the longest window taken, 366 days ({MAX_WITHIN:.0f} s)",
            "within",
        )
    try:
        return compiler.run(), compiler
    except RecursionError:
        where = "where" if ast.where is not None else "pattern"
        raise compiler.error("the query is nested too deeply", where) from None


def retag(cq: CompiledQuery, tag: str) -> CompiledQuery:
    """``cq`` as :func:`compile_query` would have made it with ``tag``.

    Why: a query can be compiled before the point of the stream it is registered at is
    known (the service compiles off its writer thread); only the names of its
    sub-patterns' derived classes depend on that point. O(components of the
    sub-patterns); a query without sub-patterns is only relabelled.
    """
    if cq.tag == tag:
        return cq
    if not cq.subs:
        # A copy with the values computed so far (none depends on the tag), not
        # dataclasses.replace, which runs __init__ and its checks anew.
        new = copy.copy(cq)
        object.__setattr__(new, "tag", tag)
        return new
    cut = len(cq.tag)
    renamed: dict[str, CompiledQuery] = {}

    def comps_of(node: CompiledQuery) -> tuple[Comp, ...]:
        return tuple(
            c
            if c.sub is None
            else dataclasses.replace(
                c, classes=frozenset([renamed[c.sub.name].name]), sub=renamed[c.sub.name]
            )
            for c in node.comps
        )

    subs = []
    for sub in cq.subs:  # deepest first: a sub-pattern's own subs are renamed before it
        new = dataclasses.replace(
            sub, name=sub.name[: len(sub.name) - cut] + tag, comps=comps_of(sub), tag=tag
        )
        renamed[sub.name] = new
        subs.append(new)
    return dataclasses.replace(cq, comps=comps_of(cq), subs=tuple(subs), tag=tag)


def sub_key(pattern: Pattern, mode: str, window: float | None, tag: str) -> str:
    """The derived class of a sub-pattern: its canonical JSON, mode and window."""
    body = json.dumps(pattern_to_json(pattern), sort_keys=True, separators=(",", ":"))
    return f"({body})~{mode}~{window!r}{tag}"


@dataclass(frozen=True)
class _Roles:
    """The components by role: positive ones in order, negated ones, Kleene ones, all."""

    positives: list[int]
    negated: frozenset[int]
    kleene: frozenset[int]
    every: frozenset[int]

    @classmethod
    def of(cls, raw: tuple[Component, ...]) -> _Roles:
        return cls(
            positives=[i for i, c in enumerate(raw) if not c.negated],
            negated=frozenset(i for i, c in enumerate(raw) if c.negated),
            kleene=frozenset(i for i, c in enumerate(raw) if c.kleene is not None),
            every=frozenset(range(len(raw))),
        )


@dataclass
class _Placed:
    """Where WHERE's conditions went: one-event filters per component, checks on several
    components, element conditions of Kleene groups, blocker conditions of negated
    components, and whether a condition that reads nothing is false (``never``)."""

    filters: dict[int, list[Expr]]
    checks: list[tuple[frozenset[int], PredFn]] = dataclasses.field(default_factory=list)
    check_keys: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    element: dict[int, list[PredFn]] = dataclasses.field(default_factory=dict)
    blocker: dict[int, list[PredFn]] = dataclasses.field(default_factory=dict)
    iteration: dict[int, list[PredFn]] = dataclasses.field(default_factory=dict)
    never: bool = False


class _Compiler:
    def __init__(self, name: str, ast: Query, text: str | None, tag: str) -> None:
        self.name = name
        self.ast = ast
        self.text = text
        self.tag = tag
        self.sub_names: set[str] = set()
        # The nodes of each expression read so far (``nodes``), by id; the expression is
        # kept beside them, so an id is never that of another expression.
        self.node_lists: dict[int, tuple[Expr, list[Expr]]] = {}
        # Every predicate and value function compiled for the query's own components,
        # with what made it (ecq.compiler.shapes: a query of the same shape with other
        # literals is this one's with these made again from its literals).
        self.made: list[_Made] = []
        # Whether a decision of the compiler read a literal's value (a condition that
        # reads nothing is decided now): then only an equal query shares the result.
        self.reads_values = False

    # -------------------------------------------------------------------- errors

    def error(self, message: str, path: str | None) -> SemanticError:
        span = self.ast.spans.get(path) if path else None
        if span is None:
            return SemanticError(message)
        line, column, token = span
        excerpt = None
        if self.text is not None:
            lines = self.text.splitlines()
            if 0 < line <= len(lines):
                excerpt = lines[line - 1] + "\n" + " " * (column - 1) + "^"
        return SemanticError(message, line, column, token, excerpt)

    # ----------------------------------------------------------------- closures

    def predicate(self, expr: Expr, path: str, single: bool = False, negated: bool = False) -> PredFn:
        """:func:`compile_predicate` of ``expr`` (found at ``path``), recorded."""
        fn = compile_predicate(expr, self.resolver(path), single=single, negated=negated)
        self.made.append((fn, expr, path, single, negated, False))
        return fn

    def value(self, expr: Expr, path: str) -> ValueFn:
        """:func:`compile_value` of ``expr`` (found at ``path``), recorded."""
        fn = compile_value(expr, self.resolver(path))
        self.made.append((fn, expr, path, False, False, True))
        return fn

    # ---------------------------------------------------------------------- run

    def run(self) -> CompiledQuery:
        """The whole compilation: the pattern's shape, then where each condition goes,
        then the components with their filters, then RETURN."""
        ast = self.ast
        subs: list[CompiledQuery] = []
        depends: set[str] = set()
        kind, raw, classes = self.node_shape(ast.pattern, "pattern", subs, depends)
        self.raw = raw
        self.names = self.build_names(raw, classes)
        self.nested = self.inner_names(raw)
        roles = _Roles.of(raw)
        placed = self.place_conditions(kind, raw, classes, roles)
        comps = self.components(raw, classes, placed.filters)
        same_before, overlapping = _roles(comps)
        policy = self.policy(kind, raw, subs, depends)
        return CompiledQuery(
            name=self.name,
            ast=ast,
            kind=kind,
            comps=tuple(comps),
            window=ast.within,
            mode_all=ast.mode == "all" or policy is not None,
            policy=policy,
            checks=tuple(placed.checks),
            check_keys=tuple(placed.check_keys),
            element_conds={k: tuple(v) for k, v in placed.element.items()},
            blocker_conds={k: tuple(v) for k, v in placed.blocker.items()},
            iteration_conds={k: tuple(v) for k, v in placed.iteration.items()},
            returns=tuple(self.return_items(roles.negated)),
            probability=ast.probability,
            never=placed.never,
            same_before=same_before,
            overlapping=overlapping and kind == KIND_AND,
            subs=tuple(subs),
            depends=frozenset(depends),
            tag=self.tag,
        )

    def policy(
        self, kind: str, raw: tuple[Component, ...], subs: list[CompiledQuery], depends: set[str]
    ) -> Policy | None:
        """The query's policy (docs/semantics.md §11-§12), or None; refuses the
        combinations the contract excludes, saying why."""
        ast = self.ast
        if not has_policy(ast):
            return None
        if partition_key(ast) != ("src",):
            raise self.error(
                "a selection or consumption policy (MODE CHRONICLE, STRATEGY, CONSUME, AFTER MATCH SKIP, first:/last:) "
                "needs the default partition by src; PARTITION BY another key (or NONE, or an [attr] "
                "test) with a policy is not supported",
                "partition",
            )
        skip_comp = -1
        if ast.skip in ("first", "last"):
            assert ast.skip_var is not None
            if kind == KIND_OR:
                raise self.error(
                    f"AFTER MATCH SKIP TO {ast.skip.upper()} {ast.skip_var}: a disjunction's match binds "
                    "one component, so the named one may have no event; use PAST LAST ROW or TO NEXT ROW",
                    "skip",
                )
            skip_comp = self.resolve(ast.skip_var, "skip")
            if raw[skip_comp].negated:
                raise self.error(
                    f"AFTER MATCH SKIP TO {ast.skip.upper()} {ast.skip_var}: a negated component has no events",
                    "skip",
                )
            first = next(i for i, c in enumerate(raw) if not c.negated)
            if ast.skip == "first" and kind == KIND_SEQ and skip_comp == first:
                raise self.error(
                    f"AFTER MATCH SKIP TO FIRST {ast.skip_var} would start the next match at the first "
                    "event of this one (as in MATCH_RECOGNIZE, refused); use TO NEXT ROW",
                    "skip",
                )
        if subs or depends:
            raise self.error(
                "a selection or consumption policy (MODE CHRONICLE, STRATEGY, CONSUME, AFTER MATCH SKIP, first:/last:) "
                "needs components of primitive classes: a sub-pattern or @name component has no arrival "
                "index of its own",
                "pattern",
            )
        if kind == KIND_SEQ:
            last = max(i for i, c in enumerate(raw) if not c.negated)
            if any(c.negated for c in raw[last + 1 :]):
                raise self.error(
                    "a selection or consumption policy (MODE CHRONICLE, STRATEGY, CONSUME, AFTER MATCH SKIP, "
                    "first:/last:) cannot go with a trailing negation: its matches are chosen when complete and "
                    "emitted later, so what they use up would be undefined meanwhile",
                    "pattern",
                )
        kleene_own: dict[int, list[PredFn]] = {}
        if ast.where is not None:
            for expr, path in self.split(ast.where, "where"):
                refs, aggs, equiv = self.references(expr, path)
                # An iteration condition reads the run's previous element: not an own
                # condition (docs/semantics.md §11).
                if (
                    len(refs) == 1
                    and not aggs
                    and not equiv
                    and raw[next(iter(refs))].kleene is not None
                    and not any(isinstance(n, Prev) for n in _nodes(expr))
                ):
                    pred = compile_predicate(expr, self.resolver(path))
                    kleene_own.setdefault(next(iter(refs)), []).append(pred)
        select: tuple[str, ...] = ()
        if any(c.select is not None for c in raw):
            unmarked = "first" if ast.mode == "chronicle" else "last"
            select = tuple(c.select or unmarked for c in raw)
        return Policy(
            ast.mode,
            ast.strategy,
            ast.consume == "exclusive",
            ast.skip,
            skip_comp,
            {k: tuple(v) for k, v in kleene_own.items()},
            select,
        )

    def place_conditions(
        self, kind: str, raw: tuple[Component, ...], classes: list[frozenset[str]], roles: _Roles
    ) -> _Placed:
        """Each conjunct of WHERE as a filter, a check, an element or a blocker condition
        (the module's docstring), or ``never`` for a false one that reads no component."""
        placed = _Placed({i: [] for i in range(len(raw))})
        if self.ast.where is None:
            return placed
        plain_seq = (
            kind == KIND_SEQ
            and not roles.negated
            and not roles.kleene
            and all(
                c.sub is None and not any(x.startswith("@") for x in cls)
                for c, cls in zip(raw, classes, strict=True)
            )
        )
        for expr, path in self.split(self.ast.where, "where"):
            if kind == KIND_OR:
                if self.nested_refs(expr, path):
                    raise self.error("a disjunction's condition may not read inside its sub-patterns", path)
                self.place_in_disjunction(expr, path, roles, placed)
            else:
                self.place_in_pattern(expr, path, roles, plain_seq, placed)
        return placed

    def place_in_disjunction(self, expr: Expr, path: str, roles: _Roles, placed: _Placed) -> None:
        """A disjunction binds one component, so a condition is that component's filter."""
        if self.previous_refs(expr, path):
            raise self.error("b[i-1] needs a Kleene component, and a disjunction has none", path)
        refs, aggs, equiv = self.references(expr, path)
        mentions = refs | aggs | (roles.every if equiv else set())
        if len(mentions) > 1:
            raise self.error("a condition of a disjunction may mention only one of its components", path)
        if not mentions:
            self.place_constant(expr, path, roles, placed)
        else:
            placed.filters[next(iter(mentions))].append(expr)

    def place_in_pattern(
        self, expr: Expr, path: str, roles: _Roles, plain_seq: bool, placed: _Placed
    ) -> None:
        """A condition of a sequence or conjunction: rejected if it mixes what cannot be
        evaluated together, else placed by the components it reads."""
        refs, aggs, equiv = self.references(expr, path)
        explicit = refs | aggs
        mentions = explicit | (roles.every if equiv else set())
        negated, kleene = roles.negated, roles.kleene
        prevs = self.previous_refs(expr, path)
        if prevs:
            self.place_iteration(expr, path, prevs, refs, aggs, equiv, roles, placed)
            return
        if len(refs & kleene) > 1:
            raise self.error("a condition may read the events of only one Kleene component", path)
        if explicit & kleene and explicit & negated:
            raise self.error("a condition may not mix a Kleene and a negated component", path)
        if refs & kleene and aggs:
            raise self.error("a condition may not read a Kleene component's events and an aggregate", path)
        if len(explicit & negated) > 1:
            raise self.error("a condition may mention only one negated component", path)
        if equiv and plain_seq:
            # A plain sequence checks [a] pairwise, as soon as both sides are bound.
            for sub_expr in self.expand_equiv(expr, roles.positives):
                sub_refs, _, _ = self.references(sub_expr, path)
                self.place(sub_expr, sub_refs, path, placed)
            return
        if not (explicit & negated) and not (refs & kleene):
            if not mentions:
                self.place_constant(expr, path, roles, placed)
            elif equiv or aggs or self.nested_refs(expr, path):
                # Equivalence tests and aggregates read whole groups, and a component
                # inside a sub-pattern is read through its instance: checked on the
                # complete match, never as a one-event filter.
                self.add_check(expr, mentions - negated, path, placed)
            else:
                self.place(expr, mentions, path, placed)
        if not aggs:
            for k in kleene & mentions:
                placed.element.setdefault(k, []).append(self.predicate(expr, path))
        for j in negated & mentions:
            placed.blocker.setdefault(j, []).append(self.predicate(expr, path, negated=True))

    def previous_refs(self, expr: Expr, path: str) -> set[int]:
        """The components whose ``b[i-1]`` the expression reads."""
        return {
            self.resolve_in(node.ref, expr, path, node) for node in self.nodes(expr) if type(node) is Prev
        }

    def place_iteration(
        self,
        expr: Expr,
        path: str,
        prevs: set[int],
        refs: set[int],
        aggs: set[int],
        equiv: bool,
        roles: _Roles,
        placed: _Placed,
    ) -> None:
        """An iteration condition (docs/semantics.md §6): it compares an element of one
        Kleene component with the element before it in the run, and may read plain
        positive components."""
        k = next(iter(prevs))
        if len(prevs) > 1 or k not in roles.kleene:
            raise self.error("b[i-1] needs a Kleene component, one per condition", path)
        if aggs or equiv:
            raise self.error("a condition with b[i-1] may not hold an aggregate or an equivalence test", path)
        if refs & roles.negated:
            raise self.error("a condition with b[i-1] may not read a negated component", path)
        if (refs & roles.kleene) - {k}:
            raise self.error("a condition with b[i-1] may read the events of only one Kleene component", path)
        placed.iteration.setdefault(k, []).append(self.predicate(expr, path))

    def place_constant(self, expr: Expr, path: str, roles: _Roles, placed: _Placed) -> None:
        """A condition that reads no component is decided now: false means no match ever."""
        self.reads_values = True  # what is compiled depends on the literals' values
        if not compile_predicate(expr, self.resolver(path))([None] * len(roles.every)):
            placed.never = True

    def components(
        self, raw: tuple[Component, ...], classes: list[frozenset[str]], filters: dict[int, list[Expr]]
    ) -> list[Comp]:
        """The compiled components, each with the conjunction of its filters."""
        out = []
        for i, comp in enumerate(raw):
            own = filters[i]
            conjuncts = tuple(_anonymise(e) for e in own)
            pred = None
            if own:
                expr = own[0] if len(own) == 1 else BoolOp("and", tuple(own))
                pred = self.predicate(expr, "where", single=True)
            out.append(
                Comp(
                    i,
                    classes[i],
                    comp.alias,
                    pred,
                    negated=comp.negated,
                    kleene=(comp.kleene.min, comp.kleene.exact) if comp.kleene is not None else None,
                    kleene_max=comp.kleene.max if comp.kleene is not None else None,
                    sub=self.sub_nodes.get(i),
                    filter_conjuncts=conjuncts,
                    filter_id=filter_id(conjuncts) if own else None,
                )
            )
        return out

    def return_items(self, negated: frozenset[int]) -> list[tuple[str, ValueFn]]:
        """RETURN's items as (label, value function); a negated component has no event to read."""
        returns = []
        for i, item in enumerate(self.ast.returns):
            path = f"return[{i}].expr"
            refs, aggs, _ = self.references(item.expr, path)
            if (refs | aggs) & negated:
                raise self.error("RETURN cannot read a negated component: it has no event in the match", path)
            if self.previous_refs(item.expr, path):
                raise self.error("RETURN cannot read b[i-1]: it exists only in an iteration condition", path)
            if item.name is not None:
                label = item.name
            elif isinstance(item.expr, AttrRef):
                label = item.expr.attr
            else:
                label = f"expr{i + 1}"
            returns.append((label, self.value(item.expr, path)))
        return returns

    def place(self, expr: Expr, mentions: set[int], path: str, placed: _Placed) -> None:
        if len(mentions) == 1:
            placed.filters[next(iter(mentions))].append(expr)
        else:
            self.add_check(expr, mentions, path, placed)

    def add_check(self, expr: Expr, mentions: set[int], path: str, placed: _Placed) -> None:
        """A check on ``mentions`` (two or more positive components), with its key."""
        resolve = self.resolver(path)
        placed.checks.append((frozenset(mentions), self.predicate(expr, path)))
        placed.check_keys.append((filter_key((_indexed(expr, resolve),)), tuple(sorted(mentions))))

    # ---------------------------------------------------------- pattern shape

    def node_shape(
        self, pattern: Pattern, path: str, subs: list[CompiledQuery], depends: set[str]
    ) -> tuple[str, tuple[Component, ...], list[frozenset[str]]]:
        """Validate the top pattern; compile its sub-patterns into ``subs``."""
        kind = {Seq: KIND_SEQ, Conj: KIND_AND, Disj: KIND_OR}[type(pattern)]
        items = pattern.items
        self.sub_nodes: dict[int, CompiledQuery] = {}
        classes: list[frozenset[str]] = []
        for i, comp in enumerate(items):
            cpath = f"{path}.items[{i}]"
            if comp.sub is not None:
                node = self.compile_sub(comp.sub, cpath, subs, depends)
                self.sub_nodes[i] = node
                classes.append(frozenset([node.name]))
            else:
                classes.append(frozenset(comp.classes))
                depends |= {c[1:] for c in comp.classes if c.startswith("@")}
        self.validate(kind, items, path)
        return kind, items, classes

    def compile_sub(
        self, pattern: Pattern, path: str, subs: list[CompiledQuery], depends: set[str]
    ) -> CompiledQuery:
        ast = self.ast
        kind = {Seq: KIND_SEQ, Conj: KIND_AND, Disj: KIND_OR}[type(pattern)]
        comps = []
        for i, comp in enumerate(pattern.items):
            cpath = f"{path}.sub.items[{i}]"
            if comp.sub is not None:
                inner = self.compile_sub(comp.sub, cpath, subs, depends)
                cls = frozenset([inner.name])
                sub = inner
            else:
                cls = frozenset(comp.classes)
                depends |= {c[1:] for c in comp.classes if c.startswith("@")}
                sub = None
            comps.append(
                Comp(
                    i,
                    cls,
                    comp.alias,
                    None,
                    negated=comp.negated,
                    kleene=(comp.kleene.min, comp.kleene.exact) if comp.kleene is not None else None,
                    kleene_max=comp.kleene.max if comp.kleene is not None else None,
                    sub=sub,
                )
            )
        self.validate(kind, pattern.items, f"{path}.sub")
        same_before, overlapping = _roles(comps)
        node = CompiledQuery(
            name=sub_key(pattern, ast.mode, ast.within, self.tag),
            ast=Query(pattern, within=ast.within, mode=ast.mode),
            kind=kind,
            comps=tuple(comps),
            window=ast.within,
            mode_all=ast.mode == "all",
            checks=(),
            element_conds={},
            blocker_conds={},
            returns=(),
            probability=None,
            never=False,
            same_before=same_before,
            overlapping=overlapping and kind == KIND_AND,
            top=False,
            tag=self.tag,
        )
        # A set beside the list: an OR of thousands of sub-patterns scanned the list
        # once per sub-pattern.
        if node.name not in self.sub_names:
            self.sub_names.add(node.name)
            subs.append(node)
        return node

    def validate(self, kind: str, items: tuple[Component, ...], path: str) -> None:
        n = len(items)
        positives = [c for c in items if not c.negated]
        for i, c in enumerate(items):
            if c.select is None:
                continue
            cpath = f"{path}.items[{i}]"
            # docs/semantics.md §11: a selection picks the one instance a match binds to
            # a component of the query's own pattern.
            if path != "pattern":
                raise self.error(
                    f"'{c.select}:' selects a component of the query's pattern, not of a sub-pattern", cpath
                )
            if kind == KIND_OR:
                raise self.error(f"'{c.select}:' in a disjunction: its match binds one component", cpath)
            if c.kleene is not None:
                raise self.error(
                    f"'{c.select}:' picks one instance; a Kleene component takes all of them (Rizvi's"
                    " 'cumulative')",
                    cpath,
                )
            if c.sub is not None or any(x.startswith("@") for x in c.classes):
                raise self.error(f"'{c.select}:' needs a component of primitive classes", cpath)
            if self.ast.mode == "all":
                raise self.error(
                    f"'{c.select}:' chooses one match per event; MODE ALL emits every one (use MODE RECENT"
                    " or MODE CHRONICLE for the unmarked components)",
                    cpath,
                )
        if not positives:
            raise self.error(
                "a pattern needs a positive component: a negation cannot stand alone", f"{path}.items[0]"
            )
        if kind == KIND_OR:
            for i, c in enumerate(items):
                if c.negated or c.kleene is not None:
                    raise self.error(
                        "a disjunction's components cannot be negated or Kleene", f"{path}.items[{i}]"
                    )
            return
        if n >= 2 and self.ast.within is None:
            what = "sequence" if kind == KIND_SEQ else "conjunction"
            raise self.error(f"a {what} of {n} components needs WITHIN <duration>", f"{path}.items[0]")
        for i, c in enumerate(items):
            cpath = f"{path}.items[{i}]"
            if c.kleene is not None and c.negated:
                raise self.error("a negated component cannot be a Kleene closure", cpath)
            if c.kleene is not None and kind == KIND_AND:
                other = next((o for o in positives if o is not c and _classes_meet(o, c)), None)
                if other is not None:
                    raise self.error(
                        "a Kleene component inside a conjunction cannot share a class with another"
                        " component: which events would be the group's is not defined",
                        cpath,
                    )
        if kind != KIND_SEQ:
            return
        for i in range(1, n):
            if items[i].negated and items[i - 1].negated:
                raise self.error("two adjacent negations: merge them with !ANY(...)", f"{path}.items[{i}]")
        pos_idx = [i for i, c in enumerate(items) if not c.negated]
        for a, b in zip(pos_idx, pos_idx[1:], strict=False):
            if (
                items[a].kleene is not None
                and items[b].kleene is not None
                and _classes_meet(items[a], items[b])
            ):
                raise self.error(
                    "two Kleene components next to each other cannot share a class: where one group"
                    " ends and the next begins is not defined",
                    f"{path}.items[{b}]",
                )
        if len(pos_idx) == 1 and items[pos_idx[0]].kleene is not None and self.ast.within is None:
            raise self.error(
                "a Kleene component alone needs WITHIN <duration>: its group is the events in the window",
                f"{path}.items[{pos_idx[0]}]",
            )
        first, last = items[pos_idx[0]], items[pos_idx[-1]]
        if len(pos_idx) >= 2 and first.kleene is not None and last.kleene is not None:
            raise self.error(
                "a sequence cannot both start and end with Kleene closure", f"{path}.items[{pos_idx[-1]}]"
            )

    # ---------------------------------------------------------------- references

    def inner_names(self, raw: tuple[Component, ...]) -> dict[str, tuple[int, ...] | str]:
        """Aliases of components inside sub-patterns (docs/semantics.md §8): each to its
        path — the top component, then the position among the positive components at
        each level, as a sub-pattern instance's ``parts`` hold them — or to the reason it
        cannot be read (a negated component, a disjunction's component)."""
        out: dict[str, tuple[int, ...] | str] = {}

        def walk(pattern: Pattern, path: tuple[int, ...], where: str) -> None:
            positives = [c for c in pattern.items if not c.negated]
            for i, comp in enumerate(pattern.items):
                cpath = f"{where}.sub.items[{i}]"
                if comp.alias is not None:
                    if comp.alias in self.names:
                        raise self.error(f"alias {comp.alias!r} is used twice", cpath)
                    if comp.alias in out:
                        # Several sub-patterns (the branches of a disjunction, as Rizvi's
                        # ANYONE writes them) may each name a component so; from outside
                        # them the alias is ambiguous (docs/semantics.md §8).
                        out[comp.alias] = "it names components in several sub-patterns"
                    elif comp.negated:
                        out[comp.alias] = "it is negated: it has no event in the match"
                    elif isinstance(pattern, Disj):
                        out[comp.alias] = "it is in a disjunction: the match may not bind it"
                    elif comp.kleene is not None:
                        out[comp.alias] = "it is a Kleene group"
                    else:
                        out[comp.alias] = (*path, positives.index(comp))
                if comp.sub is not None and not comp.negated and not isinstance(pattern, Disj):
                    walk(comp.sub, (*path, positives.index(comp)), cpath)

        for j, comp in enumerate(raw):
            if comp.sub is not None and not comp.negated:
                walk(comp.sub, (j,), f"pattern.items[{j}]")
        return out

    def nested_refs(self, expr: Expr, path: str) -> bool:
        """Whether the expression reads a component inside a sub-pattern (by alias)."""
        found = False
        if not self.nested:
            return False
        for node in self.nodes(expr):
            ref = getattr(node, "ref", None)
            if isinstance(ref, str) and ref not in self.names and ref in self.nested:
                node_path = _path_of(expr, path, node)
                target = self.nested[ref]
                if isinstance(target, str):
                    raise self.error(f"{ref!r} cannot be read: {target}", node_path)
                if not isinstance(node, AttrRef):
                    raise self.error(
                        f"{ref!r} is inside a sub-pattern: it has no group to aggregate", node_path
                    )
                found = True
        return found

    def build_names(self, raw: tuple[Component, ...], classes: list[frozenset[str]]) -> dict[str, int]:
        """Alias, then ``$xN``, then a class held by exactly one component as its single
        class (docs/semantics.md)."""
        names: dict[str, int] = {}
        for i, comp in enumerate(raw):
            if comp.alias is not None:
                if comp.alias in names:
                    raise self.error(f"alias {comp.alias!r} is used twice", f"pattern.items[{i}]")
                names[comp.alias] = i
        for i in range(len(raw)):
            names.setdefault(f"$x{i + 1}", i)
        singles: dict[str, list[int]] = {}
        for i, comp in enumerate(raw):
            if comp.sub is None and len(comp.classes) == 1:
                singles.setdefault(comp.classes[0], []).append(i)
        self.ambiguous = {cls: len(idxs) for cls, idxs in singles.items() if len(idxs) > 1}
        for cls, idxs in singles.items():
            if len(idxs) == 1:
                names.setdefault(cls, idxs[0])
        return names

    def resolve(self, ref: str, path: str) -> int:
        if ref in self.names:
            return self.names[ref]
        inner = getattr(self, "nested", {}).get(ref)
        if isinstance(inner, tuple):
            return inner[0]  # the sub-pattern holding it (the compiled read follows the path)
        if isinstance(inner, str):
            raise self.error(f"{ref!r} cannot be read: {inner}", path)
        if ref.startswith("$x") and ref[2:].isdigit():
            raise self.error(f"{ref} is out of range: the pattern has {len(self.raw)} components", path)
        if ref in self.ambiguous:
            raise self.error(
                f"class {ref!r} names {self.ambiguous[ref]} components; give them aliases or use $xN", path
            )
        raise self.error(f"unknown component {ref!r} (no alias, $xN or class of that name)", path)

    def nodes(self, expr: Expr) -> list[Expr]:
        """:func:`_nodes` of ``expr``, listed once per compilation (a conjunct is read
        for its references, its sub-pattern reads and its ``b[i-1]``)."""
        key = id(expr)
        got = self.node_lists.get(key)
        if got is None or got[0] is not expr:
            got = self.node_lists[key] = (expr, _nodes(expr))
        return got[1]

    def resolve_in(self, ref: str, expr: Expr, path: str, node: Expr) -> int:
        """:meth:`resolve` of a reference read at ``node`` of ``expr`` (found at
        ``path``): the node's own path is worked out only for an error."""
        index = self.names.get(ref)
        if index is not None:
            return index
        return self.resolve(ref, _path_of(expr, path, node))

    def resolver(self, base: str) -> Callable[[str], Any]:
        """References to compiled indexes; a component inside a sub-pattern to its path."""

        def resolve(ref: str) -> Any:
            inner = self.nested.get(ref) if ref not in self.names else None
            return inner if isinstance(inner, tuple) else self.resolve(ref, base)

        return resolve

    def references(self, expr: Expr, path: str) -> tuple[set[int], set[int], bool]:
        """(components read through ``ref.attr``, components aggregated, whether the
        expression holds an equivalence test). Raises on unknown references and on
        aggregates over a non-Kleene component."""
        refs: set[int] = set()
        aggs: set[int] = set()
        equiv = False
        for node in self.nodes(expr):
            if isinstance(node, AttrRef):
                refs.add(self.resolve_in(node.ref, expr, path, node))
            elif isinstance(node, Agg):
                idx = self.resolve_in(node.ref, expr, path, node)
                if self.raw[idx].kleene is None:
                    raise self.error(
                        f"{node.func}() needs a Kleene component, and {node.ref!r} is not one",
                        _path_of(expr, path, node),
                    )
                aggs.add(idx)
            elif isinstance(node, Equiv) and not (node.attr in ("symbol", "src") and node.value is None):
                equiv = True
        return refs, aggs, equiv

    # ---------------------------------------------------------------- conjuncts

    def split(self, expr: Expr, path: str) -> Iterator[tuple[Expr, str]]:
        if isinstance(expr, BoolOp) and expr.op == "and":
            for i, operand in enumerate(expr.operands):
                yield from self.split(operand, f"{path}.operands[{i}]")
        else:
            yield expr, path

    def expand_equiv(self, expr: Expr, positives: list[int]) -> list[Expr]:
        """A plain sequence's ``[a]`` as pairwise equalities with the first component, so
        each is checked as soon as both sides are bound (all equal either way)."""
        if not isinstance(expr, Equiv):
            return [expr]
        if expr.value is not None:
            return [Compare("=", AttrRef(f"$x{i + 1}", expr.attr), expr.value) for i in positives]
        first = positives[0]
        others = positives[1:] or [first]
        return [
            Compare("=", AttrRef(f"$x{first + 1}", expr.attr), AttrRef(f"$x{i + 1}", expr.attr))
            for i in others
        ]


def _classes_meet(a: Component, b: Component) -> bool:
    """Whether two components can take the same instances: a class in common, or the
    same sub-pattern."""
    if a.sub is not None or b.sub is not None:
        return a.sub == b.sub
    return not set(a.classes).isdisjoint(b.classes)


def _roles(comps: list[Comp]) -> tuple[tuple[int, ...], bool]:
    """For conjunctions: each component's previous component with the same class set,
    and whether some class sets overlap without being equal.

    O(total classes): the last index per class set, and per class the distinct class
    sets holding it (two distinct sets overlap exactly when some class is in both). It
    was a scan of the earlier components per component, 2 s for an OR of 3,000 classes.
    """
    same_before = []
    last: dict[frozenset[str], int] = {}
    holder: dict[str, frozenset[str]] = {}
    overlapping = False
    for i, comp in enumerate(comps):
        if comp.negated:
            same_before.append(-1)
            continue
        classes = comp.classes
        same_before.append(last.get(classes, -1))
        if classes not in last:
            for cls in classes:
                if holder.setdefault(cls, classes) != classes:
                    overlapping = True
        last[classes] = i
    return tuple(same_before), overlapping


def _nodes(expr: Expr) -> list[Expr]:
    """Every node of an expression, in :func:`_walk`'s order (without the paths, which
    only an error needs: :func:`_path_of`)."""
    out: list[Expr] = []
    todo: list[Any] = [expr]
    while todo:
        node = todo.pop()
        out.append(node)
        names = fields_of(type(node))
        if names is None:
            continue
        children: list[Any] = []
        for name in names:
            value = getattr(node, name)
            if type(value) is tuple:
                children.extend(item for item in value if fields_of(type(item)) is not None)
            elif fields_of(type(value)) is not None:
                children.append(value)
        todo.extend(reversed(children))
    return out


def _path_of(expr: Expr, path: str, node: Expr) -> str:
    """The path of ``node`` (the first such object) inside ``expr`` found at ``path``."""
    for found, found_path in _walk(expr, path):
        if found is node:
            return found_path
    return path


def _walk(expr: Expr, path: str) -> Iterator[tuple[Expr, str]]:
    """Every node of an expression with its JSON path (the parser's span keys)."""
    yield expr, path
    for name in fields_of(type(expr)) or ():
        value = getattr(expr, name)
        if type(value) is tuple:
            for i, item in enumerate(value):
                if fields_of(type(item)) is not None:
                    yield from _walk(item, f"{path}.{name}[{i}]")
        elif fields_of(type(value)) is not None:
            yield from _walk(value, f"{path}.{name}")


def _anonymise(expr: Expr) -> Expr:
    """``expr`` with every component reference replaced by one placeholder, so the
    same filter written with different aliases gets the same key."""
    return rename_refs(expr, lambda ref: "$self")


def _indexed(expr: Expr, resolve: Callable[[str], int]) -> Expr:
    """``expr`` with every component reference written ``#<component index>``."""
    return rename_refs(expr, lambda ref: f"#{resolve(ref)}")


def rename_refs(expr: Expr, rename: Callable[[str], str]) -> Expr:
    """``expr`` with every component reference ``r`` (of ``ref.attr`` and aggregates)
    replaced by ``rename(r)``."""

    def rewrite(node: Any) -> Any:
        cls = type(node)
        if cls is AttrRef:
            return AttrRef(rename(node.ref), node.attr)
        if cls is Agg:
            return Agg(node.func, rename(node.ref), node.attr)
        if cls is tuple:
            return tuple(rewrite(x) for x in node)
        names = fields_of(cls)
        if names is not None:
            return cls(**{name: rewrite(getattr(node, name)) for name in names})
        return node

    return rewrite(expr)  # type: ignore[no-any-return]
