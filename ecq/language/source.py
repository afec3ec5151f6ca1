"""Pointing into query text: the excerpt with a caret that every located error carries.

Shared by the lexer, the parser and (through :func:`semantic_error_at`) the compiler, so
that all errors about a query look alike.
"""

from __future__ import annotations

from ecq.errors import SemanticError

__all__ = ["excerpt", "semantic_error_at"]


def excerpt(text: str, line: int, column: int) -> str:
    """The source line ``line`` followed by a line with ``^`` under ``column`` (1-based).

    Lines are those of :meth:`str.splitlines`; tabs before the column are repeated in the
    caret line so the caret lines up in a terminal. Past the last line the source line is
    empty.
    """
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    pad = "".join("\t" if ch == "\t" else " " for ch in source[: column - 1])
    pad += " " * max(0, column - 1 - len(source))
    return f"{source}\n{pad}^"


def semantic_error_at(message: str, span: tuple[int, int, str] | None, text: str | None) -> SemanticError:
    """A :class:`SemanticError` located at ``span`` (an entry of ``Query.spans``), with an
    excerpt when the query text is known."""
    if span is None:
        return SemanticError(message)
    line, column, token = span
    return SemanticError(
        message, line, column, token, excerpt(text, line, column) if text is not None else None
    )
