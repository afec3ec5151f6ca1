"""The OpenAPI document of the app, and its YAML form (``openapi.yaml``).

FastAPI documents the models its routes parse; ``POST /v1/events`` and the query
registrations parse their own bodies (in a worker thread; events as JSON or Arrow), so
those models are added here. The YAML is what
``scemon openapi`` writes and what a test compares with the file at the top of the
repository, so the contract changes only on purpose.
"""

from __future__ import annotations

from typing import Any

import yaml
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

from api.models import EventBatch, QueryBulkCreate, QueryCreate, QueryValidate

__all__ = ["install_openapi", "openapi_yaml"]


def install_openapi(app: FastAPI) -> None:
    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            _, extra = models_json_schema(
                [
                    (model, "validation")
                    for model in (EventBatch, QueryCreate, QueryBulkCreate, QueryValidate)
                ],
                ref_template="#/components/schemas/{model}",
            )
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in extra.get("$defs", {}).items():
                schemas.setdefault(name, definition)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]


def openapi_yaml(app: FastAPI) -> str:
    """The document as YAML, keys in FastAPI's order."""
    text: str = yaml.safe_dump(app.openapi(), sort_keys=False, allow_unicode=True, width=100)
    return text
