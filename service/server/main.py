"""Assemble the app: settings → runtime → routers, handlers, middleware; and run it on uvicorn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.server import handlers
from service.server.config import Settings
from service.server.limits import BodyLimit
from service.server.openapi import install_openapi
from service.server.routes import console, events, health, matches, queries, stats
from service.server.runtime import Runtime

__all__ = ["create_app", "run"]

DESCRIPTION = """\
Complex event processing over one shared network of event-centric composable queues.
Register queries (admin), post micro-batches of events (producer), read matches by
`seq` or subscribe over WebSocket at `/v1/matches/ws?from_seq=&queries=a,b` (reader).
Every 4xx answer is `{"detail": {"message", ...where}}`. The web console is at `/`.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    """The scemon app; its store opens when the app starts (lifespan), not here."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime.open(settings)
        app.state.runtime = runtime
        runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(title="scemon", version="1.0.0", description=DESCRIPTION, lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    handlers.install(app)
    for router in (queries.router, events.router, matches.router, stats.router, health.router):
        app.include_router(router)
    console.install(app)
    install_openapi(app)
    return app


def run(settings: Settings) -> None:
    """Serve the app on ``settings.host:settings.port`` until stopped (``scemon serve``)."""
    import logging

    import uvicorn

    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=5,
    )
