"""Dependencies of the routes, as ``Annotated`` aliases.

Routes declare what they need (``host: HostDep``) and which role may call them
(``dependencies=[Admin]``); the parts come from the app's :class:`~service.server.runtime.Runtime`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from service.server.auth import ADMIN, ANY, PRODUCER, READER, authorize
from service.server.config import Role, Settings
from service.server.host import EngineHost
from service.server.hub import Hub
from service.server.metrics import Metrics
from service.server.runtime import Runtime
from service.server.store import Store

__all__ = [
    "Admin",
    "AnyRole",
    "CallerRole",
    "HostDep",
    "HubDep",
    "MetricsDep",
    "Operator",
    "Producer",
    "Reader",
    "RuntimeDep",
    "SettingsDep",
    "StoreDep",
    "runtime_of",
]


def runtime_of(conn: HTTPConnection) -> Runtime:
    runtime: Runtime = conn.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(runtime_of)]


def _host(runtime: RuntimeDep) -> EngineHost:
    return runtime.host


def _hub(runtime: RuntimeDep) -> Hub:
    return runtime.hub


def _store(runtime: RuntimeDep) -> Store:
    return runtime.store


def _metrics(runtime: RuntimeDep) -> Metrics:
    return runtime.metrics


def _settings(runtime: RuntimeDep) -> Settings:
    return runtime.settings


HostDep = Annotated[EngineHost, Depends(_host)]
HubDep = Annotated[Hub, Depends(_hub)]
StoreDep = Annotated[Store, Depends(_store)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
SettingsDep = Annotated[Settings, Depends(_settings)]

# auto_error=False: a missing token is our 401 in our error shape, not FastAPI's 403.
_bearer = HTTPBearer(
    auto_error=False, description="A token from SCEMON_TOKENS; its role decides what it may do."
)


def _role(allowed: frozenset[Role], action: str) -> Callable[..., Awaitable[Role | None]]:
    async def check(
        request: Request,
        settings: SettingsDep,
        _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Role | None:
        return authorize(settings, request.headers.get("authorization"), allowed, action)

    return check


Admin = Depends(_role(ADMIN, "managing queries"))
Producer = Depends(_role(PRODUCER, "posting events"))
Reader = Depends(_role(READER, "reading matches"))
AnyRole = Depends(_role(ANY, "reading queries"))
# /metrics (it names the queries) and the API description: any token, when there are tokens.
Operator = Depends(_role(ANY, "reading the metrics or the API description"))

# The caller's role as a value (None with auth off), for routes that answer by it.
CallerRole = Annotated[Role | None, Depends(_role(ANY, "using the service"))]
