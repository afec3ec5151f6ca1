"""The one error tree of scemon.

::

    ScemonError
     ├── QueryError              a query cannot be registered
     │    ├── ParseError         the text does not parse (line, column, token, excerpt)
     │    ├── SemanticError      it parses but does not make sense (unknown alias, ...)
     │    ├── DuplicateQueryError  the name is taken
     │    ├── UnknownQueryError    no query of that name
     │    └── BatchQueryError      one query of a batch was refused (so none was taken)
     └── EventError              an event is malformed (index or line, and field)
          └── AheadError         an event or time advance too far ahead of the clock

The service maps these to HTTP in one handler; the CLI prints ``str(error)`` on one line.
"""

from __future__ import annotations

__all__ = [
    "ScemonError",
    "QueryError",
    "ParseError",
    "SemanticError",
    "DuplicateQueryError",
    "UnknownQueryError",
    "BatchQueryError",
    "EventError",
    "AheadError",
]


class ScemonError(Exception):
    """Root of every error scemon raises on purpose."""


class QueryError(ScemonError):
    """A query cannot be registered or found."""


class ParseError(QueryError):
    """Query text that does not parse.

    ``line`` and ``column`` are 1-based; ``token`` is the offending token as written
    (empty at end of input); ``excerpt`` is the source line with a caret under the column.
    """

    def __init__(self, message: str, line: int, column: int, token: str, excerpt: str) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.token = token
        self.excerpt = excerpt
        where = f"line {line}, column {column}"
        shown = f" at {token!r}" if token else " at end of input"
        super().__init__(f"{message} ({where}{shown})\n{excerpt}")


class SemanticError(QueryError):
    """A query that parses but does not make sense.

    ``line``/``column``/``token`` locate the construct when the query came from text;
    they are ``None`` for queries given as AST JSON.
    """

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        token: str | None = None,
        excerpt: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.token = token
        self.excerpt = excerpt
        text = message
        if line is not None:
            text += f" (line {line}, column {column}"
            text += f" at {token!r})" if token else ")"
        if excerpt:
            text += "\n" + excerpt
        super().__init__(text)


class DuplicateQueryError(QueryError):
    """A query with that name is already registered."""


class UnknownQueryError(QueryError):
    """No registered query has that name."""


class BatchQueryError(QueryError):
    """One query of a batch (``Engine.register_many``) was refused, so none of the batch
    was registered: the query's own error (``inner``), its position in the batch
    (``index``, from 0) and its name (``name``)."""

    def __init__(self, inner: QueryError, index: int, name: str) -> None:
        self.inner = inner
        self.index = index
        self.name = name
        super().__init__(f"query {index} ({name!r}) of the batch: {inner}")


class EventError(ScemonError):
    """A malformed event. ``where`` names the line or index, ``field`` the bad field."""

    def __init__(self, message: str, where: str | None = None, field: str | None = None) -> None:
        self.message = message
        self.where = where
        self.field = field
        parts = []
        if where:
            parts.append(where)
        if field:
            parts.append(f"field {field!r}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class AheadError(EventError):
    """Event times (or a time advance) too far ahead of the clock to be believed: taken,
    they would move the one clock so far that every later event is late.

    ``index`` is the first refused event's position in the batch as given (None for a
    time advance), ``indexes`` every refused one, in that order.
    """

    def __init__(
        self,
        message: str,
        where: str | None = None,
        field: str | None = "end",
        index: int | None = None,
        indexes: tuple[int, ...] = (),
    ) -> None:
        self.index = index
        self.indexes = indexes
        super().__init__(message, where, field)
