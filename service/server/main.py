"""Assemble the app: settings → runtime → routers, handlers, middleware; and run it on uvicorn."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.server import handlers
from service.server.config import Settings
from service.server.guard import HostCheck, RequestGuard
from service.server.limits import BodyLimit
from service.server.openapi import install_openapi
from service.server.routes import cluster, console, docs, events, health, matches, queries, stats
from service.server.runtime import Runtime

__all__ = ["create_app", "run"]

log = logging.getLogger("scemon.server")

DESCRIPTION = """\
Complex event processing over one shared network of event-centric composable queues.
Register queries and advance the clock (admin), post micro-batches of events
(producer), read matches by `seq` or subscribe over WebSocket at
`/v1/matches/ws?from_seq=&queries=a,b` (reader); `/v1/stats` has the service's figures
and its event time. Every 4xx answer is `{"detail": {"message", ...where}}`. The web
console is at `/`.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    """The scemon app; its store opens when the app starts (lifespan), not here."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.auth_enabled:
            log.warning(
                "auth is off (SCEMON_TOKENS is empty): every request from this machine is allowed; "
                "set tokens before anyone else can reach %s",
                settings.host,
            )
        runtime = Runtime.open(settings)
        app.state.runtime = runtime
        runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    # The API description is served by routes/docs.py (behind a token when there are tokens).
    app = FastAPI(
        title="scemon",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    # The last added runs first: the guard refuses on headers alone, then the body's limits.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, max_values=settings.max_json_values)
    hosts = HostCheck(settings.auth_enabled, settings.host, settings.allowed_host_names())
    app.add_middleware(RequestGuard, auth_enabled=settings.auth_enabled, hosts=hosts)
    handlers.install(app)
    for router in (
        queries.router,
        events.router,
        matches.router,
        stats.router,
        health.router,
        cluster.router,
        docs.router_for(app),
    ):
        app.include_router(router)
    console.install(app)
    install_openapi(app)
    return app


# Cyclic garbage collection thresholds for the server process (gen0 allocations, gen1 and
# gen2 collections): see tune_collector.
COLLECTOR_THRESHOLDS = (100_000, 50, 100)


def tune_collector() -> None:
    """Run the cyclic garbage collector a hundred times less often than by default.

    Why: the server holds the engine's state and every batch in flight — millions of
    objects with hardly a reference cycle among them — and a batch of 200,000 events
    allocates a few million more, so with the default thresholds the collector walked
    them again and again while holding the interpreter lock: measured, half of a large
    batch's time, and the longest pauses every other request saw (docs/service.md).
    Reference counting still frees everything as usual; cycles are still collected."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def run(settings: Settings) -> None:
    """Serve the app on ``settings.host:settings.port`` until stopped (``scemon serve``)."""
    import uvicorn

    from service.server.connections import raise_open_files, timed_protocol
    from service.server.logs import log_config

    tune_collector()
    raise_open_files(settings.max_connections)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=log_config(settings.log_level),
        timeout_graceful_shutdown=5,
        # Header and body read timeouts, and a cap on open connections (connections.py).
        http=timed_protocol(settings.header_timeout, settings.body_timeout),
        limit_concurrency=settings.max_connections,
        # Off unless asked for: deflating each subscriber's copy of every frame cost more
        # than everything else the server does per event with 10 subscribers (profiled).
        ws_per_message_deflate=settings.ws_compression,
    )
