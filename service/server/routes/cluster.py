"""``/v1/cluster``: the shards of the cluster this shard belongs to, so that a client
given any one shard (a seed) finds the others; what the job routes by; and the slot map,
with what a move of slots needs (docs/architecture.md, "A cluster")."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.models import (
    ClusterRouting,
    ClusterShards,
    ClusterSlots,
    ErrorBody,
    RoutingKey,
    SlotExport,
    SlotFence,
    SlotMapBody,
    SlotMapPut,
)
from api.routing import SLOTS, SlotMap
from ecq.errors import EventError
from ecq.event import Event
from ecq.language.partition import DEFAULT_KEY
from service.server.deps import Admin, AnyRole, HostDep, RuntimeDep
from service.server.errors import ConflictError, InvalidInputError
from service.server.routes import errors

__all__ = ["router"]

router = APIRouter(prefix="/v1/cluster", tags=["cluster"])


def _moves(conflict: str) -> dict[int | str, dict[str, Any]]:
    """The answers of a route of a move: a 409 of its own."""
    return {**errors(400, 401, 403, 413, 415, 422, 503), 409: {"model": ErrorBody, "description": conflict}}


@router.get(
    "",
    response_model=ClusterShards,
    dependencies=[AnyRole],
    responses=errors(401, 403),
    summary="The cluster's shards",
)
async def cluster_shards(runtime: RuntimeDep) -> ClusterShards:
    """Every shard's base URL in routing order: the slot map's, once a move named them,
    else as ``SCEMON_CLUSTER`` gives them; empty when the shard was told of no cluster."""
    slots = runtime.host.slots.map
    if slots is not None and slots.shards:
        return ClusterShards(shards=list(slots.shards))
    spec = runtime.settings.cluster
    return ClusterShards(shards=[url.strip().rstrip("/") for url in spec.split(",") if url.strip()])


def _body(slots: SlotMap) -> SlotMapBody:
    return SlotMapBody.model_validate(slots.to_json())


@router.get(
    "/routing",
    response_model=ClusterRouting,
    dependencies=[AnyRole],
    responses=errors(401, 403),
    summary="What the job routes by",
)
async def cluster_routing(runtime: RuntimeDep) -> ClusterRouting:
    """This shard's place (``SCEMON_SHARD``, or its place in the slot map), the
    partition keys other than ``src`` its registered queries use, each with the event
    classes they read (the Spark job sends an event of those classes also to the shard
    that owns its value of the key), and the slot map the job routes by."""
    classes: dict[tuple[str, ...], set[str]] = {}
    for info in runtime.host.queries():
        if info.partition != DEFAULT_KEY:
            classes.setdefault(info.partition, set()).update(info.classes)
    keys = [RoutingKey(key=list(key), classes=sorted(names)) for key, names in sorted(classes.items())]
    slots = runtime.host.slots
    return ClusterRouting(
        shard=slots.place,
        keys=keys,
        epoch=slots.epoch,
        slots=_body(slots.map) if slots.map is not None else None,
    )


@router.get(
    "/slots",
    response_model=ClusterSlots,
    dependencies=[AnyRole],
    responses=errors(401, 403),
    summary="The slot map",
)
async def cluster_slots(host: HostDep) -> ClusterSlots:
    """The slot map this shard holds (a shard told of no cluster: one shard owning every
    slot, epoch 0), its place in it, and whether a move has fenced it."""
    slots = host.slots
    return ClusterSlots(map=_body(slots.current()), me=slots.me, fenced=slots.fenced)


@router.post(
    "/slots/fence",
    response_model=ClusterSlots,
    dependencies=[Admin],
    responses=errors(400, 401, 403, 413, 415, 422, 503),
    summary="Fence the shard for a move",
)
async def cluster_fence(fence: SlotFence, host: HostDep) -> ClusterSlots:
    """While fenced the shard refuses event batches (503 with Retry-After: the job's
    sink retries them) after applying every batch queued before the fence. Setting the
    state it is in already changes nothing. The answer's ``batches``: per producer, the
    highest batch number taken, read after the fence (a move compares the shards')."""
    await host.slot_fence(fence.on)
    answer = await cluster_slots(host)
    answer.batches = await host.slot_batches()
    return answer


@router.post(
    "/slots/export",
    response_model=SlotExport,
    dependencies=[Admin],
    responses=_moves("The shard is not fenced."),
    summary="The retained events of some slots",
)
async def cluster_export(ask: SlotExport, host: HostDep) -> SlotExport:
    """The events of the given slots' values that this shard's op log retains, in the
    order it applied them: what their new owner replays to rebuild their partial
    matches. Only while fenced (409 otherwise), so that nothing is applied meanwhile."""
    bad = [s for s in ask.slots if not 0 <= s < SLOTS]
    if bad:
        raise InvalidInputError(f"slot {bad[0]} is not within 0-{SLOTS - 1}", field="slots")
    if not host.slots.fenced:
        raise ConflictError("fence the shard first (POST /v1/cluster/slots/fence): a move reads a still log")
    events = await host.slot_export(set(ask.slots))
    return SlotExport(slots=sorted(set(ask.slots)), events=[e.to_dict() for e in events])


@router.put(
    "/slots",
    response_model=ClusterSlots,
    dependencies=[Admin],
    responses=_moves("The map is older than the shard's, or another map of the same epoch."),
    summary="Take a new slot map",
)
async def cluster_put_slots(put: SlotMapPut, host: HostDep) -> ClusterSlots:
    """Take the cluster's new slot map, this shard being ``me`` in it, with the
    retained events of the slots it gains (read from their owners by
    ``POST /v1/cluster/slots/export``). The shard splices those events into its op log in
    time order and rebuilds its engine under the new map (as a restart would), so the
    gained values' partial matches are rebuilt here and the given-up values' are
    dropped. 422 for a map that does not assign every slot once or a place outside it;
    409 for a map older than the one held, or another map of the same epoch; the same
    map again changes nothing. ``me`` null: the map leaves this shard out; it takes the
    map, owns no slot from then on (its engine rebuilt with none of their state) and
    refuses event batches (409) naming the map, while its matches stay readable."""
    try:
        new = SlotMap.from_json(put.map.model_dump(exclude_none=True))
    except ValueError as err:
        raise InvalidInputError(f"not a slot map: {err}", field="map") from None
    if put.me is not None and put.me >= new.count:
        raise InvalidInputError(f"place {put.me} is not a shard of the map's {new.count}", field="me")
    slots = host.slots
    held = slots.current()
    if slots.map is not None and new.epoch < held.epoch:
        raise ConflictError(
            f"the map's epoch {new.epoch} is older than this shard's, {held.epoch}", field="map"
        )
    if slots.map is not None and new.epoch == held.epoch:
        if new != held or put.me != slots.me:
            raise ConflictError(f"this shard holds another map of epoch {new.epoch}", field="map")
        if not put.events:
            return await cluster_slots(host)
    try:
        imported = [Event.from_dict(d, f"event {i}") for i, d in enumerate(put.events)]
    except EventError as err:
        raise InvalidInputError(str(err), field="events") from None
    await host.slot_apply(new, put.me, imported, put.batches)
    return await cluster_slots(host)
