"""A snapshot of the engine's registered queries, so a restart need not parse, compile
and install every stored query again.

What it holds: the engine (``ecq.Engine``: its networks, compiled queries and every
table derived from them) as it stands after the op log's *head* — the registrations,
unregistrations and lateness changes before its first batch or time advance, where
the live queries of a trimmed log sit. No event has reached the engine then, so the
snapshot holds queries only: a restart loads it in place of replaying the head, then
replays the rest of the log (the retained window) as before.

Why it is trusted only when everything matches: the snapshot is a cache of the head,
never part of the state. Its header names

- the format (:data:`FORMAT`) and the code that wrote it (:func:`code_version`: a digest
  of the engine's sources, the Python version and the kernel in use): the pickled
  objects are this code's, so any other build rebuilds instead;
- the ops it stands for: how many, the position of the last, and a SHA-256 of each
  one's position, kind, name and body (:class:`HeadDigest`) — a trim that dropped a
  registration pair, an op rewritten, a different store, and the digest differs;
- the size and CRC-32 of the pickled engine, checked before it is read.

A snapshot that stands for the first ``k`` ops of a longer head (queries registered
since, their batches trimmed) is used for those ``k``; the rest of the head is replayed
and a new snapshot written. On any mismatch or damage the rebuild replays the whole log,
as without a snapshot, and the log says why (:class:`Stale`).

How the engine is pickled (:class:`_Pickler`): the standard ``pickle`` protocol 5, with
six things taken otherwise — a network's kernel is left out and made again when read
(it holds nothing before the first event but what it derives from the network); a
closure compiled from a query's conditions is written as the place of its code (module,
qualified name, line) and its cells, its code being found again in the loaded module
(the code version vouches that it is the same code), and read back by the function and
cell types themselves (the code and the module's globals written once, by reference),
without a call into Python per closure; a compiled query's syntax tree, which matching
never reads, is written as bytes of its own and unpacked when first asked for (its
mode and partition key, read at every start, computed before writing), so a start
makes none of the trees' objects (a third of the rest); a module-level object of the
engine's modules (a sentinel such as ``MISSING``, compared by identity) is written as
its name, so it is the same object after loading. And a wide integer (a query bitset,
as wide as the number of queries) is written once however often referenced, before the
engine, as the numbers of its set bits when it is sparse (most are: a filter's few
queries among thousands). And the values that the compiled queries, their components,
the nodes and the conjunctions' shapes hold as equal copies (tuples, frozensets and
condition nodes of the same types: :class:`_Values`) are written once, the first met
standing for all. Nothing else is special: an object
that does not pickle makes :func:`write` fail, and the log says so (the next start
rebuilds).

The file (``scemon.snapshot`` beside the store) is written to a temporary name, synced
and renamed over the old one, so a kill while writing leaves the old file or the new
one, never a torn one (and a torn one would fail its checksum).
"""

from __future__ import annotations

import copyreg
import functools
import gc
import hashlib
import importlib
import io
import logging
import os
import pickle
import sys
import types
import typing
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import ecq
from ecq.compiler.filters import _bit_numbers, bits_of
from ecq.compiler.query import Comp, CompiledQuery
from ecq.engine import Engine
from ecq.kernel.make import make_kernel
from ecq.kernel.pure import PureKernel
from ecq.kernel.select import compiled_module
from ecq.language import ast as _ast
from ecq.matching.conjunction import Shape, kernel_shape
from ecq.structures.qstate import QState

__all__ = ["FORMAT", "SNAPSHOT_FILE", "HeadDigest", "Header", "Stale", "code_version", "read", "write"]

log = logging.getLogger("scemon.snapshot")

FORMAT = 5  # 5: compiled queries, components, nodes and shapes read with their state as __dict__
SNAPSHOT_FILE = "scemon.snapshot"
# The first line of the file; then the header (one JSON line), then the pickled engine.
MAGIC = b"scemon-snapshot\n"


# Integers of at least this many bits are written once however often referenced.
WIDE_BITS = 1024
# The unsigned 32-bit array type a sparse wide integer's set bits are written as.
_U32 = next(code for code in "ILH" if array(code).itemsize == 4)


class Stale(Exception):
    """The snapshot cannot stand for the log's head: why, in words for the log."""


