"""Which shard owns a partition key's value: the one rule the Spark job routes by
(:mod:`api.spark_sink`) and each shard evaluates by (docs/architecture.md, "A cluster").

A value belongs to a **slot**, ``crc32(text) mod 4096`` of its text (:func:`value_text`),
and a slot to a shard by the cluster's **slot map** (:class:`SlotMap`). The number of
slots never changes, so adding or removing a shard moves whole slots — with their
partial matches — and never re-hashes a value (Flink's key groups, Redis Cluster's hash
slots). ``crc32`` is stable across processes, restarts and machines (unlike ``hash()``).

The default map of ``N`` shards deals the slots out in turn: shard ``k`` owns the slots
``s`` with ``s mod N == k`` (:meth:`SlotMap.default`); a map given as a shard count
means that default. For ``N`` a power of two that is ``crc32(text) mod N``, the rule
before slots. Why not contiguous ranges: a slot's high bits barely change between
names that differ in their last character (``feed-0`` … ``feed-7`` all fall in the
first half of the slots), its low bits do.
"""

from __future__ import annotations

import base64
import binascii
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "ONLY_SHARD",
    "EPOCH_HEADER",
    "SLOTS",
    "SlotMap",
    "owner_of",
    "parse_slots",
    "shard_of",
    "slot_of",
    "slot_of_text",
    "value_text",
]

# The epoch a batch carries when its job routed everything to its one shard without
# the shard's answer (api.spark_sink): a shard holding a slot map of several refuses it.
ONLY_SHARD = -1

# The fixed number of slots: more than any cluster has shards (so a slot is a fine unit
# to move), few enough that a map is a few kilobytes (4096 small integers).
SLOTS = 4096
# The header of an event post that names the slot map's epoch the batch was routed by.
EPOCH_HEADER = "X-Scemon-Slot-Epoch"


def shard_of(src: str | int, shards: int | SlotMap) -> int:
    """The shard a source belongs to: the owner of its value under the default key (a
    string is its own text, an integer its decimal form). O(len(src))."""
    return owner_of(_SRC, src, shards)


_SRC = ("src",)


def value_text(key: Sequence[str], value: Any) -> str:
    """The text a key's value hashes by: ``""`` for the empty key (NONE); for one
    attribute its value's text; for several, their texts joined by U+001F. A string is
    itself, an integer its decimal form, a float ``repr``, ``true``/``false``/``null``
    as in JSON, anything else its JSON with sorted keys."""
    if not key:
        return ""
    if len(key) == 1:
        return _text(value)
    return "\x1f".join(_text(v) for v in value)


