"""``/v1/queries``: register (one or in bulk), list, show, delete. Admin role to change.

A registration's body is read here rather than by FastAPI, so that it is parsed and
validated in a worker thread (a bulk call's list piece by piece) instead of on the event
loop; its schema is still ``QueryCreate`` / ``QueryBulkCreate`` in openapi.yaml.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from api.models import (
    NAME_MAX,
    NAME_PATTERN,
    QueryBulkCreate,
    QueryBulkPublic,
    QueryCreate,
    QueryList,
    QueryPublic,
    QueryValid,
    QueryValidate,
)
from service.server.bodies import loads, loads_in_pieces
from service.server.deps import Admin, AnyRole, HostDep, RuntimeDep
from service.server.errors import InvalidInputError
from service.server.host import QueryInfo, QuerySpec
from service.server.responses import FastJSON
from service.server.routes import errors

__all__ = ["router"]

router = APIRouter(prefix="/v1/queries", tags=["queries"])

NamePath = Annotated[
    str, Path(min_length=1, max_length=NAME_MAX, pattern=NAME_PATTERN, description="Query name.")
]
_AUTH = (401, 403)

M = TypeVar("M", bound=BaseModel)


def _body_of(model: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}},
            "required": True,
        }
    }


def read_body(body: bytes, model: type[M], max_values: int, key: str | None = None) -> M:
    """Parse and validate a JSON body (in a worker thread): 413 over ``max_values``, 400
    malformed (orjson's nesting limit, 1,024 levels, holds on every Python version), 422
    invalid in FastAPI's shape. ``key``: the list parsed piece by piece."""
    data = loads_in_pieces(body, key, max_values, "body") if key else loads(body, max_values, "body")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in err.errors(include_url=False)]
        ) from None


def _spec(query: QueryCreate | QueryValidate) -> QuerySpec:
    return {"text": query.text} if query.text is not None else {"pattern": query.pattern}


def _fields(info: QueryInfo, rate: float) -> dict[str, Any]:
    """A query's ``QueryPublic`` fields."""
    return {
        "name": info.name,
        "text": info.text,
        "kind": info.kind,
        "classes": list(info.classes),
        "window": info.window,
        "mode": info.mode,
        "partition": list(info.partition),
        "matches": info.matches,
        "last_match": info.last_match,
        "rate": rate,
        "at": info.at,
        "pending": info.pending,
        "deleting_at": info.deleting_at,
    }


def _public(info: QueryInfo, rate: float = 0.0) -> QueryPublic:
    return QueryPublic(**_fields(info, rate))


@router.post(
    "",
    status_code=201,
    response_model=QueryPublic,
    dependencies=[Admin],
    responses=errors(400, *_AUTH, 409, 413, 415, 422, 503),
    openapi_extra=_body_of("QueryCreate"),
    summary="Register a query",
)
async def create_query(request: Request, runtime: RuntimeDep, host: HostDep) -> QueryPublic:
    """Register a query given as text or as AST JSON. It sees the events posted from now
    on, or with ``at`` those from where the stream reaches that event time (pending
    until then; 409 if the stream is there already). 409 if the name is taken; 422 with
    line and column for text that does not parse or make sense; 413 over a size limit
    (docs/service.md)."""
    body = await request.body()
    query = await runtime.parse(read_body, body, QueryCreate, runtime.settings.max_json_values)
    [info] = await host.register([(query.name, _spec(query))], query.at)
    return _public(info)


@router.post(
    "/bulk",
    status_code=201,
    response_model=QueryBulkPublic,
    dependencies=[Admin],
    responses=errors(400, *_AUTH, 409, 413, 415, 422, 503),
    openapi_extra=_body_of("QueryBulkCreate"),
    summary="Register many queries, all or none",
)
async def create_queries(request: Request, runtime: RuntimeDep, host: HostDep) -> QueryBulkPublic:
    """Register the queries in order at one point of the stream: now, or with ``at``
    where the stream reaches that event time. If any is refused none is registered, and
    the error names its index and name."""
    body = await request.body()
    bulk = await runtime.parse(read_body, body, QueryBulkCreate, runtime.settings.max_json_values, "queries")
    for index, q in enumerate(bulk.queries):
        if q.at is not None:
            raise InvalidInputError(
                f"query {index} ({q.name}) gives 'at': give it once, for the whole bulk",
                index=index,
                field="at",
            )
    infos = await host.register([(q.name, _spec(q)) for q in bulk.queries], bulk.at)
    return QueryBulkPublic(queries=[_public(i) for i in infos])


