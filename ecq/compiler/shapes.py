"""The shape of a query: everything compiling it reads, with its class names replaced by
their order of first appearance.

Thousands of registered queries often differ only in their classes (the paper's
templates, a generated workload, a service's users writing the same pattern over their
own classes). Two queries with the same shape compile to the same thing up to their
class names: the compiler reads a class name only to tell components apart (which
components share a class, which name a reference resolves to), never for what it
says. So one compiled query of a shape, with its classes renamed, is what compiling
another of that shape gives (``ecq.compiler.query.compile_query`` keeps one per shape).

Queries also differ in their constants (every user their own bounds): the key keeps a
literal by its type only, and the WITHIN window by whether there is one, and lists the
literals' values beside it (``parameters``). A compiled query of the shape is turned
into another's by putting its literals in the place of the model's (the compiler
rebuilds the predicates that read them: ``ecq.compiler.query``), and its window.

What the key keeps, so that no two queries that compile differently share one:

- every field of the AST but the source positions (``spans``, which only errors read)
  and the name the query's text gives itself (``QUERY name``; the compiler reads the
  name the query is registered under);
- literals by type (``1``, ``1.0`` and ``true`` are equal Python values but different
  queries), WITHIN by its type, and every other float by ``repr``;
- a reference (``ref`` of ``A.x``, ``count(A)``, ``A[i-1].x``, ``AFTER MATCH SKIP TO
  LAST A``) to a class as that class's number, any other reference as written.

A query has no shape (it is compiled as it is) when its shape could not stand for it:
an alias spelled as one of its classes (a reference to it would resolve otherwise once
the classes are renamed), a sub-pattern or an ``@name`` class (their derived classes
are named after the query's text), or a selection or consumption policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ecq.compiler.policy import has_policy
from ecq.language.ast import Arith, AttrRef, BoolOp, Compare, Component, Lit, Query
from ecq.language.lexer import Token
from ecq.language.shapes import template_of

__all__ = ["Shape", "Parts", "fields_of", "shape_of", "shape_parts", "literal_id", "text_parts"]

# A query's shape key, its classes in order of first appearance (class ``i`` of the key
# is ``classes[i]``) and its parameters (:func:`literal_id` of each literal, in the
# order the key meets them, then of the window): equal for exactly equal queries.
Shape = tuple[tuple[Any, ...], tuple[str, ...], tuple[Any, ...]]
# What compiling by shape reads: the key, the classes, the literals (the ``Lit`` nodes,
# in the order the key meets them).
Parts = tuple[tuple[Any, ...], tuple[str, ...], list[Lit]]

# The field names of each AST node class (None: not a node, or a ``Lit``): read once per
# class, not through dataclasses.fields() at every node.
_FIELDS: dict[type, tuple[str, ...] | None] = {}

# Fields holding a reference to a component: an alias, ``$xN`` or a class name.
_REF_FIELDS = frozenset({"ref", "skip_var"})


def fields_of(cls: type) -> tuple[str, ...] | None:
    """The field names of an AST node class (None: not a node, or a ``Lit``)."""
    names = _FIELDS.get(cls, ())
    if names == ():
        if cls is Lit or not dataclasses.is_dataclass(cls):
            names = None
        else:
            names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


def literal_id(value: Any) -> Any:
    """What tells one literal's value from another's: its type and value, a float by
    ``repr`` (``-0.0`` is not ``0.0``, a NaN is itself)."""
    t = type(value)
    return (t, repr(value)) if t is float else (t, value)


def shape_of(ast: Query) -> Shape | None:
    """The query's shape (the module's docstring), or None when it has none."""
    parts = shape_parts(ast)
    if parts is None:
        return None
    key, classes, lits = parts
    return key, classes, (*[literal_id(lit.value) for lit in lits], literal_id(ast.within))


def shape_parts(ast: Query) -> Parts | None:
    """The query's shape key, classes and literals, or None when it has no shape.

    A query the parser built from a template of its own shapes (``Query._origin``,
    ``ecq.language.shapes.Origin``) shares its key with every query of that template
    whose tokens kept as written are the same: the key is looked up there, and only
    the classes and the literals are read from the tree."""
    origin = ast.__dict__.get("_origin")
    if origin is not None:
        known = origin.template.compiled_shapes.get(origin.values)
        if known is not None:
            key, paths, _ = known
            numbers = _class_numbers(ast)
            lits = [_at(ast, path) for path in paths]
            if numbers is not None and all(type(lit) is Lit for lit in lits):
                return key, tuple(numbers), lits
    parts = _shape_parts(ast)
    if parts is None:
        return None
    parts = (_interned(parts[0]), parts[1], parts[2])
    if origin is not None:
        paths = _paths_to(ast, parts[2])
        if paths is not None:
            template = origin.template
            template.compiled_shapes[origin.values] = (parts[0], paths, _slots(template, paths))
    return parts


# One object per shape key kept with a template: the compiler's cache of shapes finds a
# key by identity before comparing it field by field (a tenth of compiling a query of a
# known shape). Bounded as that cache is, by starting again.
_KEYS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_KEYS_MAX = 8192


def _interned(key: tuple[Any, ...]) -> tuple[Any, ...]:
    found = _KEYS.get(key)
    if found is None:
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        found = _KEYS[key] = key
    return found


# Where a query of a template finds each of its classes (in the order its components
# name them, repeats included) and each of its literals (in the order of the shape's
# ``lits``): a token's field (its index and the field, 1 the text, 5 the value), or what
# the template holds there for every query of it (a pinned class name, a ``Lit``).
Slots = tuple[tuple[tuple[int, int] | str, ...], tuple[tuple[int, int] | Lit, ...]]


def _slots(template: Any, paths: list[tuple[str | int, ...]]) -> Slots | None:
    """The :data:`Slots` of a template (``ecq.language.shapes``) whose queries have their
    literals at ``paths``; None when they cannot be read from the tokens."""
    tree = template.tree
    classes: list[tuple[int, int] | str] = []
    for comp in tree.pattern.items:
        if comp.sub is not None:
            return None
        for cls in comp.classes:
            classes.append(template.slot_of(cls) or str(cls))
    lits: list[tuple[int, int] | Lit] = []
    for path in paths:
        node = _at(tree, path)
        if type(node) is not Lit:
            return None
        lits.append(template.slot_of(node.value) or node)
    return tuple(classes), tuple(lits)


def text_parts(tokens: list[Token]) -> tuple[tuple[Any, ...], tuple[str, ...], list[Lit], float | None] | None:
    """:func:`shape_parts` of the query of ``tokens`` (a text's, ``tokenize``), and its
    window, read from the tokens alone: when they have the shape of a parse template
    (``ecq.language.shapes.template_of``) from which a query with the same texts kept as
    written was compiled. None otherwise."""
    template = template_of(tokens)
    if template is None or template.as_written is None:
        return None
    known = template.compiled_shapes.get(tuple([tokens[i][1] for i in template.as_written]))
    if known is None or known[2] is None:
        return None
    key, _, (class_slots, lit_slots) = known
    classes = tuple(dict.fromkeys([s if type(s) is str else tokens[s[0]][s[1]] for s in class_slots]))
    lits = [s if type(s) is Lit else _lit(tokens[s[0]][s[1]]) for s in lit_slots]  # type: ignore[index]
    return key, classes, lits, template.within_of(tokens)


def _lit(value: Any) -> Lit:
    lit = object.__new__(Lit)
    object.__setattr__(lit, "__dict__", {"value": value})
    return lit


def _class_numbers(ast: Query) -> dict[str, int] | None:
    """Each class of the query's components numbered in order of first appearance;
    None when a component is a sub-pattern or an ``@name`` class, or an alias is
    spelled as a class (the query has no shape)."""
    numbers: dict[str, int] = {}
    aliases: list[str] = []
    for comp in ast.pattern.items:
        if comp.sub is not None:
            return None
        for cls in comp.classes:
            if cls.startswith("@"):
                return None
            if cls not in numbers:
                numbers[cls] = len(numbers)
        if comp.alias is not None:
            aliases.append(comp.alias)
    if any(alias in numbers for alias in aliases):
        return None
    return numbers


def _at(node: Any, path: tuple[str | int, ...]) -> Any:
    """The node reached from ``node`` through ``path`` (field names and tuple indexes)."""
    for step in path:
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return node


def _paths_to(ast: Query, lits: list[Lit]) -> list[tuple[str | int, ...]] | None:
    """The path (:func:`_at`) of each of ``lits`` (nodes of ``ast``), in order; None
    when one is not found."""
    found: dict[int, tuple[str | int, ...]] = {}

    def walk(node: Any, path: tuple[str | int, ...]) -> None:
        cls = type(node)
        if cls is Lit:
            found.setdefault(id(node), path)
        elif cls is tuple:
            for i, x in enumerate(node):
                walk(x, (*path, i))
        else:
            names = _query_fields() if cls is Query else fields_of(cls)
            if names is not None:
                for name in names:
                    walk(getattr(node, name), (*path, name))

    walk(ast, ())
    paths = [found.get(id(lit)) for lit in lits]
    return None if any(p is None for p in paths) else paths  # type: ignore[return-value]


def _shape_parts(ast: Query) -> Parts | None:
    """:func:`shape_parts` by walking the whole tree."""
    if has_policy(ast):
        return None
    numbers = _class_numbers(ast)
    if numbers is None:
        return None
    lits: list[Lit] = []
    key = tuple(
        [
            (float, type(ast.within)) if name == "within" else _key(getattr(ast, name), numbers, lits)
            for name in _query_fields()
        ]
    )
    return key, tuple(numbers), lits


def _query_fields() -> tuple[str, ...]:
    names = _FIELDS.get(Query)
    if names is None:
        # Not the name a text gives itself (QUERY name): the compiler names a query by the
        # name it is registered under, so a file of named queries shares shapes too.
        names = _FIELDS[Query] = tuple(
            f.name for f in dataclasses.fields(Query) if f.name not in ("spans", "name")
        )
    return names


# A component's key built field by field, when its fields are those known here (else
# the generic walk, which takes any field).
_COMPONENT_FAST = fields_of(Component) == ("classes", "sub", "negated", "kleene", "alias", "any_of", "select")

# The expression nodes keyed field by field, when their fields are those known here.
_EXPR_FAST = (
    fields_of(AttrRef) == ("ref", "attr")
    and fields_of(Compare) == fields_of(Arith) == ("op", "left", "right")
    and fields_of(BoolOp) == ("op", "operands")
    and "ref" in _REF_FIELDS
)

# Values that stand for themselves in a key.
_PLAIN = frozenset({str, int, bool, type(None)})


def _key(node: Any, numbers: dict[str, int], lits: list[Lit]) -> Any:
    cls = type(node)
    if cls in _PLAIN:
        return node
    if cls is tuple:
        return tuple([_key(x, numbers, lits) for x in node])
    if cls is Lit:
        lits.append(node)
        return (Lit, type(node.value))
    # The commonest expression nodes, keyed as the generic walk below keys them.
    if cls is AttrRef and _EXPR_FAST:
        ref = node.ref
        return (AttrRef, numbers.get(ref, ref), node.attr)
    if (cls is Compare or cls is Arith) and _EXPR_FAST:
        return (cls, node.op, _key(node.left, numbers, lits), _key(node.right, numbers, lits))
    if cls is BoolOp and _EXPR_FAST:
        return (BoolOp, node.op, tuple([_key(x, numbers, lits) for x in node.operands]))
    if cls is float:
        return (float, repr(node))
    if cls is Component and _COMPONENT_FAST and node.sub is None:
        kleene = node.kleene
        return (
            tuple([numbers[c] for c in node.classes]),
            node.negated,
            None if kleene is None else _key(kleene, numbers, lits),
            node.alias,
            node.any_of,
            node.select,
        )
    names = fields_of(cls)
    if names is None:
        return node
    out: list[Any] = [cls]
    for name in names:
        value = getattr(node, name)
        if type(value) in _PLAIN:
            if name in _REF_FIELDS and type(value) is str:
                # A class as its number (an int), anything else as written (a str).
                out.append(numbers.get(value, value))
            else:
                out.append(value)
        elif cls is Component and name == "classes":
            out.append(tuple([numbers[c] for c in value]))
        else:
            out.append(_key(value, numbers, lits))
    return tuple(out)
