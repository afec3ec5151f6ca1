"""Size limits: a cap on request bodies, enforced before any route reads one, and the
size of a query's AST JSON.

Why a middleware for bodies: a route that parses JSON would otherwise read an unbounded
body into memory first. A declared ``Content-Length`` over the cap is refused at once; a
body sent without one (chunked) is read up to the cap and refused as soon as it passes
it. Either way the client gets 413 in the usual error shape and the route never runs.

Why a limit on the AST JSON form of a query: the text form is bounded by its length,
but a pattern given as JSON was bounded only by the body cap, and reading it back
(``from_json``) recurses once per level.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.server.errors import InvalidInputError, PayloadTooLargeError

__all__ = ["BodyLimit", "MAX_PATTERN_DEPTH", "MAX_PATTERN_VALUES", "check_pattern_size"]

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
                f"field 'pattern': nested more than {MAX_PATTERN_DEPTH} levels deep at {path}", field="pattern"
            )
        if isinstance(value, dict):
            stack.extend((item, depth + 1, f"{path}.{key}") for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, depth + 1, f"{path}[{i}]") for i, item in enumerate(value))


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        length = None
        for key, value in scope["headers"]:
            if key == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await self._refuse(send, 400, "Content-Length is not a number")
                    return
        if length is not None:
            if length > self.max_bytes:
                await self._refuse(send, 413, f"the body has {length} bytes; the limit is {self.max_bytes}")
                return
            await self.app(scope, receive, send)
            return
        # No length declared: buffer up to the cap, then hand the body on in one piece.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, 413, f"the body is over the limit of {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
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
