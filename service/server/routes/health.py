"""``/healthz`` (the process answers), ``/readyz`` (the engine is rebuilt and serving)
— no token needed: probes have none — and ``/metrics`` (Prometheus text), which names
the queries and so needs a token of any role when the server has tokens (a scraper
sends one: Prometheus's ``authorization`` setting)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.models import Health
from service.server.deps import HostDep, MetricsDep, Operator
from service.server.metrics import CONTENT_TYPE
from service.server.responses import FastJSON
from service.server.routes import errors

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    """200 while the process serves HTTP, even during the rebuild."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses={
        503: {
            "model": Health,
            "description": "Rebuilding from the store, the store cannot write, failed, or is damaged.",
        }
    },
    summary="Readiness",
)
async def readyz(host: HostDep) -> Response:
    """200 once the engine has been rebuilt from the store; 503 before, while the store
    cannot write (``unwritable``: disk full, read-only, I/O error; detail says which and
    what to do), if the engine failed, or once rows of the store are found failing
    their checksum (``damaged``: detail names them; they are not served)."""
    if host.ready and host.store.damage:
        shown = list(host.store.damage)
        more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
        detail = (
            f"the store {host.store.path} is damaged: {'; '.join(shown[:5])}{more} fail their checksum and are "
            "not served (the rest is); restore the store from a backup"
        )
        return FastJSON(Health(status="damaged", detail=detail).model_dump(), status_code=503)
    if host.ready:
        return FastJSON(Health(status="ok").model_dump())
    health = Health(status=host.state, detail=host.status())  # type: ignore[arg-type]
    return FastJSON(health.model_dump(), status_code=503)


# HEAD for the probes that send it (load balancers, uptime checkers): the status alone.
@router.head("/healthz", include_in_schema=False)
async def healthz_head() -> Response:
    return Response(status_code=200)


@router.head("/readyz", include_in_schema=False)
async def readyz_head(host: HostDep) -> Response:
    return Response(status_code=200 if host.ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[Operator],
    responses={200: {"content": {"text/plain": {"example": "scemon_events_total 1200.0\n"}}}, **errors(401)},
    summary="Prometheus metrics",
)
async def metrics(host: HostDep, registry: MetricsDep) -> Response:
    """Events, batches, duplicates, matches per query, ingest latency, subscribers,
    stored instances, ECQs."""
    await host.stats(wait=0.5)
    return Response(registry.exposition(), media_type=CONTENT_TYPE)
