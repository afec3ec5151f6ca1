"""Reserved words of the query language, shared by the parser and the printer.

Kept in one place so that the printer refuses exactly the names the parser would not
read back as names (a class called ``WHERE`` cannot be written as query text).
"""

from __future__ import annotations

__all__ = [
    "CLAUSE_KEYWORDS",
    "RESERVED",
    "AGGREGATES",
    "FUNCTIONS",
    "PREVIOUS",
    "DURATION_UNITS",
    "NO_OP_EQUIVS",
    "duration_seconds",
]

# Words that start a clause: they end a pattern, a condition or a RETURN list.
CLAUSE_KEYWORDS = frozenset(
    {"QUERY", "PATTERN", "EVENT", "WHERE", "WITHIN", "MODE", "RETURN", "PROBABILITY"}
) | frozenset(
    {"STRATEGY", "CONSUME", "AFTER"}  # selection and consumption policies
)
# PARTITION BY <attr>[, <attr>...] | PARTITION BY NONE (ecq.language.partition).
CLAUSE_KEYWORDS = CLAUSE_KEYWORDS | frozenset({"PARTITION"})

# Words that can never be a class name, an alias or a component reference
# (compared upper-cased: keywords are case-insensitive).
RESERVED = CLAUSE_KEYWORDS | frozenset(
    {"AND", "OR", "NOT", "IN", "BETWEEN", "AS", "TRUE", "FALSE", "SEQ", "ANY", "WITH"}
)

# Aggregates over a Kleene component; ``count`` is the only one without an attribute.
# ``first`` / ``last`` read the group's first / last element (``b[1].x``, ``b[last].x``).
AGGREGATES = frozenset({"count", "sum", "avg", "min", "max", "first", "last"})

# Scalar functions (one number in; ``floor``, ``ceil``, ``round`` and ``int`` give an integer).
FUNCTIONS = frozenset({"abs", "floor", "ceil", "round", "int"})

# MATCH_RECOGNIZE's ``PREV(b.x)``: ``b[i-1].x``, the previous element of a Kleene run.
PREVIOUS = "prev"

# Duration units: name -> (multiplier, divisor) to seconds; division keeps ``ms`` exact.
DURATION_UNITS: dict[str, tuple[int, int]] = {
    "ms": (1, 1000),
    "msec": (1, 1000),
    "msecs": (1, 1000),
    "millisecond": (1, 1000),
    "milliseconds": (1, 1000),
    "s": (1, 1),
    "sec": (1, 1),
    "secs": (1, 1),
    "second": (1, 1),
    "seconds": (1, 1),
    "unit": (1, 1),
    "units": (1, 1),
    "min": (60, 1),
    "mins": (60, 1),
    "minute": (60, 1),
    "minutes": (60, 1),
    "h": (3600, 1),
    "hr": (3600, 1),
    "hrs": (3600, 1),
    "hour": (3600, 1),
    "hours": (3600, 1),
    "day": (86400, 1),
    "days": (86400, 1),
}

# Equivalence tests that name the always-on same-source condition: parsed and dropped.
NO_OP_EQUIVS = frozenset({"symbol", "src"})


def duration_seconds(value: int | float, unit: str | None) -> float:
    """``WITHIN value unit`` in seconds (``unit`` as written, None for a bare number);
    raises KeyError for an unknown unit."""
    if unit is None:
        return float(value)
    multiplier, divisor = DURATION_UNITS[unit.lower()]
    return float(value * multiplier / divisor)
