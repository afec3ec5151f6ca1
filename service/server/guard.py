"""What a state-changing request must look like: a JSON (or, for events, Arrow) body,
and — when auth is off — no other site's ``Origin``.

Why: with auth off (loopback, no tokens) a web page in the user's browser can still
reach the server. A browser sends a cross-site ``POST`` without asking first (no CORS
preflight) only when its content type is a "simple" one (no type, ``text/plain``, a
form); requiring ``application/json`` or the Arrow type therefore refuses those, and a
request that names another site in ``Origin`` (or ``Sec-Fetch-Site: cross-site``) is
refused outright. With tokens a browser has no bearer token to send, so only the content
type is checked. The WebSocket route applies :func:`foreign_origin` to its handshake
(with auth off, another site's page could otherwise read the matches).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import orjson
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from api.models import ARROW_MEDIA_TYPE

__all__ = ["RequestGuard", "foreign_origin", "is_json", "media_type"]

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Routes that take an Arrow IPC stream besides JSON.
ARROW_ROUTES = frozenset({"/v1/events"})


def media_type(header: str | None) -> str:
    """``"application/json; charset=utf-8"`` → ``"application/json"``; ``""`` if none."""
    return (header or "").split(";", 1)[0].strip().lower()


def is_json(media: str) -> bool:
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def foreign_origin(headers: Headers) -> str | None:
    """Why the request comes from another site, or None. Same-origin means the scheme is
    http(s) and the host and port are those the request was sent to (``Host``)."""
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc.lower() != headers.get("host", "").lower():
            return f"Origin {origin!r} is another site"
    if headers.get("sec-fetch-site") == "cross-site":
        return "Sec-Fetch-Site says cross-site"
    return None


class RequestGuard:
    """Refuses, before any route runs: a state-changing request with a body that is not
    JSON (or Arrow where taken) — 415; with ``auth_enabled`` off, one from another site
    — 403."""

    def __init__(self, app: ASGIApp, auth_enabled: bool) -> None:
        self.app = app
        self.auth_enabled = auth_enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in STATE_CHANGING:
            headers = Headers(scope=scope)
            refusal = self._refusal(scope, headers)
            if refusal is not None:
                status, message = refusal
                body = orjson.dumps({"detail": {"message": message}})
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body)),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str] | None:
        if not self.auth_enabled:
            why = foreign_origin(headers)
            if why is not None:
                return (
                    403,
                    f"cross-site request refused: {why} (the server has no tokens, so it accepts none)",
                )
        if scope["method"] != "POST":
            return None  # DELETE has no body; no route takes PUT or PATCH (the router says 405)
        media = media_type(headers.get("content-type"))
        if is_json(media) or (media == ARROW_MEDIA_TYPE and scope["path"] in ARROW_ROUTES):
            return None
        wanted = "application/json" + (f" or {ARROW_MEDIA_TYPE}" if scope["path"] in ARROW_ROUTES else "")
        got = f"a body of type {media!r}" if media else "a body without Content-Type"
        return 415, f"cannot read {got}: send {wanted}"
