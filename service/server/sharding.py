"""A shard's part of the values, and moving slots (docs/architecture.md, "A cluster").

A shard holds the cluster's slot map (:class:`api.routing.SlotMap`) and its own place in
it; its engine evaluates each partition key's queries only on the values of the slots
it owns (:meth:`ShardSlots.owns`), by the rule the Spark job routes with, so a value's
matches come from one shard whichever shards its events reach.

The map is kept in ``slots.json`` beside the store (written whole, then renamed). Before
any move it is the default map of ``SCEMON_SHARD=K/N``; with neither, the shard owns
every value (a service on its own).

Moving slots (the protocol is in docs/architecture.md, "Moving slots"): the shard
losing them exports the events of their values its op log retains
(:func:`export_events`); the shard gaining them splices those events into its own op
log in time order (:func:`splice`) and rebuilds its engine from it under the new map, as
a restart would, so the moved values' partial matches are rebuilt there; the shard that
lost them rebuilds too, and from then on holds none of their state.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from api.routing import SLOTS, SlotMap, slot_of
from ecq.engine import Engine
from ecq.event import Event
from ecq.language.partition import DEFAULT_KEY
from ecq.partitions import key_value, output_src
from service.server.store import BATCH, TIME, Op, arrival_key, events_body, events_of

if TYPE_CHECKING:
    from service.server.host import EngineHost

__all__ = [
    "MAP_FILE",
    "ShardSlots",
    "event_slots",
    "export_events",
    "ownership",
    "splice",
]

log = logging.getLogger("scemon.sharding")

MAP_FILE = "slots.json"

Owns = Callable[[tuple[str, ...], Any], bool]


def ownership(place: str) -> Owns | None:
    """The engine's ``owns`` for ``place`` (``"K/N"``, checked by the settings) under
    the default map of ``N`` shards; None when this shard owns every value (no place,
    or one shard)."""
    if not place:
        return None
    k, n = (int(part) for part in place.split("/"))
    return _owns(SlotMap.default(n), k)


def _owns_nothing(key: tuple[str, ...], value: Any) -> bool:
    return False


def _owns(slots: SlotMap, me: int | None) -> Owns | None:
    if me is None:  # left out of the map
        return _owns_nothing
    owners = slots.owners
    if all(o == me for o in owners):
        return None

    def owns(key: tuple[str, ...], value: Any) -> bool:
        return owners[slot_of(key, output_src(value))] == me

    return owns


@dataclass
class ShardSlots:
    """This shard's slot map and place (``me``: its position in the map), both None for
    a shard told nothing; ``fenced``: a move is under way and event batches are refused."""

    path: Path | None
    map: SlotMap | None = None
    me: int | None = None
    fenced: bool = False
    # Per producer, the batch number the cluster was at when this shard took its map.
    baseline: dict[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, directory: Path | None, place: str, cluster: str = "") -> ShardSlots:
        """The map kept in ``directory`` (a move wrote it), else the default map of
        ``place`` (``"K/N"``; the shard URLs from ``cluster`` when it names N), else none."""
        path = directory / MAP_FILE if directory is not None else None
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            kept = SlotMap.from_json(data["map"])
            me = None if data["me"] is None else int(data["me"])
            baseline = {str(k): int(v) for k, v in (data.get("batches") or {}).items()}
            if place and me is not None and place != f"{me}/{kept.count}":
                log.warning(
                    "SCEMON_SHARD=%s is not this shard's place since slots moved: it is %d of %d (%s)",
                    place,
                    me,
                    kept.count,
                    path,
                )
            return cls(path, kept, me, baseline=baseline)
        if not place:
            return cls(path)
        k, n = (int(part) for part in place.split("/"))
        urls = [u.strip().rstrip("/") for u in cluster.split(",") if u.strip()]
        return cls(path, SlotMap.default(urls if len(urls) == n else n), k)

    @property
    def epoch(self) -> int:
        return self.map.epoch if self.map is not None else 0

    @property
    def place(self) -> str:
        """``"K/N"``, or empty when told none."""
        if self.map is None or self.me is None:
            return ""
        return f"{self.me}/{self.map.count}"

    @property
    def retired(self) -> bool:
        """The cluster's map leaves this shard out: it owns no slot."""
        return self.map is not None and self.me is None

    def owns(self) -> Owns | None:
        if self.map is None:
            return None
        return _owns(self.map, self.me)

    def current(self) -> SlotMap:
        """The map as this shard sees it: a shard told nothing is a cluster of one."""
        return self.map if self.map is not None else SlotMap.default(1)

    def save(self, slots: SlotMap, me: int | None, batches: dict[str, int] | None = None) -> None:
        """Keep the map (whole, then renamed: a crash leaves the old one or the new)."""
        baseline = {**self.baseline, **(batches or {})}
        if self.path is not None:
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps({"map": slots.to_json(), "me": me, "batches": baseline}))
            os.replace(tmp, self.path)
        self.map, self.me, self.baseline = slots, me, baseline

    def batches(self, applied: dict[str, int]) -> dict[str, int]:
        """Per producer, the highest batch number taken here or known at joining."""
        out = dict(self.baseline)
        for producer, n in applied.items():
            out[producer] = max(n, out.get(producer, n))
        return out


# --------------------------------------------------------------------- slots of events


def keys_in_use(engine: Engine) -> list[tuple[tuple[str, ...], frozenset[str] | None]]:
    """Every partition key the engine's queries use, each with the classes read under
    it (None for the source: the job sends every event to its source's shard)."""
    out: list[tuple[tuple[str, ...], frozenset[str] | None]] = [(DEFAULT_KEY, None)]
    for key, net in engine.keyed.items():
        out.append((key, frozenset(net.ecqs)))
    return out


