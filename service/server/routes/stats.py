"""``GET /v1/stats``: the service's own figures in JSON, and ``GET /v1/whoami``: what
the caller's token may do. Any role: both are what the console reads first and every
second, and neither tells more than the query list does."""

from __future__ import annotations

import math

from fastapi import APIRouter

from api.models import Identity, IngestStats, Stats
from ecq import __version__
from service.server.auth import may
from service.server.deps import AnyRole, CallerRole, RuntimeDep, SettingsDep
from service.server.routes import errors, finite

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["service"])


@router.get(
    "/stats",
    response_model=Stats,
    dependencies=[AnyRole],
    responses=errors(401, 403),
    summary="The service's figures",
)
async def stats(runtime: RuntimeDep) -> Stats:
    """Counters since start (events, batches, matches, ingest answer times as a
    histogram), subscribers and their queued matches, the store's size, uptime, scemon's
    version, the kernel the engine runs and its own figures; event time: the clock and the released
    clock, the allowed lateness, the far-future bound, the events held and the buffer's
    cap, late events, refused far-future events and full-buffer refusals since start. A
    client derives rates from two readings. Answers during the rebuild too (``state``),
    with the engine's figures of the last snapshot."""
    host, hub, metrics = runtime.host, runtime.hub, runtime.metrics
    engine = await host.stats(wait=0.25)
    totals = metrics.totals()
    count, seconds, buckets = metrics.ingest()
    backlog, longest = hub.backlog()
    event_time = engine.get("time") or {}
    return Stats(
        state=host.state,  # type: ignore[arg-type]
        uptime=runtime.uptime,
        started=runtime.started,
        kernel=host.kernel,
        version=__version__,
        events=int(totals.get("events", 0)),
        batches=int(totals.get("batches", 0)),
        duplicates=int(totals.get("duplicate_batches", 0)),
        matches=host.next_seq,
        ingest=IngestStats(count=count, seconds=seconds, buckets=buckets),
        subscribers=len(hub),
        backlog=backlog,
        backlog_max=longest,
        subscriber_queue=hub.limit,
        overflows=int(totals.get("subscriber_overflows", 0)),
        store_bytes=runtime.store.size_bytes(),
        engine={k: v for k, v in engine.items() if v is None or isinstance(v, (int, float, str, bool))},
        clock=finite(event_time.get("clock", -math.inf)),
        released_clock=finite(event_time.get("released_clock", -math.inf)),
        lateness=event_time.get("lateness", host.lateness),
        max_ahead=finite(event_time.get("max_ahead", host.max_ahead)),
        held=event_time.get("held", 0),
        held_max=host.buffer_max,
        producers=event_time.get("producers", {}),
        producer_idle=finite(host.idle),
        **host.counts,
    )


@router.get(
    "/whoami",
    response_model=Identity,
    responses=errors(401),
    summary="What the caller may do",
)
async def whoami(role: CallerRole, settings: SettingsDep) -> Identity:
    """The role of the bearer token sent, and what it may do; with auth off, no role
    and everything. 401 without a known token when the server has tokens."""
    return Identity(
        auth=settings.auth_enabled,
        role=role.value if role is not None else None,  # type: ignore[arg-type]
        may=may(role),  # type: ignore[arg-type]
    )
