"""``scemon parse``: check a queries file and print each query in canonical form."""

from __future__ import annotations

import typer

from service.cli.errors import user_errors
from service.cli.options import QueriesOption
from service.files.queries import build_engine, canonical_queries, read_queries

__all__ = ["parse"]


def parse(queries: QueriesOption) -> None:
    """Check a queries file and print each query in canonical form.

    Exits 1 with the file, line and column of the first query that does not parse or
    that the engine rejects.
    """
    with user_errors():
        specs = read_queries(queries)
        parsed = canonical_queries(specs, queries)
        build_engine(specs, queries)  # what the engine rejects beyond the grammar
    from ecq.language import format_query

    blocks = []
    for query in parsed:
        text = format_query(query).strip()
        if not text.upper().startswith("QUERY"):
            text = f"QUERY {query.name}\n{text}"
        blocks.append(text)
    typer.echo("\n\n".join(blocks))
