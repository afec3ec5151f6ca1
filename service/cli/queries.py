"""``scemon queries register`` / ``delete``: register one queries file, or delete a query,
on every service shard.

Sources are spread over shards by the Spark job, and every match is within one source,
so each shard must hold every query. Each shard gets one bulk call (all or nothing on
that shard); names a shard already has are skipped, so after a partial failure the same
command finishes the job instead of failing on the shards that were done.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from ecq.errors import ScemonError
from ecq.language.ast import to_json
from service.cli.errors import SPARK_MISSING, fail, user_errors
from service.cli.options import ServiceOption, TokenOption
from service.files.queries import read_queries

__all__ = ["delete", "queries_app", "query_bodies", "register", "register_everywhere"]

queries_app = typer.Typer(
    name="queries", help="Manage the queries of one or more services.", no_args_is_help=True
)


def query_bodies(path: Path) -> list[dict[str, Any]]:
    """The file's queries as REST bodies: ``{"name", "text"}`` for text the file gave as
    JSON, ``{"name", "pattern"}`` (AST JSON) for what was parsed here."""
    return [
        {"name": name, "text": spec} if isinstance(spec, str) else {"name": name, "pattern": to_json(spec)}
        for name, spec in read_queries(path)
    ]


def register_everywhere(
    urls: Sequence[str], path: Path, token: str | None = None, at: float | None = None
) -> Iterator[str]:
    """Register the file's queries on each shard in turn; yield one line per shard.
    Raises :class:`ScemonError` naming the shard that failed and those already done."""
    # Imported here, not with the module: `scemon --help` builds every command
    # (service/cli/app.py), and the client's imports (httpx, pydantic models) are slow.
    import httpx

    from api.client import ApiError, Client

    bodies = query_bodies(path)
    done: list[str] = []
    for url in urls:
        try:
            with Client(url, token=token) as client:
                have = {query.name for query in client.queries()}
                todo = [body for body in bodies if body["name"] not in have]
                if todo:
                    client.register_bulk(todo, at=at)
        except (ApiError, httpx.HTTPError) as err:
            reason = err.message if isinstance(err, ApiError) else f"not reachable ({err})"
            finished = f" (done: {', '.join(done)})" if done else ""
            raise ScemonError(f"{url}: {reason}{finished}; nothing was registered there") from None
        done.append(url)
        yield f"{url}: {len(todo)} registered, {len(bodies) - len(todo)} already there"


@queries_app.command("register")
def register(
    service: ServiceOption,
    queries: Annotated[
        Path,
        typer.Option(
            "--queries",
            "-q",
            help="Queries file, as for scemon replay (query text or JSON).",
            show_default=False,
        ),
    ],
    token: TokenOption = None,
    at: Annotated[
        float | None,
        typer.Option(
            "--at",
            help=(
                "Install the queries where the stream reaches this event time (seconds): pending until "
                "then; refused if the stream is past it. Default: at once."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """Register the queries of a file on every service shard, all at once per shard.

    Every match is within one source and sources are spread over the shards, so every
    shard needs every query. A query already registered under the same name is left as
    it is, so the command can be re-run after a shard was down. For one registration at
    the same point of every shard's stream, use `scemon cluster register`.
    """
    with user_errors(SPARK_MISSING):
        for line in register_everywhere(service, queries, token, at):
            typer.echo(line, err=True)


@queries_app.command("delete")
def delete(
    service: ServiceOption,
    name: Annotated[str, typer.Argument(help="The query's name.", show_default=False)],
    token: TokenOption = None,
    at: Annotated[
        float | None,
        typer.Option(
            "--at",
            help=(
                "Delete where the stream reaches this event time (seconds): the query matches every "
                "event before it and none after; refused if the stream is past it. Default: at once."
            ),
            show_default=False,
        ),
    ] = None,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel the query's held delete (one given --at) instead.")
    ] = False,
) -> None:
    """Delete a query on every service shard, one after the other.

    A shard that has no such query is passed over. For one delete at the same point of
    every shard's stream, all or none, use `scemon cluster delete`.
    """
    import math

    import httpx

    from api.client import ApiError, Client

    if at is not None and not math.isfinite(at):
        fail(f"--at must be a finite event time, not {at!r}")
    if at is not None and cancel:
        fail("give --at or --cancel, not both")
    done: list[str] = []
    for url in service:
        try:
            with Client(url, token=token) as client:
                if name not in {query.name for query in client.queries()}:
                    typer.echo(f"{url}: no query named {name}", err=True)
                    continue
                if cancel:
                    client.cancel_delete(name)
                    typer.echo(f"{url}: the delete of {name} is cancelled", err=True)
                else:
                    client.delete_query(name, at=at)
                    what = "deleted" if at is None else f"to be deleted at event time {at!r}"
                    typer.echo(f"{url}: {name} {what}", err=True)
        except (ApiError, httpx.HTTPError) as err:
            reason = err.message if isinstance(err, ApiError) else f"not reachable ({err})"
            finished = f" (done: {', '.join(done)})" if done else ""
            fail(f"{url}: {reason}{finished}; not changed there")
        done.append(url)
