"""``/v1/cluster``: the shards of the cluster this shard belongs to, so that a client
given any one shard (a seed) finds the others (docs/architecture.md, "A cluster")."""

from __future__ import annotations

from fastapi import APIRouter

from api.models import ClusterShards
from service.server.deps import AnyRole, RuntimeDep
from service.server.routes import errors

__all__ = ["router"]

router = APIRouter(prefix="/v1/cluster", tags=["cluster"])


@router.get(
    "",
    response_model=ClusterShards,
    dependencies=[AnyRole],
    responses=errors(401, 403),
    summary="The cluster's shards",
)
async def cluster_shards(runtime: RuntimeDep) -> ClusterShards:
    """Every shard's base URL in routing order, as ``SCEMON_CLUSTER`` gives them; empty
    when the shard was told of no cluster."""
    spec = runtime.settings.cluster
    return ClusterShards(shards=[url.strip().rstrip("/") for url in spec.split(",") if url.strip()])
