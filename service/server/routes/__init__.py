"""One router per resource: queries, events (and time), matches, stats, health."""

from __future__ import annotations

import math
from typing import Any

from api.models import ErrorBody

__all__ = ["errors", "finite"]

_REASONS = {
    400: "Malformed body (JSON or Arrow).",
    401: "No bearer token, or an unknown one.",
    403: "The token's role may not do this.",
    404: "No such query.",
    409: "The query name is taken; or, deleting, other queries read this one (`dependents`).",
    410: "from_seq is older than the match log keeps.",
    413: "The body or the batch is over the size limit.",
    415: "The body is neither JSON nor an Arrow IPC stream.",
    422: "Invalid input; detail says what and where.",
    503: "The engine is rebuilding or failed.",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route can answer."""
    return {code: {"model": ErrorBody, "description": _REASONS[code]} for code in codes}


def finite(value: float) -> float | None:
    """A clock for the wire: null before any event (the clock is -inf then) or for no
    bound (inf)."""
    return value if math.isfinite(value) else None
