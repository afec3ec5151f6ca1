"""``POST /v1/events`` (JSON or Arrow IPC), producer role, and ``POST /v1/time``, admin
role (moving the one clock is everyone's business).

The body is read and parsed here rather than by FastAPI because one route takes two
media types; the JSON form's schema is still ``api.models.EventBatch`` in openapi.yaml.
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request

from api.models import (
    ARROW_MEDIA_TYPE,
    BATCH_EXAMPLE,
    BATCH_HEADER,
    LATE_EVENTS_SHOWN,
    PRODUCER_HEADER,
    TIME_MAX,
    BatchResult,
    ErrorBody,
    LateEvent,
    TimeAdvance,
    TimeResult,
)
from api.routing import EPOCH_HEADER
from service.server import ingest
from service.server.deps import Admin, HostDep, MetricsDep, Producer, RuntimeDep, SettingsDep
from service.server.errors import InvalidInputError, UnsupportedMediaError
from service.server.guard import is_json, media_type
from service.server.limits import JSONDepthRoute
from service.server.routes import errors, finite

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["events"], route_class=JSONDepthRoute)

_BATCH_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A micro-batch as JSON, or as an Arrow IPC stream with the key in headers.",
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/EventBatch"},
                "examples": {
                    "batch": {
                        "summary": "Two events",
                        "value": BATCH_EXAMPLE,
                    }
                },  # type: ignore[index]
            },
            ARROW_MEDIA_TYPE: {
                "schema": {"type": "string", "format": "binary"},
                "examples": {
                    "arrow": {
                        "summary": "Columns src, type, start, end, prob, id, attrs",
                        "description": "An Arrow IPC stream; producer and batch id in the X-Scemon-* headers.",
                        "value": "<Arrow IPC stream bytes>",
                    }
                },
            },
        },
    }
}


_FULL: dict[str, Any] = {
    "model": ErrorBody,
    "description": "The engine is rebuilding or failed, or the reorder buffer is at its cap "
    "(with Retry-After: send the batch again).",
    "headers": {
        "Retry-After": {"description": "Seconds to wait (a full buffer).", "schema": {"type": "integer"}}
    },
}


@router.post(
    "/events",
    response_model=BatchResult,
    dependencies=[Producer],
    responses={
        **errors(400, 401, 403, 413, 415, 422),
        409: {"model": ErrorBody, "description": "Routed by another slot map than this shard's (a move)."},
        503: _FULL,
    },
    openapi_extra=_BATCH_BODY,
    summary="Post a micro-batch of events",
)
async def post_events(
    request: Request,
    runtime: RuntimeDep,
    host: HostDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    producer: Annotated[
        str | None, Header(alias=PRODUCER_HEADER, description="Arrow bodies only: the producer.")
    ] = None,
    batch_id: Annotated[
        str | None, Header(alias=BATCH_HEADER, description="Arrow bodies only: the batch id.")
    ] = None,
    late_events: Annotated[
        int, Query(ge=0, description="How many late events to list (the count is always there).")
    ] = LATE_EVENTS_SHOWN,
    epoch: Annotated[
        int | None,
        Header(
            alias=EPOCH_HEADER,
            description="The slot map's epoch the batch was routed by: 409 if this shard has another.",
        ),
    ] = None,
) -> BatchResult:
    """Apply a batch once: a ``(producer, batch_id)`` applied before answers
    ``duplicate: true`` and changes nothing. The batch is sorted stably by ``(end,
    start)`` and goes through the reorder buffer (``--lateness``); applying it, logging
    its events and recording its id commit together. An event without an id is named
    ``"<batch_id>:<index>"`` in matches. Events that reach the engine with ``end`` below
    the released clock are applied and reported: ``late`` counts them, ``late_events``
    lists the first ones with how late each was. 422 names the event's index and field
    (an event too far ahead of the clock, ``--max-ahead``: every such index in
    ``indexes``); 413 over the size limit; 503 with ``Retry-After`` when the buffer is
    at its cap."""
    started = time.perf_counter()
    media = media_type(request.headers.get("content-type"))
    body = await request.body()
    # Parsed in a worker thread (runtime.parse): the event loop keeps answering others.
    if media == ARROW_MEDIA_TYPE:
        batch = await runtime.parse(ingest.from_arrow, body, producer, batch_id, settings.max_batch_events)
    elif is_json(media):
        batch = await runtime.parse(
            ingest.from_json, body, settings.max_batch_events, settings.max_json_values
        )
    else:
        raise UnsupportedMediaError(
            f"cannot read a body of type {media!r}: send application/json or {ARROW_MEDIA_TYPE}"
        )
    del body  # an Arrow body lives on in batch.arrow, until it is logged
    outcome = await host.ingest(
        batch.producer, batch.batch_id, batch.events, batch.arrow, batch.ordered, epoch
    )
    metrics.ingest_seconds.observe(time.perf_counter() - started)
    return BatchResult(
        accepted=outcome.accepted,
        duplicate=outcome.duplicate,
        matches=outcome.matches,
        late=len(outcome.late),
        late_events=[LateEvent(index=i, id=eid, by=by) for i, eid, by in outcome.late[:late_events]],
        matches_capped=outcome.capped,
    )


@router.post(
    "/time",
    response_model=TimeResult,
    dependencies=[Admin],
    responses=errors(400, 401, 403, 413, 415, 422, 503),
    summary="Advance the clock",
)
async def post_time(advance: TimeAdvance, host: HostDep) -> TimeResult:
    """Move the clock to ``time`` if that is later: matches waiting for their window to
    close (trailing negation) are released. For idle streams. With an allowed lateness
    ``L`` the buffer releases what ``time`` passes and the released clock moves to
    ``time - L``. Refused (422) beyond ``--max-ahead`` of the clock (or the wall clock)."""
    if not math.isfinite(advance.time):
        raise InvalidInputError("'time' must be a finite number of seconds", field="time")
    if not -TIME_MAX <= advance.time <= TIME_MAX:
        raise InvalidInputError(
            f"'time' {advance.time:g} is outside the accepted times, -{TIME_MAX:g} to {TIME_MAX:g} seconds",
            field="time",
        )
    clocks, released = await host.advance(advance.time)
    return TimeResult(clock=finite(clocks.observed), released_clock=finite(clocks.released), matches=released)
