"""Errors the service raises on purpose, below :class:`ecq.errors.ScemonError`.

::

    ScemonError                       (ecq/errors.py)
     ├── QueryError ...               422 (parse/semantic), 409 (duplicate), 404 (unknown)
     ├── EventError                   422, naming the event's index and field
     └── ServiceError                 carries its own HTTP status and location fields
          ├── BadRequestError         400  malformed JSON or Arrow
          ├── UnauthorizedError       401  no or unknown bearer token
          ├── ForbiddenError          403  the token's role may not do this
          ├── NotFoundError           404  unknown query name
          ├── ConflictError           409  a query name taken inside a bulk call
          ├── GoneError               410  from_seq older than the match log keeps
          ├── UnsupportedMediaError   415  neither JSON nor Arrow
          ├── InvalidInputError       422  well-formed but wrong (types, fields, from_seq)
          ├── PayloadTooLargeError    413  body or batch over the limit
          └── UnavailableError        503  the engine is not ready or failed
               └── BufferFullError    503  the reorder buffer is at its cap (Retry-After)

:mod:`service.server.handlers` maps the whole tree to HTTP in one place.
"""

from __future__ import annotations

from typing import Any

from ecq.errors import ScemonError

__all__ = [
    "BadRequestError",
    "BufferFullError",
    "ConflictError",
    "InBulkError",
    "ForbiddenError",
    "GoneError",
    "InvalidInputError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ServiceError",
    "UnauthorizedError",
    "UnavailableError",
    "UnsupportedMediaError",
]


class ServiceError(ScemonError):
    """A request the service refuses. ``where`` holds location fields of
    :class:`api.models.ErrorDetail` (``index``, ``field``, ``query``...)."""

    status = 400
    # Seconds for a Retry-After header: when to try again (503 answers that will pass).
    retry_after: int | None = None

    def __init__(self, message: str, **where: Any) -> None:
        self.message = message
        self.where = where
        super().__init__(message)


class BadRequestError(ServiceError):
    status = 400


class UnauthorizedError(ServiceError):
    status = 401


class ForbiddenError(ServiceError):
    status = 403


class NotFoundError(ServiceError):
    status = 404


class ConflictError(ServiceError):
    status = 409


class GoneError(ServiceError):
    status = 410


class PayloadTooLargeError(ServiceError):
    status = 413


class UnsupportedMediaError(ServiceError):
    status = 415


class InvalidInputError(ServiceError):
    status = 422


class UnavailableError(ServiceError):
    """503; ``retry_after`` (seconds) becomes the ``Retry-After`` header: when asking
    again is worth it (the engine rebuilding, the store probed for space)."""

    status = 503

    def __init__(self, message: str, retry_after: int | None = None, **where: Any) -> None:
        if retry_after is not None:
            self.retry_after = retry_after
        super().__init__(message, **where)


class BufferFullError(UnavailableError):
    """The batch would leave more events held in the reorder buffer than its cap: it is
    not applied (never dropped); send it again once time has moved on."""

    retry_after = 1


class InBulkError(ServiceError):
    """One query of a bulk registration was refused, so none was registered: carries the
    query's own error with its position in the call and its name."""

    def __init__(self, inner: ScemonError, index: int, name: str) -> None:
        self.inner = inner
        first = str(inner).split("\n", 1)[0]
        super().__init__(f"query {index} ({name!r}): {first}", index=index, query=name)
