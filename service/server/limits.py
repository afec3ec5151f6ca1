"""Limits on request bodies and on a query's AST JSON.

- **Size** (``BodyLimit``, a middleware): a route that parses JSON would otherwise read
  an unbounded body into memory first. A declared ``Content-Length`` over the cap is
  refused at once; a body sent without one (chunked) is read up to the cap and refused
  as soon as it passes it. Either way the client gets 413 in the usual error shape and
  the route never runs.
- **Nesting** (``JSONDepthRoute``, the route class of the routers whose JSON body
  FastAPI parses): a body nesting arrays and objects deeper than :data:`MAX_JSON_DEPTH`
  gets 400 before it is parsed. The service decides the limit, not the interpreter:
  Python's JSON parser recurses, and where it gives up depends on the version (3.11 ran
  out of stack at ~1,000 levels, 3.13 parses far deeper), so the same body got 400 on
  one version and a validation error on another. Event batches and the query routes'
  bodies are parsed by orjson (service.server.bodies), whose own limit (1,024 levels)
  answers 400 the same way on every version; a query's pattern is then held to
  :data:`MAX_PATTERN_DEPTH`.
- **A query's AST JSON** (:func:`check_pattern_size`): the text form is bounded by its
  length, but a pattern given as JSON was bounded only by the body cap, and reading it
  back (``from_json``) recurses once per level.
- **What a registered query may ask for** (:func:`check_query_bounds`): the language
  takes ``WITHIN 0`` (events at one instant) and any Kleene count; the service refuses
  a zero window, which is almost surely a mistake of unit, and a count over
  :data:`MAX_KLEENE_COUNT`, whose matches would each list that many events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ecq.language.ast import Component, Query
from service.server.errors import InvalidInputError, PayloadTooLargeError
from service.server.guard import is_json, media_type

__all__ = [
    "BodyLimit",
    "JSONDepthRoute",
    "MAX_JSON_DEPTH",
    "MAX_PATTERN_DEPTH",
    "MAX_PATTERN_VALUES",
    "QUERY_BODY_MAX",
    "SMALL_BODY_MAX",
    "MAX_KLEENE_COUNT",
    "check_pattern_size",
    "check_query_bounds",
    "json_too_deep",
]

# Bodies of routes that take one query, and of every other route (a time advance): a
# large body there can only be a mistake or an attack, and FastAPI parses those on the
# event loop. Batches of events, bulk registrations and slot maps may use the whole cap.
QUERY_BODY_MAX = 8 * 1024 * 1024
SMALL_BODY_MAX = 64 * 1024
# A new slot map carries the retained events of the slots a shard gains.
_LARGE_ROUTES = frozenset({"/v1/events", "/v1/queries/bulk", "/v1/cluster/slots"})
_QUERY_ROUTES = frozenset({"/v1/queries", "/v1/queries/validate"})

# An OR of 10,000 classes is ~50,000 values; the longest text query (100,000
# characters) reads as fewer than 100,000 (a component needs at least two characters).
MAX_PATTERN_VALUES = 200_000
# JSON levels: a sub-pattern is three (its component, its pattern, the items list), and
# the text form allows 64 nested brackets; so what is accepted prints as text that parses.
MAX_PATTERN_DEPTH = 200


def check_pattern_size(pattern: Any) -> None:
    """Raise 413 when a query's AST JSON holds more than MAX_PATTERN_VALUES values, 422
    (naming where) when it nests deeper than MAX_PATTERN_DEPTH. Iterative, O(values)."""
    count = 0
    stack: list[tuple[Any, int, str]] = [(pattern, 1, "$")]
    while stack:
        value, depth, path = stack.pop()
        count += 1
        if count > MAX_PATTERN_VALUES:
            raise PayloadTooLargeError(
                f"field 'pattern': more than {MAX_PATTERN_VALUES:,} JSON values", field="pattern"
            )
        if depth > MAX_PATTERN_DEPTH:
            raise InvalidInputError(
                f"field 'pattern': nested more than {MAX_PATTERN_DEPTH} levels deep at {path}",
                field="pattern",
            )
        if isinstance(value, dict):
            stack.extend((item, depth + 1, f"{path}.{key}") for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, depth + 1, f"{path}[{i}]") for i, item in enumerate(value))


# The most events a Kleene count (B^n, B{n}, B{m,}) may ask for: a match of B^n lists n
# events, so one match of B^100000 is already a megabyte on the wire.
MAX_KLEENE_COUNT = 100_000


def check_query_bounds(query: Query) -> None:
    """Raise 422 for ``WITHIN 0`` and for a Kleene count over MAX_KLEENE_COUNT (see the
    module docstring)."""
    if query.within is not None and query.within <= 0:
        raise InvalidInputError(
            "WITHIN 0 is refused: a window of 0 s matches only events that all happen at the same "
            "instant; give the window in its unit (e.g. WITHIN 500 ms)",
            field="within",
        )
    stack = list(query.pattern.items)
    while stack:
        comp: Component = stack.pop()
        if comp.kleene is not None and comp.kleene.min > MAX_KLEENE_COUNT:
            name = "/".join(comp.classes) or "(...)"
            raise InvalidInputError(
                f"a Kleene count of {comp.kleene.min:,} on {name} is refused: at most "
                f"{MAX_KLEENE_COUNT:,} events in one group (a match lists them all)",
                field="pattern",
            )
        if comp.sub is not None:
            stack.extend(comp.sub.items)


MAX_JSON_DEPTH = 200

# A JSON string (skipped whole: brackets inside it do not nest), or one bracket.
_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``body`` nests arrays and objects deeper than ``limit``.
    O(len(body)), in the regex engine; a body with no more brackets than the limit is
    not scanned at all."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    for found in _STRUCTURE.finditer(body):
        c = body[found.start()]
        if c == 0x5B or c == 0x7B:  # [ {
            depth += 1
            if depth > limit:
                return True
        elif c == 0x5D or c == 0x7D:  # ] }
            depth -= 1
    return False


class JSONDepthRoute(APIRoute):
    """A route whose JSON body is refused with 400 when nested deeper than
    :data:`MAX_JSON_DEPTH`, before FastAPI parses it (see the module's docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            # Read once: the handler gets the same request, body included.
            if json_too_deep(await request.body()):
                raise HTTPException(
                    400, f"malformed body: JSON nested deeper than {MAX_JSON_DEPTH} arrays and objects"
                )
            return await handler(request)

        return checked


class BodyLimit:
    """``max_bytes`` for batches of events and bulk registrations; less elsewhere
    (QUERY_BODY_MAX for one query, SMALL_BODY_MAX for the rest). A JSON body is also held
    to ``max_values`` JSON values, counted as it streams in
    (:func:`service.server.bodies.count_items`: its commas and opening brackets), so a
    body of millions of tiny values is refused after the first megabytes, before it is
    read whole or parsed."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_values: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_values = max_values

    def cap(self, path: str) -> int:
        if path in _LARGE_ROUTES:
            return self.max_bytes
        return min(self.max_bytes, QUERY_BODY_MAX if path in _QUERY_ROUTES else SMALL_BODY_MAX)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        cap = self.cap(scope["path"])
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await self._refuse(send, 400, "Content-Length is not a number")
                return
            if length > cap:
                await self._refuse(send, 413, f"the body has {length:,} bytes; the limit here is {cap:,}")
                return
        counting = is_json(media_type(headers.get("content-type")))
        # Buffer up to the limits, then hand the body on in one piece.
        chunks: list[bytes] = []
        size = 0
        items = 1
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                await self._refuse(send, 413, f"the body is over the limit here of {cap:,} bytes")
                return
            if counting:
                items += chunk.count(b",") + chunk.count(b"[") + chunk.count(b"{")
                if items > self.max_values:
                    await self._refuse(
                        send,
                        413,
                        f"the body holds more than {self.max_values:,} JSON values (counting its commas and "
                        "brackets); send smaller batches",
                    )
                    return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        del chunks
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(send: Send, status: int, message: str) -> None:
        body = orjson.dumps({"detail": {"message": message}})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
