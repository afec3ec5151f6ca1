"""Which requests the server answers at all, and what a state-changing one must look
like: a ``Host`` the server answers to, a JSON (or, for events, Arrow) body, and — when
auth is off — no other site's ``Origin``.

Why the ``Host`` check (DNS rebinding): a web page at ``attacker.example`` can make its
name resolve to 127.0.0.1 and then talk to a server on this machine as its own origin:
``Host`` and ``Origin`` both say ``attacker.example``, so comparing them proves
nothing. What the page cannot change is the host name in the request, so with auth off
every request (every route, the WebSocket upgrade) must name a loopback host
(``localhost``, ``127.0.0.1``, ``[::1]``), the address the server is bound to, or a
name the operator allowed (``--allowed-host``); others get 403. With tokens a rebinding
page has no token to send, so any name is answered unless the operator listed names.
``/healthz`` and ``/readyz`` answer any name: probes use whatever address reaches the
server, and those routes say nothing but whether it serves.

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

import ipaddress
import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

import orjson
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from api.models import ARROW_MEDIA_TYPE

__all__ = ["HostCheck", "RequestGuard", "foreign_origin", "host_name", "is_json", "media_type"]

log = logging.getLogger("scemon.http")

# Routes answered whatever the Host: liveness and readiness probes.
PROBE_ROUTES = frozenset({"/healthz", "/readyz"})

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


def host_name(host: str) -> str:
    """The name of a ``Host`` header without its port, lower case: ``"[::1]:8080"`` →
    ``"[::1]"``, ``"Example.org:80"`` → ``"example.org"``."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _loopback_name(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Which ``Host`` names a server answers to (see the module docstring).
    ``enforced``: whether the check applies at all (auth off, or names configured)."""

    def __init__(self, auth_enabled: bool, bound: str, allowed: Iterable[str] = ()) -> None:
        self.allowed = frozenset(allowed)
        self.enforced = not auth_enabled or bool(self.allowed)
        bound_name = host_name(f"[{bound}]" if ":" in bound and not bound.startswith("[") else bound)
        # An unspecified address (0.0.0.0, ::) is no name a client can send.
        self.bound = "" if bound_name in ("0.0.0.0", "[::]") else bound_name

    def refusal(self, host: str | None) -> str | None:
        """Why a request to ``host`` is refused, or None. A request without ``Host``
        (HTTP/1.0 tools) cannot come from a rebinding page: browsers always send it."""
        if not self.enforced or host is None:
            return None
        name = host_name(host)
        if name in self.allowed or (self.bound and name == self.bound) or _loopback_name(name):
            return None
        return (
            f"host {host!r} is not a name this server answers to (localhost, 127.0.0.1, [::1]"
            + "".join(f", {n}" for n in sorted(self.allowed))
            + "); a name the operator uses can be added with --allowed-host (SCEMON_ALLOWED_HOSTS)"
        )


class RequestGuard:
    """Refuses, before any route runs: a request (or WebSocket upgrade) to a host name
    the server does not answer to — 403; a state-changing request with a body that is
    not JSON (or Arrow where taken) — 415; with ``auth_enabled`` off, one from another
    site — 403."""

    def __init__(self, app: ASGIApp, auth_enabled: bool, hosts: HostCheck | None = None) -> None:
        self.app = app
        self.auth_enabled = auth_enabled
        self.hosts = hosts or HostCheck(auth_enabled, "127.0.0.1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind in ("http", "websocket"):
            headers = Headers(scope=scope)
            refusal: tuple[int, str] | None = None
            if scope["path"] not in PROBE_ROUTES:
                why = self.hosts.refusal(headers.get("host"))
                if why is not None:
                    log.warning("refused %s %s: %s", scope.get("method", "WEBSOCKET"), scope["path"], why)
                    refusal = (403, why)
            if refusal is None and kind == "http" and scope["method"] in STATE_CHANGING:
                refusal = self._refusal(scope, headers)
            if refusal is not None:
                if kind == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
                    await send({"type": "websocket.close", "code": 1008})  # the server says 403
                else:
                    await _refuse(kind, send, *refusal)
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


async def _refuse(kind: str, send: Send, status: int, message: str) -> None:
    """Answer ``status`` with the usual error body; for a WebSocket upgrade as the HTTP
    answer to its handshake (the ASGI denial response), so a client sees the reason."""
    body = orjson.dumps({"detail": {"message": message}})
    prefix = "http" if kind == "http" else "websocket.http"
    await send(
        {
            "type": f"{prefix}.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": f"{prefix}.response.body", "body": body})
