"""The API description: ``/openapi.json`` and the Swagger UI at ``/docs``.

FastAPI serves these without a check; here they are routes like the others, so that a
server with tokens shows its API only to a caller with a token (of any role). A browser
has no bearer token to send, so with tokens ``/docs`` is for an API client that sends
one; ``openapi.yaml`` in the repository is the same document.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from service.server.deps import Operator
from service.server.responses import FastJSON

__all__ = ["router_for"]


def router_for(app: FastAPI) -> APIRouter:
    router = APIRouter(dependencies=[Operator], include_in_schema=False)

    @router.get("/openapi.json")
    async def openapi_json() -> FastJSON:
        return FastJSON(app.openapi())

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} API")

    return router
