"""Assemble the app: settings → runtime → routers, handlers, middleware. Nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service import handlers
from service.config import Settings
from service.limits import BodyLimit
from service.openapi import install_openapi
from service.routes import events, health, matches, queries
from service.runtime import Runtime

__all__ = ["create_app"]

DESCRIPTION = """\
Complex event processing over one shared network of event-centric composable queues.
Register queries (admin), post micro-batches of events (producer), read matches by
`seq` or subscribe over WebSocket at `/v1/matches/ws?from_seq=&queries=a,b` (reader).
Every 4xx answer is `{"detail": {"message", ...where}}`.
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
    for router in (queries.router, events.router, matches.router, health.router):
        app.include_router(router)
    install_openapi(app)
    return app
