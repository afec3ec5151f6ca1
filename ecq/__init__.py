"""scemon's engine: many pattern queries evaluated at once in one shared network of
event-centric composable queues (SCEMon, DEBS'11). Pure, synchronous, deterministic; it
imports only the standard library and sortedcontainers, and nothing imports back up.

The public API is what this package exports: :class:`Engine`, :class:`Event`,
:class:`Match`, the errors and ``__version__``. Inside, the modules are grouped by the
paper's concepts (docs/architecture.md, "The engine's modules"):

- ``language/`` — the query language: text ↔ AST;
- ``compiler/`` — an AST compiled into a :class:`~ecq.compiler.query.CompiledQuery`,
  its conditions into closures, many queries' one-event filters into one index;
- ``time/`` — the time keeper (lateness, late and far-ahead events), the reorder
  buffer, a class's drop horizon, window masks;
- ``structures/`` — the paper's structures: the ECQ with its CLT and R-CLT, the SIQ,
  the PMB, a registered node's state;
- ``matching/`` — building the matches an instance completes: plain sequences
  (``assembly``), negation, Kleene closure and sub-patterns (``skeleton``,
  ``composite``), conjunctions by presence, trailing negation's deadlines, and the
  matches leaving the network in order (``emission``);
- ``kernel/`` — the hot path behind one interface: the pure kernel and the compiled
  one, chosen once per network;
- ``network`` (registration, the test and insert phases, cleaning), ``ops`` (the op
  loop and its numbering), ``engine`` (:class:`Engine`), ``event``, ``match``,
  ``errors``;
- ``evaluation/`` — the separate-processing baseline (one plan per query) and the
  paper's workload generators, for comparison.
"""

from ecq.engine import Engine
from ecq.errors import (
    DuplicateQueryError,
    EventError,
    ParseError,
    QueryError,
    ScemonError,
    SemanticError,
    UnknownQueryError,
)
from ecq.event import Event
from ecq.match import Match


def _version() -> str:
    """scemon's version, from one place: pyproject.toml's ``version``, as the installed
    package's metadata has it, or read from pyproject.toml itself in a checkout run
    without installing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scemon")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def __getattr__(name: str) -> str:
    # ``__version__`` is looked up on first use: reading the package's metadata
    # (importlib.metadata) costs every importer of the engine ~20 ms it rarely needs.
    if name == "__version__":
        version = _version()
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "__version__",
    "Engine",
    "Event",
    "Match",
    "ScemonError",
    "QueryError",
    "ParseError",
    "SemanticError",
    "DuplicateQueryError",
    "UnknownQueryError",
    "EventError",
]
