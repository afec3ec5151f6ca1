"""scemon's engine: many pattern queries evaluated at once in one shared network of
event-centric composable queues (SCEMon, DEBS'11). Pure, synchronous, deterministic; it
imports only the standard library and sortedcontainers, and nothing imports back up.

The paper's structures, one module each:

- ``ecq`` — :class:`~ecq.structures.ecq.ECQ` (one per event class), its :class:`~ecq.structures.ecq.CLT`
  (composition links, :class:`~ecq.structures.ecq.CLink`) and its :class:`~ecq.structures.ecq.RCLT` (reverse
  links, :class:`~ecq.structures.ecq.RCLink`); ``siq`` — :class:`~ecq.structures.siq.SIQ`, the shared
  instance queue; ``pmb`` — :class:`~ecq.structures.pmb.PMB`, the partial matching block.
- ``network`` — :class:`~ecq.network.Network`: registration, and per arriving instance
  the test phase, the insert phase and cleaning (their hot part through its kernel); ``assembly`` (plain sequences) and
  ``composite`` (negation, Kleene closure, sub-patterns, conjunctions) build the matches
  of the queries an instance completes; ``skeleton`` (a sequence with negation or
  Kleene closure matched through its positive components), ``conjunction`` (the
  conjunctions an instance may complete, from its source's presence), ``deadlines``
  (trailing negation's waiting matches), ``filters`` (the index of one-event filters);
  ``candidate`` — a match before selection; ``qstate`` — a registered node's state.

Around them: ``engine`` (:class:`Engine`, the public API), ``ops`` (the clock and op
numbering), ``horizon`` (a class's drop horizon), ``event`` and ``match``, ``errors``
(the error tree), ``query`` (an AST compiled into a :class:`~ecq.compiler.query.CompiledQuery`),
``conditions`` (WHERE and RETURN compiled to closures), ``language/`` (text ↔ AST);
``baseline`` and ``plan`` (the separate-processing baseline, one plan per query);
``workload`` (the paper's generators); ``emission`` (a match leaving the network, and
the order of one op's matches), ``windows`` (the window masks); ``kernel/`` (the hot
path behind one interface: the pure kernel and the compiled one, chosen once per
network).
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


__version__ = _version()

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
