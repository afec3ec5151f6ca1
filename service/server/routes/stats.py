"""``/v1/stats``: what the engine holds and has done, and which kernel it runs. Any role."""

from __future__ import annotations

import math

from fastapi import APIRouter

from api.models import EngineStats
from service.server.deps import HostDep, StatsReader
from service.server.routes import errors

__all__ = ["router"]

router = APIRouter(prefix="/v1/stats", tags=["stats"])


@router.get(
    "",
    response_model=EngineStats,
    dependencies=[StatsReader],
    responses=errors(401, 403, 503),
    summary="Engine statistics",
)
async def engine_stats(host: HostDep) -> EngineStats:
    """Registered queries, ECQs, stored instances, PMB entries, pending matches, events,
    the clock and the next ``seq``; ``kernel`` says whether the engine runs its compiled
    kernel or the pure-Python one. 503 while the engine is rebuilt."""
    stats = await host.engine_stats()
    clock = stats["clock"]
    return EngineStats(
        kernel=stats["kernel"],
        queries=stats["queries"],
        derived_classes=stats["derived_classes"],
        ecqs=stats["ecqs"],
        stored_instances=stats["stored_instances"],
        pmb_entries=stats["pmb_entries"],
        pending_matches=stats["pending_matches"],
        events=stats["events"],
        clock=clock if math.isfinite(clock) else None,
        next_seq=stats["next_seq"],
    )
