"""A JSON response rendered with orjson (FastAPI's own ORJSONResponse is deprecated)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse

__all__ = ["FastJSON"]


class FastJSON(JSONResponse):
    """For bodies built by hand (errors, match pages): orjson is several times faster
    than the stdlib for the lists of matches a page carries."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
