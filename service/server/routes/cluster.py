"""``/v1/cluster``: the shards of the cluster this shard belongs to, so that a client
given any one shard (a seed) finds the others (docs/architecture.md, "A cluster")."""

from __future__ import annotations

from fastapi import APIRouter

from api.models import ClusterRouting, ClusterShards, RoutingKey
from ecq.language.partition import DEFAULT_KEY
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


@router.get(
    "/routing",
    response_model=ClusterRouting,
    dependencies=[AnyRole],
    responses=errors(401, 403),
    summary="What the job routes by",
)
async def cluster_routing(runtime: RuntimeDep) -> ClusterRouting:
    """This shard's place (``SCEMON_SHARD``) and the partition keys other than ``src``
    its registered queries use, each with the event classes they read: the Spark job
    sends an event of those classes also to the shard that owns its value of the key."""
    classes: dict[tuple[str, ...], set[str]] = {}
    for info in runtime.host.queries():
        if info.partition != DEFAULT_KEY:
            classes.setdefault(info.partition, set()).update(info.classes)
    keys = [RoutingKey(key=list(key), classes=sorted(names)) for key, names in sorted(classes.items())]
    return ClusterRouting(shard=runtime.settings.shard, keys=keys)
