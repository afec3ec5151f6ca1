"""The query language: text (three surface forms) to one AST, and back.

``parse_query``/``parse_queries`` read text (raising :class:`ecq.errors.ParseError` with
line, column, token and a caret excerpt); ``format_query`` writes the canonical text;
the AST and its JSON form live in :mod:`ecq.language.ast`.
"""

from ecq.language.ast import *  # noqa: F403 - the AST is part of this package's interface
from ecq.language.ast import __all__ as _ast_names
from ecq.language.parser import parse_queries, parse_query
from ecq.language.printer import format_expr, format_pattern, format_query
from ecq.language.source import excerpt, semantic_error_at

__all__ = [
    *_ast_names,
    "parse_query",
    "parse_queries",
    "format_query",
    "format_pattern",
    "format_expr",
    "excerpt",
    "semantic_error_at",
]
