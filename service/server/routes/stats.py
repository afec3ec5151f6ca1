"""``GET /v1/stats``: the engine's size and the service's event-time state. Any role."""

from __future__ import annotations

from fastapi import APIRouter

from api.models import Stats
from service.server.deps import AnyRole, HostDep
from service.server.routes import errors, finite

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["stats"])


@router.get(
    "/stats",
    response_model=Stats,
    dependencies=[AnyRole],
    responses=errors(401, 403, 503),
    summary="Engine and event-time statistics",
)
async def get_stats(host: HostDep) -> Stats:
    """Queries, ECQs, stored instances; the clock (the largest event time taken) and the
    released clock (what the reorder buffer has let through to the engine), the allowed
    lateness, the far-future bound, the events held and the buffer's cap; late events,
    refused far-future events and full-buffer refusals since the server started."""
    host.queries()  # 503 while rebuilding
    stats = await host.stats(wait=1.0)
    return Stats(
        queries=stats["queries"],
        ecqs=stats["ecqs"],
        derived_classes=stats["derived_classes"],
        stored_instances=stats["stored_instances"],
        pmb_entries=stats["pmb_entries"],
        pending_matches=stats["pending_matches"],
        events=stats["events"],
        next_seq=stats["next_seq"],
        clock=finite(stats["clock"]),
        released_clock=finite(stats["released_clock"]),
        lateness=stats["lateness"],
        max_ahead=finite(stats["max_ahead"]),
        held=stats["held"],
        held_max=stats["held_max"],
        **host.counts,
    )
