"""``scemon cluster ...``: the shards of a cluster used as one service (api/cluster.py).

The cluster spec is the ``--service`` list, in the order the Spark job routes by (or
``SCEMON_CLUSTER``, the URLs separated by commas). Registration and deletion are all or
none over the shards; ``subscribe`` merges every shard's matches under one resumable
cursor; ``stats`` and ``metrics`` cover the whole cluster; ``slots`` shows the slot map
and ``move`` moves slots (or rebalances onto a new shard list) with their partial
matches.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer

from service.cli.errors import fail, user_errors
from service.cli.options import QueriesOption, TokenOption

if TYPE_CHECKING:
    from api.cluster import Cluster
    from api.routing import SlotMap

__all__ = ["cluster_app"]

cluster_app = typer.Typer(
    name="cluster",
    help="Use the shards of a cluster as one service: register once, subscribe once, one set of figures.",
    no_args_is_help=True,
)

ShardsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--service",
        "-s",
        help="Base URL of a shard, repeated for each, in the Spark job's --service order "
        "(default: SCEMON_CLUSTER, the URLs separated by commas).",
        show_default=False,
    ),
]
SeedOption = Annotated[
    str | None,
    typer.Option(
        "--seed",
        help="Base URL of one shard that knows the others (its SCEMON_CLUSTER), instead of --service.",
        show_default=False,
    ),
]


def _spec(service: list[str] | None, seed: str | None, token: str | None) -> list[str]:
    from api.cluster import seed_shards

    if service and seed:
        fail("give --service for each shard or one --seed, not both")
    if seed:
        return seed_shards(seed, token)
    if service:
        return service
    env = os.environ.get("SCEMON_CLUSTER", "")
    if not env.strip():
        fail("no shards: give --service URL for each shard, --seed URL, or SCEMON_CLUSTER")
    return [env]


@contextmanager
def _cluster(
    service: list[str] | None, token: str | None, seed: str | None = None, recover: float = 30.0
) -> Iterator[Cluster]:
    """The cluster, with every mistake a user can make turned into one line on stderr
    (the per-shard outcome of a failed write before it)."""
    # Imported here: `scemon --help` builds every command (service/cli/app.py) and need
    # not pay for the HTTP client.
    import httpx

    from api.client import ApiError
    from api.cluster import Cluster, ClusterError

    with user_errors():
        try:
            with Cluster(_spec(service, seed, token), token=token, recover=recover) as cluster:
                yield cluster
        except ClusterError as err:
            for url, what in err.shards.items():
                typer.echo(f"{url}: {what}", err=True)
            fail(err.message)
        except ApiError as err:
            fail(err.message or str(err))
        except httpx.HTTPError as err:
            fail(f"a shard is not reachable ({err})")
        except ValueError as err:
            fail(str(err))


def _at(value: str) -> float | str:
    """``--at``: an event time, ``next`` or ``now``."""
    if value in ("next", "now"):
        return value
    try:
        at = float(value)
    except ValueError:
        fail(f"--at must be an event time in seconds, 'next' or 'now', not {value!r}")
    if not math.isfinite(at):
        fail(f"--at must be a finite event time, not {value!r}")
    return at


@cluster_app.command("register")
def register(
    queries: QueriesOption,
    service: ShardsOption = None,
    seed: SeedOption = None,
    token: TokenOption = None,
    at: Annotated[
        str,
        typer.Option(
            "--at",
            help=(
                "Where in the stream: 'next' (an event time after every shard's clock, so that every "
                "shard installs the queries at the same point), an event time in seconds, or 'now' "
                "(each shard as the call reaches it)."
            ),
        ),
    ] = "next",
) -> None:
    """Register a queries file on every shard, all or none, at one point of the stream.

    A shard down or refusing leaves every shard unchanged, and says which and why; a
    shard that breaks off midway has the others rolled back. The queries are pending
    until each shard's stream reaches the registration's event time (printed).
    """
    from service.cli.queries import query_bodies

    when = _at(at)
    with user_errors():
        bodies = query_bodies(queries)
    with _cluster(service, token, seed) as cluster:
        infos = cluster.register_bulk(bodies, at=when)
        point = f" at event time {infos[0].at!r}" if infos and infos[0].at is not None else ""
        typer.echo(f"{len(infos)} queries registered on {len(cluster.urls)} shards{point}", err=True)


@cluster_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The query's name.", show_default=False)],
    service: ShardsOption = None,
    seed: SeedOption = None,
    token: TokenOption = None,
    at: Annotated[
        str,
        typer.Option(
            "--at",
            help=(
                "Where in the stream: 'next' (an event time after every shard's clock, so that every "
                "shard deletes the query at the same point: it matches every event before it), an "
                "event time in seconds, or 'now' (each shard as the call reaches it)."
            ),
        ),
    ] = "next",
    cancel: Annotated[
        bool,
        typer.Option("--cancel", help="Cancel the query's held delete on every shard instead."),
    ] = False,
) -> None:
    """Delete a query on every shard, all or none, at one point of the stream.

    Every shard must be up and have it. A shard down or refusing leaves no shard
    holding the delete, and says which and why. The query is listed with its
    deleting_at until each shard's stream reaches the delete's event time (printed).
    """
    when = _at(at)
    with _cluster(service, token, seed) as cluster:
        if cancel:
            cluster.cancel_delete(name)
            typer.echo(f"the delete of {name} is cancelled on {len(cluster.urls)} shards", err=True)
            return
        point = cluster.delete_query(name, at=when)
        if point is None:
            typer.echo(f"{name} deleted on {len(cluster.urls)} shards", err=True)
        else:
            typer.echo(
                f"{name} to be deleted on {len(cluster.urls)} shards at event time {point!r}", err=True
            )


@cluster_app.command("queries")
def queries(service: ShardsOption = None, seed: SeedOption = None, token: TokenOption = None) -> None:
    """The cluster's queries, one JSON object a line, match counts summed over shards."""
    with _cluster(service, token, seed) as cluster:
        for query in cluster.queries():
            typer.echo(query.model_dump_json())


