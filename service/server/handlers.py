"""Every error a request can meet, mapped to HTTP in one place.

Each answer is ``{"detail": {"message", ...where}}`` (:class:`api.models.ErrorDetail`):
the message says what and where in words, the other fields locate it for programs.
FastAPI's own validation errors and Starlette's 404/405 are reshaped the same way, so a
client handles one error format. Anything unexpected is logged and answered 500 with the
same shape — a bug, never an answer to bad input.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ecq.errors import (
    DuplicateQueryError,
    EventError,
    ParseError,
    ScemonError,
    SemanticError,
    UnknownQueryError,
)
from service.server.errors import InBulkError, ServiceError, UnauthorizedError
from service.server.faults import DamagedRows, StoreFault
from service.server.responses import FastJSON

__all__ = ["error_body", "install", "status_of"]

log = logging.getLogger("scemon.http")


def status_of(err: ScemonError) -> int:
    if isinstance(err, InBulkError):
        return status_of(err.inner)
    if isinstance(err, ServiceError):
        return err.status
    if isinstance(err, DuplicateQueryError):
        return 409
    if isinstance(err, UnknownQueryError):
        return 404
    return 422  # ParseError, SemanticError, other QueryError, EventError


def error_body(err: ScemonError) -> dict[str, Any]:
    """The ``detail`` object for ``err``."""
    detail: dict[str, Any] = {"message": str(err).split("\n", 1)[0]}
    inner = err.inner if isinstance(err, InBulkError) else err
    if isinstance(inner, (ParseError, SemanticError)):
        detail["message"] = str(err).split("\n", 1)[0]
        for key in ("line", "column", "token"):
            value = getattr(inner, key)
            if value is not None:
                detail[key] = value
    elif isinstance(inner, EventError) and inner.field:
        detail["field"] = inner.field
    if isinstance(err, ServiceError):
        detail.update({k: v for k, v in err.where.items() if v is not None})
    return detail


def _answer(status: int, detail: dict[str, Any], headers: dict[str, str] | None = None) -> FastJSON:
    return FastJSON({"detail": detail}, status_code=status, headers=headers)


async def _scemon_error(request: Request, err: Exception) -> FastJSON:
    assert isinstance(err, ScemonError)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(err, UnauthorizedError) else None
    if isinstance(err, ServiceError) and err.retry_after is not None:
        headers = {"Retry-After": str(err.retry_after)}
    return _answer(status_of(err), error_body(err), headers)


async def _validation_error(request: Request, err: Exception) -> FastJSON:
    assert isinstance(err, RequestValidationError)
    errors = err.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    loc = [part for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx")
        position = ctx.get("error", "") if isinstance(ctx, dict) else ""
        return _answer(400, {"message": f"malformed JSON: {position}".rstrip(": ")})
    source = loc[0] if loc and loc[0] in ("query", "path", "header", "cookie") else "body"
    if source != "body":
        loc = loc[1:]
    where = _dotted(loc)
    label = {"query": "query parameter", "path": "path parameter"}.get(source, source)
    detail: dict[str, Any] = {
        "message": f"{label} {where}: {first.get('msg', 'invalid')}" if where else first["msg"]
    }
    fields = [part for part in loc if isinstance(part, str)]
    if fields:
        detail["field"] = fields[-1]
    indexes = [part for part in loc if isinstance(part, int)]
    if indexes:
        detail["index"] = indexes[0]
    return _answer(422, detail)


def _dotted(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def _http_error(request: Request, err: Exception) -> FastJSON:
    assert isinstance(err, StarletteHTTPException)
    if err.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif err.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif err.status_code == 400 and "parsing the body" in str(err.detail):
        message = "malformed body: it could not be parsed as JSON"
    else:
        message = str(err.detail)
    return _answer(err.status_code, {"message": message}, dict(err.headers) if err.headers else None)


async def _store_fault(request: Request, err: Exception) -> FastJSON:
    """A read the store refused (a write's fault is the host's UnavailableError)."""
    assert isinstance(err, StoreFault)
    log.error("%s %s: %s", request.method, request.url.path, err)
    return _answer(503, {"message": str(err)}, {"Retry-After": "1"} if err.passes else None)


def damaged_message(err: DamagedRows) -> str:
    """What a reader is told of a damaged part of the store, and how to go on."""
    if err.seqs is None:
        return f"{err}; it is not served: restore the store from a backup"
    first, after = err.seqs
    return (
        f"{err}; matches {first} to {after - 1} are not served (those before them read with "
        f"limit up to {first} - from_seq, those after from from_seq={after}); restore the store from a "
        "backup for them"
    )


async def _damaged_rows(request: Request, err: Exception) -> FastJSON:
    """A read met rows that fail their checksum: 503 naming them (never their altered
    content); no Retry-After, as asking again finds the same bytes."""
    assert isinstance(err, DamagedRows)
    body: dict[str, Any] = {"message": damaged_message(err)}
    if err.seqs is not None:
        body["damaged_seqs"] = list(err.seqs)
    return _answer(503, body)


async def _unexpected(request: Request, err: Exception) -> FastJSON:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return _answer(500, {"message": f"internal error ({type(err).__name__}); this is a bug"})


def install(app: FastAPI) -> None:
    """Attach the handlers to ``app``."""
    app.add_exception_handler(ScemonError, _scemon_error)
    app.add_exception_handler(StoreFault, _store_fault)
    app.add_exception_handler(DamagedRows, _damaged_rows)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
