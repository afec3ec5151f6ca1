"""Reading JSON request bodies without freezing the server or its memory.

Three problems, three answers:

- **Memory.** Parsing makes a Python object per JSON value: 63 MB of ``{},`` is 21
  million dicts, 2 GB. Before parsing, :func:`count_items` bounds the number of array
  elements and object members by counting the body's commas and opening brackets (a C
  scan, about 10 ms for 60 MB). Strings that hold those characters make it count more,
  never less, so a body within the bound cannot hold more values; over it the request is
  413 before anything is parsed.
- **The event loop.** Routes call these functions in a worker thread. That alone does
  not free the loop: one ``orjson.loads`` of a large body holds the interpreter lock for
  its whole run (0.2 s for 20 MB). :func:`loads_in_pieces` parses the big list of a body
  (a batch's events, a bulk call's queries) in pieces of about :data:`PIECE` bytes, so the
  lock is released between pieces and every other request keeps being answered.
- **Correct pieces.** A piece is cut after a ``}`` followed by ``,`` and ``{`` (the
  boundary between two objects of the list). A cut that falls inside a string leaves
  that string unterminated, so the piece does not parse; the whole body is then parsed
  in one piece, which is always right. Cuts are tried only where the list really is the
  body's (the envelope around it must parse to an object holding that key).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from service.server.errors import BadRequestError, PayloadTooLargeError

__all__ = ["PIECE", "count_items", "loads", "loads_in_pieces"]

# About a millisecond of parsing: short enough that no other request notices.
PIECE = 256 * 1024

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def count_items(body: bytes) -> int:
    """An upper bound on the array elements plus object members in ``body``."""
    return body.count(b",") + body.count(b"[") + body.count(b"{") + 1


def loads(body: bytes, max_items: int, what: str) -> Any:
    """Parse ``body`` after checking it against ``max_items`` (413), malformed JSON 400."""
    items = count_items(body)
    if items > max_items:
        raise PayloadTooLargeError(
            f"the {what} holds up to {items:,} JSON values (counting its commas and brackets); "
            f"the limit is {max_items:,}: send smaller batches"
        )
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise BadRequestError(f"malformed JSON: {err}") from None


def loads_in_pieces(body: bytes, key: str, max_items: int, what: str) -> Any:
    """:func:`loads`, with the list under ``key`` parsed piece by piece when the body
    is large (see the module docstring). The result equals ``orjson.loads(body)``."""
    if len(body) <= 2 * PIECE:
        return loads(body, max_items, what)
    items = count_items(body)
    if items > max_items:
        return loads(body, max_items, what)  # raises 413
    found = _split(body, key)
    if found is None:
        return loads(body, max_items, what)
    envelope, pieces = found
    out: list[Any] = []
    for piece in pieces:
        try:
            part = orjson.loads(b"[" + piece + b"]")
        except orjson.JSONDecodeError:
            return loads(body, max_items, what)  # a cut inside a string, or bad JSON
        out.extend(part)
    envelope[key] = out
    return envelope


def _split(body: bytes, key: str) -> tuple[dict[str, Any], list[bytes]] | None:
    """The body without the list under ``key``, and that list's content in pieces;
    None when the body is not an object ending with that list."""
    start = re.search(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*\[', body)
    if start is None:
        return None
    tail = body.rstrip()
    if not tail.endswith(b"}"):
        return None
    close = tail[:-1].rstrip()
    if not close.endswith(b"]"):
        return None
    end = len(close) - 1  # the list's closing bracket
    try:
        envelope = orjson.loads(body[: start.end()] + b"]" + body[end + 1 :])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(envelope, dict) or envelope.get(key) != []:
        return None
    content = body[start.end() : end]
    pieces = []
    at = 0
    while len(content) - at > PIECE:
        cut = _BOUNDARY.search(content, at + PIECE)
        if cut is None:
            break
        pieces.append(content[at : cut.start() + 1])
        at = cut.end() - 1  # the next piece starts at the "{"
    pieces.append(content[at:])
    return envelope, pieces