def _text(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is bool or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if kind is int:
        return str(value)
    if kind is float:
        return repr(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def slot_of_text(text: str) -> int:
    """The slot of a value's text: ``crc32`` of its UTF-8 mod :data:`SLOTS`."""
    return zlib.crc32(text.encode()) % SLOTS


def slot_of(key: Sequence[str], value: Any) -> int:
    """The slot of a key's value (NONE's single value, the empty text, is slot 0)."""
    return slot_of_text(value_text(key, value))


def owner_of(key: Sequence[str], value: Any, shards: int | SlotMap) -> int:
    """The shard that owns a key's value: its slot's owner in ``shards`` (a map, or a
    shard count meaning the default map of that many shards)."""
    if isinstance(shards, SlotMap):
        return shards.owners[slot_of(key, value)]
    if shards <= 1:
        return 0
    return slot_of(key, value) % shards


@dataclass(frozen=True)
class SlotMap:
    """Which shard owns each slot: ``owners[slot]`` is a shard's position (from 0) in
    ``shards``, the shards' base URLs in routing order (the Spark job's ``--service``
    order). ``epoch`` grows by one with every change, so a batch routed by an older
    map is told apart (and refused) by a shard that has the newer one."""

    epoch: int
    owners: tuple[int, ...]
    shards: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.owners) != SLOTS:
            raise ValueError(f"a slot map assigns all {SLOTS} slots, not {len(self.owners)}")
        if self.epoch < 0:
            raise ValueError("a slot map's epoch is a non-negative integer")
        count = self.count
        if self.shards and len(self.shards) != count:
            raise ValueError(f"the map names {len(self.shards)} shards but assigns slots to {count}")
        if any(not 0 <= o < count for o in self.owners):
            raise ValueError("a slot's owner must be a shard of the map")

    @property
    def count(self) -> int:
        """The number of shards (every one named, even one that owns no slot)."""
        return len(self.shards) if self.shards else max(self.owners) + 1

    @classmethod
    def default(cls, shards: int | Sequence[str], epoch: int = 0) -> SlotMap:
        """The default map: ``N`` shards, shard ``k`` owning the slots ``s`` with ``s mod
        N == k``. ``shards``: their count, or their URLs."""
        urls = () if isinstance(shards, int) else tuple(shards)
        n = shards if isinstance(shards, int) else len(urls)
        if n < 1:
            raise ValueError("a cluster has at least one shard")
        if n > SLOTS:
            raise ValueError(f"a cluster has at most {SLOTS} shards (one slot each)")
        return cls(epoch, tuple(s % n for s in range(SLOTS)), urls)

    def slots_of(self, shard: int) -> list[int]:
        """The slots a shard owns, ascending."""
        return [s for s, o in enumerate(self.owners) if o == shard]

    def ranges(self) -> list[tuple[int, int, int]]:
        """The map as ``(first slot, last slot, shard)`` runs, ascending."""
        out: list[tuple[int, int, int]] = []
        for slot, owner in enumerate(self.owners):
            if out and out[-1][2] == owner and out[-1][1] == slot - 1:
                out[-1] = (out[-1][0], slot, owner)
            else:
                out.append((slot, slot, owner))
        return out

    @classmethod
    def from_ranges(cls, epoch: int, ranges: Iterable[Sequence[int]], shards: Sequence[str] = ()) -> SlotMap:
        """A map from ``(first, last, shard)`` runs that cover every slot exactly once;
        ValueError naming the first slot left out or given twice."""
        owners: list[int | None] = [None] * SLOTS
        for run in ranges:
            if len(run) != 3:
                raise ValueError(f"a run is [first slot, last slot, shard], not {list(run)}")
            first, last, shard = (int(v) for v in run)
            if not 0 <= first <= last < SLOTS:
                raise ValueError(f"slots {first}-{last} are not a range within 0-{SLOTS - 1}")
            for slot in range(first, last + 1):
                if owners[slot] is not None:
                    raise ValueError(f"slot {slot} is given twice")
                owners[slot] = shard
        missing = [s for s, o in enumerate(owners) if o is None]
        if missing:
            raise ValueError(f"slot {missing[0]} has no owner (a map assigns every slot)")
        return cls(epoch, tuple(o for o in owners if o is not None), tuple(shards))

    def moved(self, slots: Iterable[int], to: int) -> SlotMap:
        """This map with ``slots`` given to shard ``to`` (the next epoch; the same map
        when they are all its already)."""
        owners = list(self.owners)
        for slot in slots:
            owners[slot] = to
        if tuple(owners) == self.owners:
            return self
        return SlotMap(self.epoch + 1, tuple(owners), self.shards)

    def rebalanced(self, shards: Sequence[str]) -> SlotMap:
        """The map onto a new shard list (the next epoch) moving as few slots as
        possible: each shard ends with ``4096 / N`` slots (give or take one); a shard that
        stays keeps all the slots its share allows, giving up evenly spread ones (not a
        block: a block of slots is a poor spread of similar names); a shard left out
        gives all of its up. Shards are matched by URL, so the list may grow, shrink or
        change order. The same map when nothing would move."""
        urls = list(shards)
        n = len(urls)
        if n < 1:
            raise ValueError("a cluster has at least one shard")
        if n > SLOTS:
            raise ValueError(f"a cluster has at most {SLOTS} shards (one slot each)")
        old_urls = list(self.shards)
        quota = [SLOTS // n + (1 if k < SLOTS % n else 0) for k in range(n)]
        owners: list[int | None] = [None] * SLOTS
        for old, url in enumerate(old_urls):
            if url not in urls:
                continue
            new = urls.index(url)
            mine = self.slots_of(old)
            excess = max(0, len(mine) - quota[new])
            given = (
                {mine[(2 * i + 1) * len(mine) // (2 * excess)] for i in range(excess)} if excess else set()
            )
            for slot in mine:
                if slot not in given:
                    owners[slot] = new
        held = [0] * n
        for o in owners:
            if o is not None:
                held[o] += 1
        free = [slot for slot in range(SLOTS) if owners[slot] is None]
        # The free slots dealt out in turn to the shards under their share.
        k = 0
        for slot in free:
            while held[k] >= quota[k]:
                k = (k + 1) % n
            owners[slot] = k
            held[k] += 1
            k = (k + 1) % n
        out = SlotMap(self.epoch + 1, tuple(o for o in owners if o is not None), tuple(urls))
        if out.owners == self.owners and out.shards == self.shards:
            return self
        return out

    def to_json(self) -> dict[str, Any]:
        """The wire form: ``owners`` is every slot's shard, slot 0 first, as unsigned
        16-bit little-endian integers in unpadded base64url (about 11,000 characters,
        whatever the map: dealt-out slots make thousands of runs)."""
        raw = array("H", self.owners)
        if sys.byteorder != "little":
            raw.byteswap()
        owners = base64.urlsafe_b64encode(raw.tobytes()).rstrip(b"=").decode()
        return {"epoch": self.epoch, "shards": list(self.shards), "owners": owners}

    @classmethod
    def from_json(cls, data: Any) -> SlotMap:
        """A map from its wire form, or with ``ranges`` (``[first, last, shard]`` runs
        covering every slot once) in place of ``owners``; ValueError saying what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("a slot map is an object with epoch, shards and owners")
        epoch = data.get("epoch")
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise ValueError("a slot map's epoch is a non-negative integer")
        shards = data.get("shards") or ()
        if data.get("ranges") is not None:
            if data.get("owners") is not None:
                raise ValueError("give a map's owners or its ranges, not both")
            return cls.from_ranges(epoch, data["ranges"], shards)
        text = data.get("owners")
        if not isinstance(text, str):
            raise ValueError("a slot map needs owners (or ranges)")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise ValueError("owners is not base64url") from None
        if len(raw) != 2 * SLOTS:
            raise ValueError(f"a slot map assigns all {SLOTS} slots, not {len(raw) // 2}")
        owners = array("H")
        owners.frombytes(raw)
        if sys.byteorder != "little":
            owners.byteswap()
        return cls(epoch, tuple(owners), tuple(shards))


def parse_slots(text: str) -> list[int]:
    """``"7"``, ``"0-1023"``, ``"1,5,10-12"`` → the slots, ascending; ValueError naming
    the part that is not a slot or a range of slots within 0-4095."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            lo, hi = int(first), int(last) if last else int(first)
        except ValueError:
            raise ValueError(f"{part!r} is not a slot or a range of slots (such as 7 or 0-1023)") from None
        if not 0 <= lo <= hi < SLOTS:
            raise ValueError(f"slots {part!r} are not within 0-{SLOTS - 1}")
        out.update(range(lo, hi + 1))
    if not out:
        raise ValueError("no slots given (such as 7, 0-1023 or 1,5,10-12)")
    return sorted(out)