def event_slots(e: Event, keys: Sequence[tuple[tuple[str, ...], frozenset[str] | None]]) -> set[int]:
    """The slots an event belongs to: its source's, and its value's of each other key in
    use whose classes hold its type (as the job routes it)."""
    out = {slot_of(DEFAULT_KEY, output_src(e.src))}
    for key, classes in keys:
        if classes is None or e.type not in classes:
            continue
        value = key_value(e, key)
        if value is not None:
            out.add(slot_of(key, output_src(value[0])))
    return out


def export_events(ops: Iterable[Op], engine: Engine, slots: set[int]) -> list[Event]:
    """The events of the op log's batches that belong to ``slots``, in the order they
    were applied: what the slots' new owner replays to rebuild their partial matches."""
    keys = keys_in_use(engine)
    out: list[Event] = []
    for op in ops:
        if op.kind != BATCH or op.body is None:
            continue
        out += [e for e in events_of(op.body) if not slots.isdisjoint(event_slots(e, keys))]
    return out


def _identity(e: Event) -> tuple[Any, ...]:
    """What tells an event apart from a copy of it another shard holds (an event routed
    to two shards under two keys is logged by both)."""
    return (e.id, repr(e.src), e.type, e.start, e.end)


# One op of a spliced log: (its position before, or None for a new one), kind, name,
# body, time, clock. An op that was there keeps its other columns (a batch's late events).
SplicedOp = tuple[int | None, str, str | None, bytes | None, float | None, float | None]


def splice(ops: Sequence[Op], imported: Sequence[Event]) -> list[SplicedOp]:
    """This shard's op log with ``imported`` events (another shard's, in the order they
    were applied there) put in where they belong in time: each into the first batch
    whose last event comes at or after it (``(end, start)``, as batches are applied), or,
    when a time advance comes first, into a batch of their own just before it; what is
    left after every op, into a batch at the end. An imported event the log holds
    already (the same id, source, class and times), or imported twice (from its source's
    owner and a key's), is put in once, so splicing twice changes nothing.
    Registrations keep their places."""
    have = {
        _identity(e) for op in ops if op.kind == BATCH and op.body is not None for e in events_of(op.body)
    }
    rest = []
    for e in imported:  # one event may come from two shards (its source's and a key's)
        ident = _identity(e)
        if ident not in have:
            have.add(ident)
            rest.append(e)
    rest.sort(key=arrival_key)
    at = 0
    out: list[SplicedOp] = []

    def take(upto: tuple[float, float], by_end: bool = False) -> list[Event]:
        """The events left up to ``upto`` (``(end, start)``; by ``end`` alone if ``by_end``)."""
        nonlocal at
        start = at
        while at < len(rest) and (rest[at].end <= upto[0] if by_end else arrival_key(rest[at]) <= upto):
            at += 1
        return rest[start:at]

    for op in ops:
        if op.kind == BATCH and op.body is not None and at < len(rest):
            own = events_of(op.body)
            if own:
                extra = take(arrival_key(own[-1]))
                if extra:
                    merged = list(heapq.merge(own, extra, key=arrival_key))  # its own first on ties
                    clock = op.clock if op.clock is None else max(op.clock, merged[-1].end)
                    out.append((op.pos, BATCH, None, events_body(merged), merged[-1].end, clock))
                    continue
        elif op.kind == TIME and op.time is not None and at < len(rest):
            before = take((op.time, op.time), by_end=True)
            if before:
                out.append((None, BATCH, None, events_body(before), before[-1].end, before[-1].end))
        out.append((op.pos, op.kind, op.name, op.body, op.time, op.clock))
    tail = rest[at:]
    if tail:
        out.append((None, BATCH, None, events_body(tail), tail[-1].end, tail[-1].end))
    return out


# --------------------------------------------------------------------- on the writer


def fence(host: EngineHost, on: bool) -> None:
    """Refuse (or take again) event batches: on the writer thread, so every batch
    queued before the fence is applied first."""
    host.slots.fenced = on


def export(host: EngineHost, slots: set[int]) -> list[Event]:
    return export_events(host.store.ops(), host.engine, slots)


def last_batches(host: EngineHost) -> dict[str, int]:
    return host.slots.batches(host.store.last_batches())


def apply_map(
    host: EngineHost,
    new: SlotMap,
    me: int | None,
    imported: Sequence[Event],
    batches: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Take ``new`` as the cluster's map, this shard being ``me`` in it (None: left out,
    owning no slot): splice the imported events (of the slots it gains) into the op log,
    keep the map, and rebuild the engine under it when the slots this shard owns
    changed. Idempotent: the same map again changes nothing."""
    old = host.slots.map
    old_me = host.slots.me
    if old is None:
        before = set(range(SLOTS))
    else:
        before = set(old.slots_of(old_me)) if old_me is not None else set()
    after = set(new.slots_of(me)) if me is not None else set()
    gained, lost = after - before, before - after
    added = 0
    if imported:
        ops = list(host.store.ops())
        spliced = splice(ops, imported)
        added = sum(1 for op in spliced if op[0] is None) + sum(
            1
            for op, was in zip((o for o in spliced if o[0] is not None), ops, strict=True)
            if op[3] is not was.body
        )
        if added:
            host.store.splice_ops(spliced)
    host.slots.save(new, me, batches)
    host.owns = host.slots.owns()
    if gained or lost or added:
        host.rebuild_for_slots()
    log.info(
        "slot map epoch %d: this shard is %s of %d, %d slots (%d gained, %d given up, %d events imported)",
        new.epoch,
        "none" if me is None else me,
        new.count,
        len(after),
        len(gained),
        len(lost),
        len(imported),
    )
    return {"gained": len(gained), "lost": len(lost), "imported": len(imported), "changed_ops": added}
