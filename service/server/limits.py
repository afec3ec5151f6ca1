"""A cap on request bodies, enforced before any route reads one.

Why a middleware: a route that parses JSON would otherwise read an unbounded body into
memory first. A declared ``Content-Length`` over the cap is refused at once; a body sent
without one (chunked) is read up to the cap and refused as soon as it passes it. Either
way the client gets 413 in the usual error shape and the route never runs.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit"]


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
