"""Bearer tokens with roles (admin, producer, reader), for HTTP routes and WebSockets.

With no tokens configured every request is allowed; ``scemon serve`` then refuses to
bind anything but loopback, so an open server is reachable from this machine only.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from service.server.config import Role, Settings
from service.server.errors import ForbiddenError, UnauthorizedError

__all__ = ["ADMIN", "ANY", "PRODUCER", "READER", "authorize"]

ADMIN = frozenset({Role.admin})
PRODUCER = frozenset({Role.admin, Role.producer})
READER = frozenset({Role.admin, Role.reader})
ANY = frozenset(Role)


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


def _lookup(tokens: dict[str, Role], token: str) -> Role | None:
    # Compare in constant time so a token cannot be guessed from response times.
    found = None
    for known, role in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = role
    return found
