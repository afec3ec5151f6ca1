"""``GET /`` and ``GET /console``: the web console, and its assets under
``/console/assets/``.

One hand-written page with plain JavaScript modules and CSS, shipped inside the package
(``service/server/console/``, package data in pyproject.toml): no CDN, no build step,
it works offline. It calls the same REST and WebSocket API as any client, with the
token the user gives it. Served without a token (it is code, not data) and with a
strict Content-Security-Policy: only this origin's scripts, styles and connections.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Response
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

__all__ = ["ASSETS", "install"]

ASSETS = Path(__file__).resolve().parents[1] / "console"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidate every time (ETag): after an upgrade the page and its modules agree.
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
@router.get("/console")
async def console() -> Response:
    """The console's page."""
    return FileResponse(ASSETS / "index.html", media_type="text/html", headers=SECURITY_HEADERS)


class _Assets(StaticFiles):
    """The console's modules, styles and icon, with the page's headers."""

    def file_response(self, *args: object, **kwargs: object) -> Response:
        response = super().file_response(*args, **kwargs)  # type: ignore[arg-type]
        response.headers.update(SECURITY_HEADERS)
        return response


def install(app: FastAPI) -> None:
    """Serve the page and its assets on ``app``."""
    app.include_router(router)
    app.mount("/console/assets", _Assets(directory=ASSETS), name="console-assets")
