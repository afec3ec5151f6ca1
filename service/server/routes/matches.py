"""Matches: polled (``GET /v1/matches``) or streamed (``WS /v1/matches/ws``). Reader role.

Both read the match log by ``seq``; the WebSocket then switches to live matches from
the hub. A subscriber that falls behind by more than its queue bound is closed with
code 1008 and a reason that names the ``from_seq`` to resume from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from typing import Annotated

from fastapi import APIRouter, Query, Response, WebSocket
from starlette.concurrency import run_in_threadpool

from api.models import NAME_MAX, NAME_PATTERN, MatchPage
from ecq.errors import ScemonError, UnknownQueryError
from service.server.auth import READER, authorize, websocket_credentials
from service.server.blocks import Run, frames_of
from service.server.deps import Reader, RuntimeDep, StoreDep, runtime_of
from service.server.errors import ForbiddenError, GoneError, InvalidInputError
from service.server.faults import DamagedRows
from service.server.guard import foreign_origin
from service.server.handlers import error_body, status_of
from service.server.host import EngineHost
from service.server.hub import Subscriber
from service.server.memory import trimmer
from service.server.responses import FastJSON
from service.server.routes import errors
from service.server.store import Store

__all__ = ["router", "MAX_PAGE", "OVERFLOW_CODE"]

log = logging.getLogger("scemon.ws")

router = APIRouter(prefix="/v1/matches", tags=["matches"])

MAX_PAGE = 10_000
MAX_SEQ = 2**62  # SQLite integers are 64-bit; no real seq comes near
BACKLOG_PAGE = 1_000
# The most matches one message may carry (``batch=``): a frame stays a few MB at most.
MAX_FRAME = 10_000
OVERFLOW_CODE = 1008  # policy violation: the subscriber broke the queue bound
SHUTDOWN_CODE = 1001  # going away
DAMAGED_CODE = 1011  # the server met a condition it cannot serve past: damaged matches


async def _check_range(store: Store, from_seq: int) -> None:
    _, next_seq, first_seq = await run_in_threadpool(store.read_matches, from_seq, 0)
    _check_seq(from_seq, next_seq, first_seq)


def _check_seq(from_seq: int, next_seq: int, first_seq: int) -> None:
    if from_seq > next_seq:
        raise InvalidInputError(
            f"query parameter from_seq: {from_seq} is beyond the next seq {next_seq}", field="from_seq"
        )
    if from_seq < first_seq:
        raise GoneError(
            f"query parameter from_seq: matches before seq {first_seq} are no longer kept", field="from_seq"
        )


async def _check_queries(store: Store, host: EngineHost, names: frozenset[str]) -> None:
    known = {info.name for info in host.queries()}
    for name in sorted(names):
        if name not in known and not await run_in_threadpool(store.has_matches_of, name):
            raise UnknownQueryError(f"no query named {name!r} is registered or has matches")


@router.get(
    "",
    response_model=MatchPage,
    dependencies=[Reader],
    responses=errors(401, 403, 404, 410, 422, 503),
    summary="Poll matches by seq",
)
async def get_matches(
    runtime: RuntimeDep,
    store: StoreDep,
    from_seq: Annotated[int, Query(ge=0, le=MAX_SEQ, description="First seq to return.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Most matches to return.")] = 1000,
    query: Annotated[
        str | None,
        Query(
            min_length=1, max_length=NAME_MAX, pattern=NAME_PATTERN, description="Only this query's matches."
        ),
    ] = None,
) -> Response:
    """Matches with ``seq >= from_seq`` in ``seq`` order. Ask again with ``from_seq =
    next_seq``; an empty page means no newer match yet. 410 when ``from_seq`` is older
    than the match log keeps; 503 naming the seqs (``damaged_seqs``: ``[first, next)``)
    when the page would reach a match block that fails its checksum: it is never
    served; ``limit = first - from_seq`` reads the matches before it, ``from_seq =
    next`` those after."""
    names = frozenset({query}) if query is not None else None
    if names is not None:
        await _check_queries(store, runtime.host, names)
    runs, next_seq, first_seq = await run_in_threadpool(store.read_runs, from_seq, limit, names)
    _check_seq(from_seq, next_seq, first_seq)
    if sum(len(run) for run in runs) == limit:
        next_seq = runs[-1].last_seq + 1
    inside = ",".join(run.inside() for run in runs)
    body = '{"matches":[' + inside + '],"next_seq":' + str(next_seq) + "}"
    return Response(body.encode(), media_type="application/json")


def _parse_from_seq(text: str | None) -> int:
    if text is None or text == "":
        return 0
    try:
        value = int(text)
    except ValueError:
        raise InvalidInputError(
            f"query parameter from_seq: {text!r} is not an integer", field="from_seq"
        ) from None
    if value < 0:
        raise InvalidInputError(f"query parameter from_seq: {value} is negative", field="from_seq")
    if value > MAX_SEQ:
        raise InvalidInputError(f"query parameter from_seq: {value} is too large", field="from_seq")
    return value


def _parse_batch(text: str | None) -> int:
    """``batch``: 1 (default) sends one match per message, as a JSON object; more sends
    each message as a JSON array of up to that many matches."""
    if text is None or text == "":
        return 1
    try:
        value = int(text)
    except ValueError:
        raise InvalidInputError(f"query parameter batch: {text!r} is not an integer", field="batch") from None
    if not 1 <= value <= MAX_FRAME:
        raise InvalidInputError(f"query parameter batch: {value} is not within 1..{MAX_FRAME}", field="batch")
    return value


def _parse_queries(text: str | None) -> frozenset[str] | None:
    if text is None or not text.strip():
        return None
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if len(name) > NAME_MAX or not re.fullmatch(NAME_PATTERN, name):
            raise InvalidInputError(f"query parameter queries: {name!r} is not a query name", field="queries")
    return names


@router.websocket("/ws", name="subscribe")
async def subscribe(ws: WebSocket) -> None:
    """The backlog from the match log, then live matches, in ``seq`` order: one JSON
    match per text message, or with ``batch=N`` (1..10,000) a JSON array of up to N
    matches per message — whatever is ready, never waiting to fill one (a message per
    match costs more than the match: at 1,000 queries it was most of a subscriber's
    cost). Parameters: ``from_seq`` (default 0), ``queries`` (comma-separated names;
    default all) and ``batch`` (default 1). The token comes in the Authorization header,
    or, from a browser, as the subprotocol ``scemon.bearer.<base64url token>`` offered
    beside ``scemon`` (see :mod:`service.server.auth`)."""
    runtime = runtime_of(ws)
    authorization, protocol = websocket_credentials(
        ws.headers.get("authorization"), ws.headers.get("sec-websocket-protocol")
    )
    try:
        if not runtime.settings.auth_enabled:
            why = foreign_origin(ws.headers)
            if why is not None:  # another site's page would read the matches
                raise ForbiddenError(f"cross-site subscription refused: {why} (the server has no tokens)")
        authorize(runtime.settings, authorization, READER, "subscribing to matches")
        from_seq = _parse_from_seq(ws.query_params.get("from_seq"))
        queries = _parse_queries(ws.query_params.get("queries"))
        batch = _parse_batch(ws.query_params.get("batch"))
        if queries is not None:
            await _check_queries(runtime.store, runtime.host, queries)
        await _check_range(runtime.store, from_seq)
    except ScemonError as err:
        await _deny(ws, err)
        return
    await ws.accept(subprotocol=protocol)
    sub = runtime.hub.subscribe(queries)
    receiver = asyncio.create_task(_until_closed(ws))
    last = from_seq - 1
    try:
        last = await _stream(ws, runtime.store, sub, receiver, queries, last, batch)
        if sub.overflowed:
            reason = (
                f"subscriber queue overflow ({sub.limit} matches behind): resume with from_seq={last + 1}"
            )
            await ws.close(OVERFLOW_CODE, reason[:123])
        elif runtime.hub.closing:
            await ws.close(SHUTDOWN_CODE, f"server shutting down: resume with from_seq={last + 1}")
    except DamagedRows as err:
        # The backlog reached rows that fail their checksum: never sent; the subscriber
        # is told which seqs and where to resume (1011: the server cannot go on).
        if err.seqs is not None:
            first, after = err.seqs
            reason = f"matches {first}-{after - 1} are damaged in the store: resume with from_seq={after}"
        else:
            reason = f"the store is damaged ({err.where}): restore it from a backup"
        with contextlib.suppress(Exception):
            await ws.close(DAMAGED_CODE, reason[:123])
    except Exception as err:  # the client went away mid-send: nothing to tell it
        log.debug("subscriber gone: %s", err)
    finally:
        runtime.hub.unsubscribe(sub)
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await receiver
        if not runtime.hub and trimmer.due():  # the last one left: give memory back
            await asyncio.to_thread(trimmer)


async def _stream(
    ws: WebSocket,
    store: Store,
    sub: Subscriber,
    receiver: asyncio.Task[None],
    queries: frozenset[str] | None,
    last: int,
    batch: int = 1,
) -> int:
    """Send the backlog, then live matches, until overflow, shutdown or the client
    leaves; returns the last ``seq`` sent."""
    while not sub.overflowed and not receiver.done():
        # Until a read comes back empty: a page cut short by a damaged match block is
        # followed by a read that starts in it, which raises DamagedRows.
        runs, _, _ = await run_in_threadpool(store.read_runs, last + 1, BACKLOG_PAGE, queries, True, True)
        if not runs:
            break
        last = await _send(ws, sub, runs, last, batch)
    hub_closing = False
    while not sub.overflowed and not receiver.done() and not hub_closing:
        last = await _send(ws, sub, sub.take(), last, batch)
        if sub.overflowed or receiver.done():
            break
        waiter = asyncio.ensure_future(sub.wake.wait())
        await asyncio.wait({waiter, receiver}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        hub_closing = runtime_of(ws).hub.closing
    return last


async def _send(ws: WebSocket, sub: Subscriber, runs: list[Run], last: int, batch: int) -> int:
    """Send the matches after ``last`` (the backlog and the hub may both hold one), one
    per message or ``batch`` to an array, noting how long each send waits
    (``Hub.blocked``); returns the last ``seq`` sent. A message is whole or not at all
    on the client's side, so it resumes after the last one it got. A block taken whole
    goes out as its cached frames: the same text for every subscriber."""
    fresh = [cut for run in runs if (cut := run.after(last)) is not None]
    for seq, text, _ in frames_of(fresh, batch):
        sub.sending_since = time.monotonic()
        await ws.send_text(text)
        sub.sending_since = None
        last = seq
    return last


async def _until_closed(ws: WebSocket) -> None:
    """Read (and ignore) what the client sends until it closes."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return


async def _deny(ws: WebSocket, err: ScemonError) -> None:
    """Refuse the handshake with an HTTP answer in the usual error shape when the server
    supports it, else with a close frame carrying the message. Logged with its reason:
    WARNING for a refused credential or origin, INFO for a bad parameter."""
    status = status_of(err)
    client = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
    level = logging.WARNING if status in (401, 403) else logging.INFO
    log.log(level, "refused a subscription from %s: %d %s", client, status, str(err).split("\n", 1)[0])
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        await ws.send_denial_response(FastJSON({"detail": error_body(err)}, status_code=status))
    else:
        await ws.close(code=1008, reason=str(err).split("\n", 1)[0][:123])