@router.post(
    "/validate",
    response_model=QueryValid,
    dependencies=[Admin],
    responses=errors(400, *_AUTH, 409, 413, 415, 422, 503),
    openapi_extra=_body_of("QueryValidate"),
    summary="Check a query without registering it",
)
async def validate_query(request: Request, runtime: RuntimeDep, host: HostDep) -> QueryValid:
    """A dry run of ``POST /v1/queries``: the same checks and the same errors (422 with
    line and column, 409 for a taken name), but nothing is registered. 200 with the
    canonical text and summary when the query would be accepted. Without ``name`` the
    name is not checked. Admin role, as registering."""
    body = await request.body()
    query = await runtime.parse(read_body, body, QueryValidate, runtime.settings.max_json_values)
    info = await host.check(query.name, _spec(query))
    return QueryValid(
        name=query.name,
        text=info.text,
        kind=info.kind,  # type: ignore[arg-type]
        classes=list(info.classes),
        window=info.window,
        mode=info.mode,  # type: ignore[arg-type]
        partition=list(info.partition),
    )


@router.get(
    "",
    response_model=QueryList,
    dependencies=[AnyRole],
    responses=errors(*_AUTH, 503),
    summary="List queries",
)
async def list_queries(host: HostDep) -> Response:
    """Every registered query in registration order, with its match count and its
    matches per second over the last minute."""
    # Written without a model per query: the console reads the whole list every few
    # seconds, and with thousands of queries building and checking the models cost
    # ten times the rest (123 ms for 3,000 queries).
    rates = host.rates.per_second()
    return FastJSON({"queries": [_fields(i, rates.get(i.name, 0.0)) for i in host.queries()]})


@router.get(
    "/{name}",
    response_model=QueryPublic,
    dependencies=[AnyRole],
    responses=errors(*_AUTH, 404, 422, 503),
    summary="Show a query",
)
async def get_query(name: NamePath, host: HostDep) -> QueryPublic:
    """One query: its compiled summary, match count, the end time of its last match and
    its matches per second over the last minute."""
    return _public(host.query(name), host.rates.per_second().get(name, 0.0))


@router.delete(
    "/{name}",
    status_code=204,
    response_class=Response,
    dependencies=[Admin],
    responses={
        202: {
            "model": QueryPublic,
            "description": "The delete is held until the stream reaches at (the query's deleting_at).",
        },
        **errors(*_AUTH, 404, 409, 422, 503),
    },
    summary="Delete a query",
)
async def delete_query(
    name: NamePath,
    host: HostDep,
    at: Annotated[
        float | None,
        Query(
            description="Delete where the stream reaches this event time: the query matches every event "
            "with end < at and none after (202, listed with deleting_at until then; 409 when the stream "
            "is there already). Omitted: at once (204).",
        ),
    ] = None,
) -> Response:
    """Unregister a query, at once or where the stream reaches ``at``; its matches stay
    in the match log. 409 while other queries read it as ``@name`` (``dependents``
    names them): delete those first (with ``at``: first, or at a time up to ``at``)."""
    held = await host.unregister(name, at)
    if held is None:
        return Response(status_code=204)
    return FastJSON(_fields(held, host.rates.per_second().get(name, 0.0)), status_code=202)


@router.delete(
    "/{name}/deletion",
    response_model=QueryPublic,
    dependencies=[Admin],
    responses=errors(*_AUTH, 404, 409, 422, 503),
    summary="Cancel a held delete",
)
async def cancel_delete(name: NamePath, host: HostDep) -> QueryPublic:
    """Cancel the delete held for a query (``DELETE /v1/queries/{name}?at=T`` before the
    stream reached ``T``): the query stays. 409 when no delete is held for it."""
    return _public(await host.keep(name), host.rates.per_second().get(name, 0.0))