@functools.cache
def code_version() -> str:
    """A digest of the engine's sources (every ``.py``, ``.pyx``, ``.pxd`` and ``.h``
    under ``ecq/``, by path) and of the Python that runs them: the pickled objects are
    instances of this code's classes, so a snapshot of another build is never read."""
    root = Path(ecq.__file__).parent
    digest = hashlib.sha256()
    digest.update(f"{sys.implementation.name}-{sys.version_info[:3]}-{FORMAT}".encode())
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".pyx", ".pxd", ".h")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return f"engine-{digest.hexdigest()[:24]}"


class HeadDigest:
    """A running SHA-256 of the log's head, op by op: what a snapshot stands for."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0
        self.last_pos = -1

    def add(self, pos: int, kind: str, name: str | None, body: bytes | None, time: float | None) -> None:
        size = None if body is None else len(body)
        self._hash.update(orjson.dumps([pos, kind, name, time, size]))
        self._hash.update(b"\n")
        if body is not None:
            self._hash.update(body)
        self.count += 1
        self.last_pos = pos

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True)
class Header:
    """What a snapshot says of itself (the file's second line)."""

    format: int
    code: str
    kernel: str
    shard: str
    ops: int
    last_pos: int
    digest: str
    queries: int
    size: int
    crc: int

    def stands_for(self, code: str, kernel: str, shard: str) -> str | None:
        """Why this snapshot cannot be read by this build (None: it can)."""
        if self.format != FORMAT:
            return f"it is of format {self.format}, this build reads {FORMAT}"
        if self.code != code:
            return f"it was written by another build of the engine ({self.code}, this is {code})"
        if self.kernel != kernel:
            return f"it was written with the {self.kernel} kernel, this engine runs the {kernel} one"
        if self.shard != shard:
            return f"it was written by shard {self.shard or 'none'!r}, this is {shard or 'none'!r}"
        return None


def write(path: Path, engine: Engine, head: HeadDigest, shard: str) -> Header:
    """Write the snapshot of ``engine``, which stands for the ops ``head`` digested (no
    event has reached it). Atomic (a temporary file renamed over the old one)."""
    owns = engine.owns
    engine.owns = None  # the shard's ownership test is the server's, set again when read
    # Pickling makes a memo entry per object: the cyclic collector would walk the
    # whole engine again and again meanwhile (half the time of writing).
    was = gc.isenabled()
    gc.disable()
    try:
        body = io.BytesIO()
        pickler = _Pickler(body)
        pickler.dump(engine)
    finally:
        engine.owns = owns
        if was:
            gc.enable()
    # The wide integers first (the engine's pickle names them by their index there).
    buffer = io.BytesIO()
    pickle.dump([_wide_form(n) for n in pickler.wide], buffer, protocol=5)
    buffer.write(body.getbuffer())
    payload = buffer.getbuffer()
    header = Header(
        FORMAT,
        code_version(),
        engine.network.kernel.name,
        shard,
        head.count,
        head.last_pos,
        head.hexdigest(),
        len(engine.key_of),
        len(payload),
        zlib.crc32(payload),
    )
    temp = path.with_name(f"{path.name}.tmp")
    try:
        with open(temp, "wb") as out:
            out.write(MAGIC)
            out.write(orjson.dumps(header.__dict__))
            out.write(b"\n")
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # a full disk: leave no half-written file behind
        raise
    _sync_dir(path.parent)
    return header


def read_header(path: Path) -> tuple[Header, int]:
    """The snapshot's header and where its payload starts; raises :class:`Stale`."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(MAGIC))
            line = f.readline(1 << 16)
    except FileNotFoundError:
        raise Stale("there is none") from None
    except OSError as err:
        raise Stale(f"it cannot be read ({err})") from None
    if magic != MAGIC or not line.endswith(b"\n"):
        raise Stale("it is not a snapshot of this service (its first lines are not a header)")
    try:
        fields = orjson.loads(line)
        header = Header(**fields)
    except (orjson.JSONDecodeError, TypeError) as err:
        raise Stale(f"its header cannot be read ({err})") from None
    return header, len(MAGIC) + len(line)


def read(path: Path, header: Header, start: int, compiled: bool | None) -> Engine:
    """The engine the snapshot holds, its kernels made again; raises :class:`Stale` when
    its payload is not the one the header describes (damage), or does not load."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            payload = f.read()
    except OSError as err:
        raise Stale(f"it cannot be read ({err})") from None
    if len(payload) != header.size:
        raise Stale(f"it is {len(payload)} bytes long, its header says {header.size}: cut short or damaged")
    if zlib.crc32(payload) != header.crc:
        raise Stale("it fails its checksum: damaged")
    # Reading makes millions of objects that all stay: the cyclic collector would walk
    # them again and again for nothing.
    was = gc.isenabled()
    gc.disable()
    try:
        stream = io.BytesIO(payload)
        wide = [_wide_value(form) for form in pickle.load(stream)]
        engine = _Unpickler(stream, wide).load()
    except Exception as err:  # noqa: BLE001 - any failure to load means: rebuild
        raise Stale(f"it does not load ({type(err).__name__}: {err})") from None
    finally:
        if was:
            gc.enable()
    if not isinstance(engine, Engine):
        raise Stale(f"it holds a {type(engine).__name__}, not an engine")
    for _, net in engine.networks():
        net.kernel = make_kernel(net, net.level, compiled)
        net.kernel.queries_changed()
    return engine


def _sync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the pickling


def _no_kernel() -> None:
    """What a network's kernel is read as: nothing (``read`` makes a new one)."""
    return None


@functools.cache
def _module_object(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


@functools.cache
def _codes(module_name: str) -> dict[tuple[str, int], list[types.CodeType]]:
    """The code objects defined in a module (functions, methods and every function
    nested in them), by qualified name and first line, in the order of the source."""
    module = importlib.import_module(module_name)
    found: dict[tuple[str, int], list[types.CodeType]] = {}
    filename = getattr(module, "__file__", None)
    seen: set[int] = set()

    def walk_code(code: types.CodeType) -> None:
        if id(code) in seen or code.co_filename != filename:
            return
        seen.add(id(code))
        found.setdefault((code.co_qualname, code.co_firstlineno), []).append(code)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk_code(const)

    def walk(value: Any, depth: int = 0) -> None:
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            for part in (value.fget, value.fset, value.fdel):
                if part is not None:
                    walk(part, depth)
            return
        inner = getattr(value, "func", None)  # a cached property's function
        if isinstance(inner, types.FunctionType):
            walk(inner, depth)
        wrapped = getattr(value, "__wrapped__", None)
        if isinstance(wrapped, types.FunctionType):
            walk(wrapped, depth)
        if isinstance(value, types.FunctionType):
            walk_code(value.__code__)
        elif isinstance(value, type) and value.__module__ == module_name and depth < 4:
            for member in vars(value).values():
                walk(member, depth + 1)

    for value in list(vars(module).values()):
        walk(value)
    return found


def _code_place(fn: types.FunctionType) -> tuple[str, str, int, int]:
    code = fn.__code__
    module = fn.__module__
    candidates = _codes(module).get((code.co_qualname, code.co_firstlineno), [])
    for index, candidate in enumerate(candidates):
        if candidate is code:
            return module, code.co_qualname, code.co_firstlineno, index
    raise pickle.PicklingError(f"the code of {module}.{code.co_qualname} cannot be found in its module")


@functools.cache
def _code_at(module: str, qualname: str, line: int, index: int) -> tuple[types.CodeType, dict[str, Any]]:
    """The code found at a place, and its module's globals."""
    try:
        code = _codes(module)[(qualname, line)][index]
    except (KeyError, IndexError):
        raise pickle.UnpicklingError(f"no code {module}.{qualname} at line {line}") from None
    return code, vars(importlib.import_module(module))


def _make_closure(
    module: str, qualname: str, line: int, index: int, cells: int, defaults: tuple[Any, ...] | None
) -> types.FunctionType:
    """A closure of the code found at its place, with empty cells (filled by
    :func:`_fill_closure`: a closure may hold itself, as a recursive one does)."""
    code, globals_ = _code_at(module, qualname, line, index)
    return types.FunctionType(
        code, globals_, code.co_name, defaults, tuple([types.CellType() for _ in range(cells)])
    )


def _fill_closure(fn: types.FunctionType, state: tuple[tuple[Any, ...], dict[str, Any] | None]) -> None:
    values, kwdefaults = state
    for cell, value in zip(fn.__closure__ or (), values, strict=True):
        if value is not _EMPTY_MARK:
            cell.cell_contents = value
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults


class _EmptyCell:
    """A cell not yet filled when its closure was written (read back empty)."""

    def __reduce__(self) -> str:
        return "_EMPTY_MARK"


_EMPTY_MARK = _EmptyCell()


def _module_objects() -> dict[int, tuple[str, str]]:
    """The module-level objects of the engine's modules that must stay themselves
    (compared by identity, or shared): ``id -> (module, name)``. Numbers, strings and
    the like are equal when copied, and classes and functions pickle by name anyway."""
    plain = (
        type,
        types.ModuleType,
        types.FunctionType,
        types.BuiltinFunctionType,
        str,
        bytes,
        int,
        float,
        bool,
        complex,
        type(None),
    )
    out: dict[int, tuple[str, str]] = {}
    for module_name, module in sorted(sys.modules.items()):
        if module is None or not (module_name == "ecq" or module_name.startswith("ecq.")):
            continue
        for name, value in list(vars(module).items()):  # a copy: another thread may import
            if name.startswith("__") or isinstance(value, plain):
                continue
            if isinstance(value, tuple) and all(isinstance(v, (str, int, float)) for v in value):
                continue
            out.setdefault(id(value), (module_name, name))
    return out


def _wide_form(n: int) -> int | bytes:
    """How a wide integer is written: a sparse one (a query bitset of a few queries
    among 100,000: nearly all of them) as the numbers of its set bits, 4 bytes each,
    little-endian; a dense one (or a negative one) as itself. At 100,000 demo queries
    this made the snapshot 175 MB instead of 750."""
    if n < 0 or n.bit_count() * 32 >= n.bit_length():
        return n
    numbers = array(_U32, _bit_numbers(n))
    if sys.byteorder == "big":
        numbers.byteswap()
    return numbers.tobytes()


def _wide_value(form: int | bytes) -> int:
    """The integer :func:`_wide_form` wrote."""
    if type(form) is int:
        return form
    if type(form) is not bytes or len(form) % 4 or not form:
        raise pickle.UnpicklingError("a wide integer is neither an integer nor the numbers of its bits")
    if len(form) == 4:  # one query (a third of them at 100,000 demo queries): one shift
        return 1 << int.from_bytes(form, "little")
    numbers = array(_U32)
    numbers.frombytes(form)
    if sys.byteorder == "big":
        numbers.byteswap()
    return bits_of(numbers)


class _Unpickler(pickle.Unpickler):
    """Reads what :class:`_Pickler` wrote: a persistent id is an index into the list of
    wide integers read before the engine. (A method, not an attribute set on an
    instance: CPython 3.13 makes that attribute read-only.)"""

    def __init__(self, file: io.BytesIO, wide: list[int]) -> None:
        super().__init__(file)
        self._wide = wide

    def persistent_load(self, pid: Any) -> int:
        return self._wide[pid]


class _Pickler(pickle.Pickler):
    """``pickle`` with the exceptions the module docstring lists. Its
    override is called for every object that is not a number or a string, so it
    decides by the type first."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=5)
        # The distinct wide integers (the query bitsets), each written once: pickle
        # copies an integer wherever it is referenced, and the same set is referenced
        # from several tables (a filter's queries: its index, its attribute's, its
        # slot's), which at 100,000 queries tripled the file and the memory read back.
        self.wide: list[int] = []
        self._wide_at: dict[int, int] = {}
        self._objects = _module_objects()
        self._kernels = _kernel_types()
        self._special = (
            {type(obj) for obj in _objects_by_id(self._objects)}
            | self._kernels
            | {type, CompiledQuery}
            | _VALUE_HOLDERS
        )
        self._values = _Values(self._objects)
        # Closures found to hold nothing that leads back to them (by id; every one
        # stays alive while pickling, so an id is not reused meanwhile).
        self._acyclic: dict[int, bool] = {}
        self._refs = _Refs()

    def persistent_id(self, obj: Any) -> int | None:
        if type(obj) is not int or obj.bit_length() < WIDE_BITS:
            return None
        at = self._wide_at.get(obj)
        if at is None:
            at = self._wide_at[obj] = len(self.wide)
            self.wide.append(obj)
        return at

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is types.FunctionType:
            if obj.__closure__ is None and "<" not in obj.__qualname__:
                return NotImplemented  # by name, as pickle does
            return _closure_reduction(obj, self._acyclic, self._refs, self._values)
        if kind not in self._special:
            return NotImplemented
        if kind in self._kernels:
            return (_no_kernel, ())
        if kind is CompiledQuery:
            return self._compiled_query(obj)
        if kind in _VALUE_HOLDERS:
            return (_NEWOBJ, (kind,), self._values.state(obj.__dict__), None, None, _set_dict)
        if kind is type and obj in _BY_NAME:
            return (_module_object, _BY_NAME[obj])
        where = self._objects.get(id(obj))
        if where is not None:
            return (_module_object, where)
        return NotImplemented

    def _compiled_query(self, cq: CompiledQuery) -> Any:
        """A compiled query with its syntax tree packed (read back by
        ``CompiledQuery.ast``'s descriptor when first asked for): matching never reads it,
        and its dozens of objects a query were a third of reading the snapshot. What is
        derived from the tree and read at every start (its partition key, its mode, its
        classes) is computed first, so that a start does not unpack or compute it; and
        so is a conjunction's shape, which the compiled kernel's first event reads."""
        if "ast" not in cq.__dict__ and cq.__dict__.get("_packed_ast", (None,))[0] is _unpack_tree:
            return NotImplemented  # still packed (read from a snapshot): as it is
        cq.partition, cq.mode, cq.classes()  # noqa: B018 - kept once made: computed into the state
        kernel_shape(cq)
        state = self._values.state(cq.__dict__)
        if "ast" in state:
            body = io.BytesIO()
            _TreePickler(body, self._objects, self._special).dump(state.pop("ast"))
            state["_packed_ast"] = (_unpack_tree, body.getvalue())
        # (else compiled from its tokens, its tree not made: kept as its text, parsed
        # when first read; ecq.compiler.query.compile_text)
        return (_NEWOBJ, (CompiledQuery,), state, None, None, _set_dict)


def _set_dict(obj: Any, state: dict[str, Any]) -> None:
    """An object's attributes read back: the state the reader has just made becomes its
    ``__dict__`` (pickle's own way sets each of them into a second, empty dict: reading
    the objects of 100,000 demo queries, half a million of them these, took 1.7 s instead
    of 1.2). Frozen dataclasses among them: set past their ``__setattr__``."""
    object.__setattr__(obj, "__dict__", state)


# The classes whose attributes :class:`_Values` shares (each read with its __dict__ as
# its state, as pickle would): a compiled query's components, a network's nodes and
# the shapes of conjunctions (ecq.matching.conjunction).
_VALUE_HOLDERS: frozenset[type] = frozenset({Comp, QState, Shape})

# The syntax tree's expression nodes (frozen dataclasses, compared by value).
_AST_NODES: frozenset[type] = frozenset(typing.get_args(_ast.Expr))

# The atoms a shared value may hold: equal ones are interchangeable (within one type).
_ATOMS = (str, int, bool, bytes, type(None))


class _Values:
    """Equal immutable values written once. The compiled queries and nodes of a
    network hold their own equal copies of the same tuples and frozensets (the classes
    of a component, a filter's key and conjuncts, a node's classes, a comparison's
    constant arguments): about 1.4 of the 4.6 million objects read back for 100,000 demo
    queries, of some 240,000 values. Each
    holder's attributes are written with the first of each value met (pickle then
    writes it once and refers to it), so reading makes each value once.

    A value here is a tuple or frozenset of atoms, values and the syntax tree's frozen
    nodes (a filter's conjuncts), nested to any depth; two are equal when they hold
    the same types as well (``(1,)`` and ``(True,)`` or ``(0.0,)`` and ``(-0.0,)`` stay
    apart). Anything else, and a module-level object of the engine's (compared by
    identity), is written as it is."""

    def __init__(self, objects: dict[int, tuple[str, str]]) -> None:
        self._objects = objects
        self._first: dict[Any, Any] = {}
        # By id, each object met and what it is written as (itself when it is no value
        # or the first of its value), kept alive so that its id is not reused while pickling.
        self._seen: dict[int, tuple[Any, Any]] = {}

    def state(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` with each value replaced by the first equal one met."""
        return {name: self.first(value) for name, value in fields.items()}

    def first(self, value: Any) -> Any:
        kind = type(value)
        if kind is not tuple and kind is not frozenset and kind not in _AST_NODES:
            return value
        seen = self._seen.get(id(value))
        if seen is not None:
            return seen[1]
        key = self._key(value)
        if key is None:
            out = value
        else:
            out = self._first.get(key)
            if out is None:
                # The first of its value, made of the first of each value it holds.
                out = self._first[key] = self._made_of_firsts(value)
        self._seen[id(value)] = (value, out)
        return out

    def _made_of_firsts(self, value: Any) -> Any:
        kind = type(value)
        if kind is tuple:
            return tuple([self.first(v) for v in value])
        if kind is frozenset:
            return frozenset([self.first(v) for v in value])
        node = object.__new__(kind)
        node.__dict__.update({name: self.first(v) for name, v in value.__dict__.items()})
        return node

    def _key(self, value: Any) -> Any:
        """What identifies ``value`` among equal values of the same types, or None
        when it is not a value."""
        kind = type(value)
        if kind in _ATOMS:
            return (kind, value)
        if kind is float:
            return (float, value.hex())  # -0.0 apart from 0.0
        if kind is types.BuiltinFunctionType:
            return (kind, id(value))  # written by name: itself (operator.lt in a comparison's defaults)
        if id(value) in self._objects:
            return None
        keys: tuple[Any, ...] | frozenset[Any]
        if kind is tuple:
            keys = tuple([self._key(v) for v in value])
        elif kind is frozenset:
            keys = frozenset([self._key(v) for v in value])
        elif kind in _AST_NODES:
            keys = tuple([self._key(v) for v in value.__dict__.values()])
            names = tuple(value.__dict__)
            return None if None in keys else (kind, names, keys)
        else:
            return None
        return None if None in keys else (kind, keys)


# What pickle writes as its NEWOBJ opcode (the class's ``__new__``, then the state).
_NEWOBJ: Any = copyreg.__newobj__  # type: ignore[attr-defined]  # not in the stubs


class _TreePickler(pickle.Pickler):
    """A query's syntax tree as bytes of its own: plain objects, but for a
    module-level one of the engine's, written as its name (as :class:`_Pickler` does)."""

    def __init__(self, file: io.BytesIO, objects: dict[int, tuple[str, str]], special: set[type]) -> None:
        super().__init__(file, protocol=5)
        self._objects = objects
        self._special = special

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) not in self._special:
            return NotImplemented
        where = self._objects.get(id(obj))
        return NotImplemented if where is None else (_module_object, where)


def _unpack_tree(data: bytes) -> Any:
    """A syntax tree :class:`_TreePickler` wrote (within a snapshot whose checksum and
    code version were checked when it was read)."""
    return pickle.loads(data)


def _kernel_types() -> set[type]:
    """The kernels' classes: the pure one, and the compiled one when it is built."""
    kinds: set[type] = {PureKernel}
    compiled = compiled_module("_kernel")
    if compiled is not None:
        kinds.add(compiled.CompiledKernel)
    return kinds


def _objects_by_id(objects: dict[int, tuple[str, str]]) -> list[Any]:
    return [_module_object(module, name) for module, name in objects.values()]


def _closure_reduction(
    fn: types.FunctionType, acyclic: dict[int, bool], refs: _Refs, shared: _Values
) -> tuple[Any, ...]:
    """How closure ``fn`` is written: in one call that makes it with its cells filled
    when nothing it holds can lead back to it (``acyclic``: the verdicts so far, by id),
    else empty first and filled after, so that a closure holding itself is read back."""
    module = fn.__module__ or ""
    if not (module == "ecq" or module.startswith("ecq.")):
        raise pickle.PicklingError(f"a closure of {module}.{fn.__qualname__} is not the engine's")
    place = _code_place(fn)
    cells = fn.__closure__ or ()
    values = tuple(_cell_value(c) for c in cells)
    if _holds_no_cycle(fn, acyclic):
        if not fn.__kwdefaults__:
            # (Its defaults and cells hold values: written once over all, _Values.)
            # The function type called on its code (a reference, written once), its
            # module's globals (likewise) and new cells: read back without a call
            # into Python, which for the 600,000 closures of 100,000 demo queries was
            # a seventh of reading the snapshot.
            return (
                types.FunctionType,
                (
                    refs.code(fn.__code__, place),
                    refs.globals_of(fn),
                    fn.__name__,
                    shared.first(fn.__defaults__),
                    tuple([_CellOf(shared.first(v)) for v in values]),
                ),
            )
        return (_closure, (*place, fn.__defaults__, values, fn.__kwdefaults__))
    return (
        _make_closure,
        (*place, len(cells), fn.__defaults__),
        (values, fn.__kwdefaults__),
        None,
        None,
        _fill_closure,
    )


# The types of values that hold no other object (exactly these: a subclass may hold
# anything), classes and builtin functions being written by name.
_LEAVES = frozenset({str, int, float, bool, bytes, complex, type(None), types.BuiltinFunctionType})


def _holds_no_cycle(fn: types.FunctionType, acyclic: dict[int, bool]) -> bool:
    """Whether everything ``fn``'s cells and defaults hold is a leaf, a tuple of them,
    or a closure of which the same holds: then nothing it holds leads back to it. Any
    other value (a list, an object), an empty cell or a closure met again on the way
    says no. O(closures reached once each)."""
    known = acyclic.get(id(fn))
    if known is not None:
        return known
    acyclic[id(fn)] = False  # met again while deciding: a cycle
    verdict = True
    for value in (*(_cell_value(c) for c in fn.__closure__ or ()), *(fn.__defaults__ or ())):
        if not _plain(value, acyclic):
            verdict = False
            break
    if verdict and fn.__kwdefaults__:
        verdict = all(_plain(v, acyclic) for v in fn.__kwdefaults__.values())
    acyclic[id(fn)] = verdict
    return verdict


def _plain(value: Any, acyclic: dict[int, bool]) -> bool:
    kind = type(value)
    if kind in _LEAVES or isinstance(value, type):
        return True
    if kind is tuple:
        return all(_plain(v, acyclic) for v in value)
    if kind is types.FunctionType:
        if value.__closure__ is None and "<" not in value.__qualname__:
            return True  # written by name
        return _holds_no_cycle(value, acyclic)
    return False


def _closure(
    module: str,
    qualname: str,
    line: int,
    index: int,
    defaults: tuple[Any, ...] | None,
    values: tuple[Any, ...],
    kwdefaults: dict[str, Any] | None,
) -> types.FunctionType:
    """A closure of the code found at its place, its cells holding ``values``."""
    code, globals_ = _code_at(module, qualname, line, index)
    fn = types.FunctionType(code, globals_, code.co_name, defaults, tuple(map(types.CellType, values)))
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    return fn


# The builtin types a closure is read back with, which pickle cannot name (their
# ``__module__`` is ``builtins``, where they are not found): written as their place in
# ``types``.
_BY_NAME: dict[Any, tuple[str, str]] = {
    types.FunctionType: ("types", "FunctionType"),
    types.CellType: ("types", "CellType"),
}


class _CellOf:
    """A new cell holding ``value``, as written: read back by the cell type itself."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (types.CellType, (self.value,))


class _Ref:
    """A reference to a module's code object or globals, written once (the pickler's
    memo keeps each of these by identity, and the same one is handed out each time)."""

    __slots__ = ("how", "args")

    def __init__(self, how: Any, args: tuple[Any, ...]) -> None:
        self.how = how
        self.args = args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.how, self.args)


class _Refs:
    """The :class:`_Ref` of each code object and module met while pickling."""

    def __init__(self) -> None:
        self._codes: dict[int, _Ref] = {}
        self._globals: dict[str, _Ref] = {}
        self._keep: list[Any] = []  # the code objects referenced: their ids stay theirs

    def code(self, code: types.CodeType, place: tuple[str, str, int, int]) -> _Ref:
        ref = self._codes.get(id(code))
        if ref is None:
            ref = self._codes[id(code)] = _Ref(_code_object, place)
            self._keep.append(code)
        return ref

    def globals_of(self, fn: types.FunctionType) -> _Ref:
        module = fn.__module__
        ref = self._globals.get(module)
        if ref is None:
            ref = self._globals[module] = _Ref(_module_globals, (module,))
        return ref


def _code_object(module: str, qualname: str, line: int, index: int) -> types.CodeType:
    """The code found at a place (see :func:`_code_place`)."""
    return _code_at(module, qualname, line, index)[0]


def _module_globals(module: str) -> dict[str, Any]:
    """The globals of one of the engine's modules, for a closure read back."""
    if not (module == "ecq" or module.startswith("ecq.")):
        raise pickle.UnpicklingError(f"{module} is not one of the engine's modules")
    return vars(importlib.import_module(module))


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_MARK


def ops_head(ops: Iterator[Any], kinds: frozenset[str]) -> tuple[list[Any], Any | None]:
    """The ops of the log's head (of ``kinds``) and the first op after it (None: none)."""
    head: list[Any] = []
    for op in ops:
        if op.kind not in kinds:
            return head, op
        head.append(op)
    return head, None
