"""Which shard owns a partition key's value: the one rule the Spark job routes by
(:mod:`api.spark_sink`) and each shard evaluates by (``SCEMON_SHARD``,
docs/architecture.md, "A cluster"). Stable across processes, restarts and machines
(unlike ``hash()``) and cheap: ``crc32`` of the value's text, modulo the shards."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["owner_of", "shard_of", "value_text"]


def shard_of(src: str | int, shards: int) -> int:
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


def owner_of(key: Sequence[str], value: Any, shards: int) -> int:
    """The shard that owns a key's value: ``crc32`` of its :func:`value_text` mod ``shards``."""
    return zlib.crc32(value_text(key, value).encode()) % shards if shards > 1 else 0
