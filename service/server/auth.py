"""Bearer tokens with roles (admin, producer, reader), for HTTP routes and WebSockets.

With no tokens configured every request is allowed; ``scemon serve`` then refuses to
bind anything but loopback, so an open server is reachable from this machine only.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable

from service.server.config import Role, Settings
from service.server.errors import ForbiddenError, UnauthorizedError

__all__ = [
    "ABILITIES",
    "ADMIN",
    "ANY",
    "PRODUCER",
    "READER",
    "WS_BEARER_PREFIX",
    "WS_PROTOCOL",
    "authorize",
    "may",
    "websocket_credentials",
]

# A browser cannot set headers on a WebSocket, only subprotocols: it offers
# ``scemon`` and ``scemon.bearer.<the token in unpadded base64url>`` (any token is then a
# valid protocol name), and the server answers ``scemon``, never echoing the token.
WS_PROTOCOL = "scemon"
WS_BEARER_PREFIX = "scemon.bearer."

ADMIN = frozenset({Role.admin})
PRODUCER = frozenset({Role.admin, Role.producer})
READER = frozenset({Role.admin, Role.reader})
ANY = frozenset(Role)

# What each role set allows, by the name ``GET /v1/whoami`` gives it: the console shows
# a control only when the caller may use it, from the same sets the routes check.
ABILITIES = {
    "manage_queries": ADMIN,
    "post_events": PRODUCER,
    "read_matches": READER,
    "read_queries": ANY,
}


def authorize(
    settings: Settings, authorization: str | None, allowed: Iterable[Role], action: str
) -> Role | None:
    """The caller's role, given the ``Authorization`` header; raises 401 without a known
    token and 403 when its role may not do ``action``. None when auth is off."""
    tokens = settings.token_roles()
    if not tokens:
        return None
    if not authorization:
        raise UnauthorizedError(f"{action} needs a bearer token (Authorization: Bearer <token>)")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
    role = _lookup(tokens, token.strip())
    if role is None:
        raise UnauthorizedError("unknown bearer token")
    if role not in allowed:
        roles = " or ".join(sorted(r.value for r in allowed))
        raise ForbiddenError(f"{action} needs the role {roles}; this token has the role {role.value}")
    return role


def websocket_credentials(authorization: str | None, protocols: str | None) -> tuple[str | None, str | None]:
    """``(Authorization header value, subprotocol to accept)`` for a WebSocket handshake:
    the header when sent, else the bearer token carried as a subprotocol. A token that is
    not base64url gives an Authorization value that no token matches (401)."""
    offered = [p.strip() for p in (protocols or "").split(",") if p.strip()]
    accept = WS_PROTOCOL if WS_PROTOCOL in offered else None
    if authorization:
        return authorization, accept
    for protocol in offered:
        if protocol.startswith(WS_BEARER_PREFIX):
            encoded = protocol.removeprefix(WS_BEARER_PREFIX)
            try:
                token = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError):
                token = ""
            return f"Bearer {token}", accept
    return None, accept


def may(role: Role | None) -> list[str]:
    """What a caller with ``role`` may do (everything when auth is off: ``None``)."""
    return [name for name, allowed in ABILITIES.items() if role is None or role in allowed]


def _lookup(tokens: dict[str, Role], token: str) -> Role | None:
    # Compare in constant time so a token cannot be guessed from response times.
    found = None
    for known, role in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = role
    return found
