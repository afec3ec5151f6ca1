"""Limits on request bodies, enforced before any route reads one.

- **Size** (``BodyLimit``, a middleware): a route that parses JSON would otherwise read
  an unbounded body into memory first. A declared ``Content-Length`` over the cap is
  refused at once; a body sent without one (chunked) is read up to the cap and refused
  as soon as it passes it. Either way the client gets 413 in the usual error shape and
  the route never runs.
- **Nesting** (``JSONDepthRoute``, the route class of the routers whose JSON body FastAPI
  parses): a body nesting arrays and objects deeper than :data:`MAX_JSON_DEPTH` gets 400
  before it is parsed. The service decides the limit, not the interpreter: Python's JSON
  parser recurses, and where it gives up depends on the version (3.11 ran out of stack
  at ~1,000 levels, 3.13 parses far deeper), so the same body got 400 on one version and
  a validation error on another. No query needs anything near the limit (the text form
  allows 64 nested brackets, about 130 levels of JSON). Event batches are parsed by
  orjson, whose own limit (1,024) answers 400 the same way on every version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit", "JSONDepthRoute", "MAX_JSON_DEPTH", "json_too_deep"]

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
