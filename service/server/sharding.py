"""A shard's part of the values (docs/architecture.md, "A cluster"): with
``SCEMON_SHARD=K/N`` the engine evaluates each partition key's queries only on the values
this shard owns, by the rule the Spark job routes with (:func:`api.routing.owner_of`),
so a value's matches come from one shard whichever shards its events reach."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.routing import owner_of
from ecq.partitions import output_src

__all__ = ["ownership"]


def ownership(place: str) -> Callable[[tuple[str, ...], Any], bool] | None:
    """The engine's ``owns`` for ``place`` (``"K/N"``, checked by the settings); None
    when this shard owns every value (no place, or one shard)."""
    if not place:
        return None
    k, n = (int(part) for part in place.split("/"))
    if n <= 1:
        return None

    def owns(key: tuple[str, ...], value: Any) -> bool:
        return owner_of(key, output_src(value), n) == k

    return owns