@cluster_app.command("repair")
def repair(service: ShardsOption = None, seed: SeedOption = None, token: TokenOption = None) -> None:
    """Settle what an interrupted register or delete left.

    A query on some shards but not every one is deleted where it is (unless a held
    delete removes it there); a held delete some shards hold and others not is
    cancelled. Every shard must be up; safe at any time.
    """
    with _cluster(service, token, seed) as cluster:
        removed = cluster.repair()
        for name, urls in sorted(removed.items()):
            typer.echo(f"{name}: deleted on {', '.join(urls)}", err=True)
        typer.echo(f"every shard holds the same queries ({len(removed)} settled)", err=True)


@cluster_app.command("stats")
def stats(
    service: ShardsOption = None,
    seed: SeedOption = None,
    token: TokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="The figures as one JSON object.")] = False,
) -> None:
    """Every shard's figures and their sums."""
    with _cluster(service, token, seed) as cluster:
        figures = cluster.stats()
    if as_json:
        typer.echo(
            orjson.dumps(
                {
                    "total": figures.total,
                    "clock_min": figures.clock_min,
                    "clock_max": figures.clock_max,
                    "down": figures.down,
                    "shards": {url: s.model_dump(mode="json") for url, s in figures.shards.items()},
                }
            ).decode()
        )
        return
    typer.echo(f"{'shard':<32} {'state':<10} {'events':>12} {'matches':>12} {'queries':>8} {'clock':>14}")
    for url in cluster.urls:
        s = figures.shards.get(url)
        if s is None:
            typer.echo(f"{url:<32} {'down':<10} {figures.down[url]}")
            continue
        clock = "-" if s.clock is None else f"{s.clock:.3f}"
        queries_ = s.engine.get("queries", 0)
        typer.echo(f"{url:<32} {s.state:<10} {s.events:>12} {s.matches:>12} {queries_!s:>8} {clock:>14}")
    t = figures.total
    typer.echo(
        f"{'total':<32} {len(figures.shards)} up{'':<5} {t['events']:>12} {t['matches']:>12} "
        f"{t['engine_queries']:>8}"
    )


@cluster_app.command("metrics")
def metrics(service: ShardsOption = None, seed: SeedOption = None, token: TokenOption = None) -> None:
    """Every shard's Prometheus metrics as one exposition, labelled shard="<url>"."""
    with _cluster(service, token, seed) as cluster:
        typer.echo(cluster.metrics(), nl=False)


