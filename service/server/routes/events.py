"""``POST /v1/events`` (JSON or Arrow IPC) and ``POST /v1/time``. Producer role.

The body is read and parsed here rather than by FastAPI because one route takes two
media types; the JSON form's schema is still ``api.models.EventBatch`` in openapi.yaml.
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request

from api.models import (
    ARROW_MEDIA_TYPE,
    BATCH_EXAMPLE,
    BATCH_HEADER,
    PRODUCER_HEADER,
    BatchResult,
    TimeAdvance,
    TimeResult,
)
from service.server import ingest
from service.server.deps import HostDep, MetricsDep, Producer, RuntimeDep, SettingsDep
from service.server.errors import InvalidInputError, UnsupportedMediaError
from service.server.guard import is_json, media_type
from service.server.routes import errors

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["events"])

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


@router.post(
    "/events",
    response_model=BatchResult,
    dependencies=[Producer],
    responses=errors(400, 401, 403, 413, 415, 422, 503),
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
) -> BatchResult:
    """Apply a batch once: a ``(producer, batch_id)`` applied before answers
    ``duplicate: true`` and changes nothing. The batch is sorted stably by ``(end,
    start)``; applying it, logging its events and recording its id commit together.
    An event without an id is named ``"<batch_id>:<index>"`` in matches. 422 names the
    event's index and field; 413 over the size limit."""
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
    del body
    outcome = await host.ingest(batch.producer, batch.batch_id, batch.events)
    metrics.ingest_seconds.observe(time.perf_counter() - started)
    return BatchResult(accepted=outcome.accepted, duplicate=outcome.duplicate, matches=outcome.matches)


@router.post(
    "/time",
    response_model=TimeResult,
    dependencies=[Producer],
    responses=errors(400, 401, 403, 413, 415, 422, 503),
    summary="Advance the clock",
)
async def post_time(advance: TimeAdvance, host: HostDep) -> TimeResult:
    """Move the engine's clock to ``time`` if that is later: matches waiting for their
    window to close (trailing negation) are released. For idle streams."""
    if not math.isfinite(advance.time):
        raise InvalidInputError("'time' must be a finite number of seconds", field="time")
    clock, released = await host.advance(advance.time)
    return TimeResult(clock=clock if math.isfinite(clock) else None, matches=released)