@cluster_app.command("subscribe")
def subscribe(
    service: ShardsOption = None,
    seed: SeedOption = None,
    token: TokenOption = None,
    cursor: Annotated[
        str | None, typer.Option(help="Resume after what this cursor says was taken.", show_default=False)
    ] = None,
    cursor_file: Annotated[
        Path | None,
        typer.Option(
            "--cursor-file",
            help="Resume from the cursor in this file (if it exists) and keep it there after each message.",
            show_default=False,
        ),
    ] = None,
    query: Annotated[
        list[str] | None, typer.Option("--query", "-q", help="Only this query's matches (repeat).")
    ] = None,
    idle_timeout: Annotated[
        float | None,
        typer.Option("--idle-timeout", help="Stop when no shard sent a match for this many seconds."),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Stop after this many matches.", min=1)] = None,
) -> None:
    """Every shard's matches as JSON Lines, under one resumable cursor.

    Each match has "shard" (its position in the --service list); a shard that goes away
    is resumed when it returns. At the end the cursor is printed on stderr: --cursor
    resumes right after the last match.
    """
    from api.cluster import SyncClusterSubscription

    if cursor is None and cursor_file is not None and cursor_file.exists():
        with user_errors():
            cursor = cursor_file.read_text().strip() or None
    taken = 0
    with _cluster(service, token, seed) as cluster:
        sub = SyncClusterSubscription(
            cluster.urls, cursor=cursor, queries=query, token=token, idle_timeout=idle_timeout
        )
        try:
            for matches in sub.batches():
                if limit is not None and taken + len(matches) > limit:
                    matches = matches[: limit - taken]
                    sub.took(matches[-1])
                typer.echo("\n".join(orjson.dumps(m).decode() for m in matches))
                taken += len(matches)
                if cursor_file is not None:
                    _write_atomically(cursor_file, sub.cursor)
                if limit is not None and taken >= limit:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            typer.echo(f"cursor: {sub.cursor}", err=True)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n")
    tmp.replace(path)


@cluster_app.command("slots")
def slots(
    service: ShardsOption = None,
    seed: SeedOption = None,
    token: TokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="The map as one JSON object.")] = False,
) -> None:
    """Show the slot map: which shard owns which of the 4096 slots.

    A value of any partition key belongs to slot crc32(text) mod 4096; one line per run
    of slots with the same owner, then each shard's count.
    """
    with _cluster(service, token, seed) as cluster:
        found = cluster.slot_map()
    if as_json:
        typer.echo(orjson.dumps(found.to_json()).decode())
        return
    typer.echo(f"slot map epoch {found.epoch}: {found.count} shards, {len(found.owners)} slots")
    for k, url in enumerate(found.shards):
        mine = found.slots_of(k)
        typer.echo(f"{url:<32} {len(mine):>5} slots  {_runs(mine)}")


def _runs(slots: list[int], width: int = 60) -> str:
    """Slots as runs (``0-3,7,9-12``), cut at ``width`` characters (``--json`` has all)."""
    runs: list[list[int]] = []
    for slot in slots:
        if runs and slot == runs[-1][1] + 1:
            runs[-1][1] = slot
        else:
            runs.append([slot, slot])
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return text if len(text) <= width else text[: text.rfind(",", 0, width)] + ",... (--json: every slot)"


@cluster_app.command("move")
def move(
    slots_: Annotated[
        str | None,
        typer.Option(
            "--slots", help="The slots to move: 7, 0-1023 or 1,5,10-12 (with --to).", show_default=False
        ),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to", help="The shard to move them to (a new one joins the shard list).", show_default=False
        ),
    ] = None,
    onto: Annotated[
        list[str] | None,
        typer.Option(
            "--onto",
            help="Rebalance: the new shard list, repeated for each shard in order (the slots are "
            "spread evenly, moving as few as possible; a shard left out gives all of its up).",
            show_default=False,
        ),
    ] = None,
    service: ShardsOption = None,
    seed: SeedOption = None,
    token: TokenOption = None,
) -> None:
    """Move slots between shards, their partial matches with them.

    Either --slots and --to, or --onto with the new shard list. Every shard is fenced
    (event batches wait) while the moved slots' retained events are replayed on their
    new owners; no match is lost or given twice. The same move again changes nothing.
    """
    from api.routing import parse_slots

    if onto and (slots_ is not None or to is not None):
        fail("give --slots with --to, or --onto, not both")
    if not onto and (slots_ is None or to is None):
        fail("give --slots with --to (move slots to a shard), or --onto for each shard (rebalance)")
    wanted: list[int] = []
    if slots_ is not None:
        try:
            wanted = parse_slots(slots_)
        except ValueError as err:
            fail(f"--slots: {err}")
    with _cluster(service, token, seed) as cluster:
        before = cluster.slot_map()
        if onto:
            after = cluster.rebalance(onto)
        else:
            assert to is not None
            after = cluster.move_slots(wanted, to)
        if after == before:
            typer.echo(f"nothing to move: the map is already so (epoch {before.epoch})", err=True)
            return
        moved = sum(1 for s in range(len(after.owners)) if _owner(before, s) != _owner(after, s))
        typer.echo(f"{moved} slots moved; slot map epoch {after.epoch} on {after.count} shards", err=True)


def _owner(found: SlotMap, slot: int) -> str:
    return found.shards[found.owners[slot]]
