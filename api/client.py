"""Clients of the scemon REST API and its WebSocket subscriptions.

- :class:`Client` (sync, httpx) and :class:`AsyncClient` (async, httpx): one method per
  route, taking and returning the wire models of :mod:`api.models`. A 4xx/5xx answer
  raises :class:`ApiError` carrying the server's ``detail``.
- :class:`Subscription` (async) and :class:`SyncSubscription`: iterate over matches from
  ``/v1/matches/ws``. When the connection drops — network, server restart, or the server
  cutting off a subscriber that fell behind — they reconnect with ``from_seq`` = the last
  ``seq`` seen + 1, so the consumer sees every match once, in ``seq`` order.

Nothing here imports the server: the models are the contract.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson
import websockets
from websockets.asyncio.client import connect as ws_connect
from websockets.sync.client import connect as ws_connect_sync

from api.models import (
    ARROW_MEDIA_TYPE,
    BATCH_HEADER,
    PRODUCER_HEADER,
    BatchResult,
    ClusterRouting,
    ClusterSlots,
    EventIn,
    Identity,
    MatchPage,
    QueryBulkPublic,
    QueryCreate,
    QueryList,
    QueryPublic,
    QueryValid,
    SlotExport,
    Stats,
    TimeResult,
)
from api.routing import EPOCH_HEADER

__all__ = ["ApiError", "AsyncClient", "Client", "Subscription", "SyncSubscription"]

EventLike = Mapping[str, Any] | EventIn
QueryLike = Mapping[str, Any] | QueryCreate


class ApiError(Exception):
    """The server refused a request: ``status`` and the ``detail`` object it sent
    (``message`` and location fields)."""

    def __init__(self, status: int, detail: dict[str, Any]) -> None:
        self.status = status
        self.detail = detail
        self.message = str(detail.get("message", ""))
        super().__init__(f"{status}: {self.message}")


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    if not isinstance(detail, dict):
        detail = {"message": str(detail) if detail is not None else response.text}
    raise ApiError(response.status_code, detail)


def _event_dict(event: EventLike) -> Mapping[str, Any]:
    return event.model_dump(exclude_none=True) if isinstance(event, EventIn) else event


def _query_dict(query: QueryLike) -> Mapping[str, Any]:
    return query.model_dump(exclude_none=True) if isinstance(query, QueryCreate) else query


def _query_body(name: str | None, text: str | None, pattern: Mapping[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {} if name is None else {"name": name}
    if text is not None:
        body["text"] = text
    if pattern is not None:
        body["pattern"] = dict(pattern)
    return body


def _with_at(body: dict[str, Any], at: float | None) -> dict[str, Any]:
    """``body`` with the event time to register at, when one is given."""
    return body if at is None else {**body, "at": at}


def _at_param(at: float | None) -> dict[str, str]:
    """The query string of a delete at an event time (``repr``: the float exactly)."""
    return {} if at is None else {"at": repr(float(at))}


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def arrow_bytes(table: Any) -> bytes:
    """A ``pyarrow.Table`` as an Arrow IPC stream (pyarrow is imported only here)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _json(payload: Any) -> tuple[bytes, dict[str, str]]:
    return orjson.dumps(payload), {"Content-Type": "application/json"}


def _late(late_events: int | None) -> dict[str, int]:
    return {} if late_events is None else {"late_events": late_events}


class Client:
    """Synchronous client. ``Client("http://127.0.0.1:8080", token="...")``."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._http = httpx.Client(base_url=self.base_url, headers=_headers(token), timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        _raise_for(response)
        return response

    # queries
    def register(
        self,
        name: str,
        text: str | None = None,
        pattern: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> QueryPublic:
        """Register a query: at once, or with ``at`` where the stream reaches that event
        time (pending until then; :class:`ApiError` 409 when the stream is there)."""
        body, headers = _json(_with_at(_query_body(name, text, pattern), at))
        return QueryPublic.model_validate_json(
            self._send("POST", "/v1/queries", content=body, headers=headers).content
        )

    def register_bulk(self, queries: Iterable[QueryLike], at: float | None = None) -> list[QueryPublic]:
        body, headers = _json(_with_at({"queries": [_query_dict(q) for q in queries]}, at))
        response = self._send("POST", "/v1/queries/bulk", content=body, headers=headers)
        return QueryBulkPublic.model_validate_json(response.content).queries

    def queries(self) -> list[QueryPublic]:
        return QueryList.model_validate_json(self._send("GET", "/v1/queries").content).queries

    def query(self, name: str) -> QueryPublic:
        return QueryPublic.model_validate_json(self._send("GET", f"/v1/queries/{name}").content)

    def delete_query(self, name: str, at: float | None = None) -> QueryPublic | None:
        """Delete a query: at once (None), or with ``at`` where the stream reaches that
        event time — it matches every event with ``end < at`` until then — returning the
        query as listed meanwhile (``deleting_at``; :class:`ApiError` 409 when the stream
        is there)."""
        response = self._send("DELETE", f"/v1/queries/{name}", params=_at_param(at))
        return None if response.status_code == 204 else QueryPublic.model_validate_json(response.content)

    def cancel_delete(self, name: str) -> QueryPublic:
        """Cancel the delete held for a query (:class:`ApiError` 409 when none is)."""
        return QueryPublic.model_validate_json(self._send("DELETE", f"/v1/queries/{name}/deletion").content)

    def validate(
        self, text: str | None = None, pattern: Mapping[str, Any] | None = None, name: str | None = None
    ) -> QueryValid:
        """Check a query as :meth:`register` would, registering nothing (ApiError if refused)."""
        body, headers = _json(_query_body(name, text, pattern))
        return QueryValid.model_validate_json(
            self._send("POST", "/v1/queries/validate", content=body, headers=headers).content
        )

    # events
    def post_events(
        self, producer: str, batch_id: str | int, events: Sequence[EventLike], late_events: int | None = None
    ) -> BatchResult:
        """Post a batch as JSON; ``late_events``: how many late events the answer lists."""
        payload = {"producer": producer, "batch_id": batch_id, "events": [_event_dict(e) for e in events]}
        body, headers = _json(payload)
        response = self._send("POST", "/v1/events", content=body, headers=headers, params=_late(late_events))
        return BatchResult.model_validate_json(response.content)

    def post_arrow(
        self,
        producer: str,
        batch_id: str | int,
        stream: bytes | Any,
        late_events: int | None = None,
        epoch: int | None = None,
    ) -> BatchResult:
        """Post a batch as Arrow: ``stream`` is IPC stream bytes or a ``pyarrow.Table``;
        ``epoch``: the slot map it was routed by (a shard holding another answers 409)."""
        body = stream if isinstance(stream, bytes | bytearray) else arrow_bytes(stream)
        headers = {"Content-Type": ARROW_MEDIA_TYPE, PRODUCER_HEADER: producer, BATCH_HEADER: str(batch_id)}
        if epoch is not None:
            headers[EPOCH_HEADER] = str(epoch)
        response = self._send("POST", "/v1/events", content=body, headers=headers, params=_late(late_events))
        return BatchResult.model_validate_json(response.content)

    def advance_time(self, t: float) -> TimeResult:
        body, headers = _json({"time": t})
        return TimeResult.model_validate_json(
            self._send("POST", "/v1/time", content=body, headers=headers).content
        )

    # matches
    def matches(self, from_seq: int = 0, limit: int = 1000, query: str | None = None) -> MatchPage:
        params: dict[str, Any] = {"from_seq": from_seq, "limit": limit}
        if query is not None:
            params["query"] = query
        return MatchPage.model_validate_json(self._send("GET", "/v1/matches", params=params).content)

    def all_matches(
        self, from_seq: int = 0, query: str | None = None, page: int = 5000
    ) -> list[dict[str, Any]]:
        """Every match from ``from_seq`` up to the newest, as plain dicts."""
        out: list[dict[str, Any]] = []
        while True:
            params: dict[str, Any] = {"from_seq": from_seq, "limit": page}
            if query is not None:
                params["query"] = query
            data = orjson.loads(self._send("GET", "/v1/matches", params=params).content)
            out += data["matches"]
            if len(data["matches"]) < page:
                return out
            from_seq = data["next_seq"]

    # health
    def ready(self) -> bool:
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def metrics(self) -> str:
        return self._send("GET", "/metrics").text

    def stats(self) -> Stats:
        return Stats.model_validate_json(self._send("GET", "/v1/stats").content)

    def whoami(self) -> Identity:
        return Identity.model_validate_json(self._send("GET", "/v1/whoami").content)

    def routing(self) -> ClusterRouting:
        """This shard's place in its cluster and the partition keys its queries use."""
        return ClusterRouting.model_validate_json(self._send("GET", "/v1/cluster/routing").content)

    # The slot map and its moves (api.cluster.Cluster.apply_slots drives them).
    def slots(self) -> ClusterSlots:
        """The slot map this shard holds and its place in it."""
        return ClusterSlots.model_validate_json(self._send("GET", "/v1/cluster/slots").content)

    def fence(self, on: bool) -> ClusterSlots:
        """Fence the shard for a move (event batches refused with 503), or end it."""
        body, headers = _json({"on": on})
        return ClusterSlots.model_validate_json(
            self._send("POST", "/v1/cluster/slots/fence", content=body, headers=headers).content
        )

    def export_slots(self, slots: Iterable[int]) -> list[dict[str, Any]]:
        """The retained events of ``slots`` (the shard must be fenced)."""
        body, headers = _json({"slots": sorted(set(slots))})
        answer = self._send("POST", "/v1/cluster/slots/export", content=body, headers=headers)
        return SlotExport.model_validate_json(answer.content).events

    def put_slots(
        self,
        slots: Mapping[str, Any],
        me: int | None,
        events: Sequence[Mapping[str, Any]] = (),
        batches: Mapping[str, int] | None = None,
    ) -> ClusterSlots:
        """Give the shard a new slot map (``SlotMap.to_json()``), its place,
        and the events of the slots it gains."""
        body, headers = _json(
            {"map": dict(slots), "me": me, "events": list(events), "batches": dict(batches or {})}
        )
        return ClusterSlots.model_validate_json(
            self._send("PUT", "/v1/cluster/slots", content=body, headers=headers).content
        )


class AsyncClient:
    """Asynchronous client with the same methods as :class:`Client`."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=_headers(token), timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = await self._http.request(method, path, **kwargs)
        _raise_for(response)
        return response

    async def register(
        self,
        name: str,
        text: str | None = None,
        pattern: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> QueryPublic:
        body, headers = _json(_with_at(_query_body(name, text, pattern), at))
        response = await self._send("POST", "/v1/queries", content=body, headers=headers)
        return QueryPublic.model_validate_json(response.content)

    async def register_bulk(self, queries: Iterable[QueryLike], at: float | None = None) -> list[QueryPublic]:
        body, headers = _json(_with_at({"queries": [_query_dict(q) for q in queries]}, at))
        response = await self._send("POST", "/v1/queries/bulk", content=body, headers=headers)
        return QueryBulkPublic.model_validate_json(response.content).queries

    async def queries(self) -> list[QueryPublic]:
        return QueryList.model_validate_json((await self._send("GET", "/v1/queries")).content).queries

    async def query(self, name: str) -> QueryPublic:
        return QueryPublic.model_validate_json((await self._send("GET", f"/v1/queries/{name}")).content)

    async def delete_query(self, name: str, at: float | None = None) -> QueryPublic | None:
        response = await self._send("DELETE", f"/v1/queries/{name}", params=_at_param(at))
        return None if response.status_code == 204 else QueryPublic.model_validate_json(response.content)

    async def cancel_delete(self, name: str) -> QueryPublic:
        response = await self._send("DELETE", f"/v1/queries/{name}/deletion")
        return QueryPublic.model_validate_json(response.content)

    async def validate(
        self, text: str | None = None, pattern: Mapping[str, Any] | None = None, name: str | None = None
    ) -> QueryValid:
        body, headers = _json(_query_body(name, text, pattern))
        response = await self._send("POST", "/v1/queries/validate", content=body, headers=headers)
        return QueryValid.model_validate_json(response.content)

    async def post_events(
        self, producer: str, batch_id: str | int, events: Sequence[EventLike], late_events: int | None = None
    ) -> BatchResult:
        payload = {"producer": producer, "batch_id": batch_id, "events": [_event_dict(e) for e in events]}
        body, headers = _json(payload)
        response = await self._send(
            "POST", "/v1/events", content=body, headers=headers, params=_late(late_events)
        )
        return BatchResult.model_validate_json(response.content)

    async def post_arrow(
        self, producer: str, batch_id: str | int, stream: bytes | Any, late_events: int | None = None
    ) -> BatchResult:
        body = stream if isinstance(stream, bytes | bytearray) else arrow_bytes(stream)
        headers = {"Content-Type": ARROW_MEDIA_TYPE, PRODUCER_HEADER: producer, BATCH_HEADER: str(batch_id)}
        response = await self._send(
            "POST", "/v1/events", content=body, headers=headers, params=_late(late_events)
        )
        return BatchResult.model_validate_json(response.content)

    async def advance_time(self, t: float) -> TimeResult:
        body, headers = _json({"time": t})
        response = await self._send("POST", "/v1/time", content=body, headers=headers)
        return TimeResult.model_validate_json(response.content)

    async def matches(self, from_seq: int = 0, limit: int = 1000, query: str | None = None) -> MatchPage:
        params: dict[str, Any] = {"from_seq": from_seq, "limit": limit}
        if query is not None:
            params["query"] = query
        return MatchPage.model_validate_json((await self._send("GET", "/v1/matches", params=params)).content)

    async def ready(self) -> bool:
        try:
            return (await self._http.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    async def stats(self) -> Stats:
        return Stats.model_validate_json((await self._send("GET", "/v1/stats")).content)

    async def whoami(self) -> Identity:
        return Identity.model_validate_json((await self._send("GET", "/v1/whoami")).content)

    async def routing(self) -> ClusterRouting:
        return ClusterRouting.model_validate_json((await self._send("GET", "/v1/cluster/routing")).content)


# --------------------------------------------------------------------- subscriptions


# Matches per WebSocket message the subscriptions ask for (the server's ``batch``).
FRAME_MATCHES = 1000


def _ws_url(base_url: str, from_seq: int, queries: Iterable[str] | None, batch: int = 1) -> str:
    url = base_url.rstrip("/")
    url = "ws" + url[4:] if url.startswith("http") else url
    params: dict[str, Any] = {"from_seq": from_seq}
    if queries:
        params["queries"] = ",".join(queries)
    if batch != 1:
        params["batch"] = batch
    return f"{url}/v1/matches/ws?{urlencode(params)}"


def _refusal(err: websockets.InvalidStatus) -> ApiError:
    response = err.response
    try:
        detail = orjson.loads(response.body or b"{}").get("detail")
    except (orjson.JSONDecodeError, AttributeError):
        detail = None
    if not isinstance(detail, dict):
        detail = {"message": f"the server refused the subscription ({response.status_code})"}
    return ApiError(response.status_code, detail)


class _Resume:
    """What both subscription kinds share: the resume point and the retry policy."""

    def __init__(
        self,
        base_url: str,
        from_seq: int = 0,
        queries: Iterable[str] | None = None,
        token: str | None = None,
        idle_timeout: float | None = None,
        max_retries: int | None = 20,
        backoff: float = 0.1,
        batch: int = FRAME_MATCHES,
        **connect_kwargs: Any,
    ) -> None:
        # ``connect_kwargs`` go to the websockets library's connect call. ``batch``: up to
        # that many matches per message (1: a message per match, as older servers send).
        self.connect_kwargs = connect_kwargs
        self.batch = batch
        self.base_url = base_url
        self.next_seq = from_seq
        self.queries = list(queries) if queries else None
        self.token = token
        self.idle_timeout = idle_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.reconnects = 0
        # (code, reason) of each close the server sent: why the iterator reconnected.
        self.closes: list[tuple[int | None, str]] = []
        self._failures = 0

    def url(self) -> str:
        return _ws_url(self.base_url, self.next_seq, self.queries, self.batch)

    def accept(self, text: str | bytes) -> list[dict[str, Any]]:
        """The matches of a message (one match, or an array of them) not seen before:
        after a resume the server may send again what was already taken."""
        data = orjson.loads(text)
        if not isinstance(data, list):
            data = [data]
        if not data:
            return data
        first, last = int(data[0]["seq"]), int(data[-1]["seq"])
        if self.next_seq <= first <= last:
            # A message's matches come in seq order: all of it is new (the usual case,
            # no step per match).
            self.next_seq = last + 1
            self._failures = 0
            return data
        fresh: list[dict[str, Any]] = []
        for match in data:
            seq = int(match["seq"])
            if seq >= self.next_seq:
                self.next_seq = seq + 1
                fresh.append(match)
        if fresh:
            self._failures = 0
        return fresh

    def failed(self, err: BaseException) -> BaseException:
        """Why a connection ended: a refusal (a 4xx handshake answer) is raised, as
        retrying cannot help; anything else is remembered and returned for the retry."""
        if isinstance(err, websockets.InvalidStatus) and err.response.status_code < 500:
            raise _refusal(err) from None
        if isinstance(err, websockets.ConnectionClosed):
            self.closes.append((err.rcvd.code if err.rcvd else None, err.rcvd.reason if err.rcvd else ""))
        return err

    def retry_delay(self, err: BaseException | None) -> float:
        """Seconds to wait before reconnecting; raises ``err`` when out of retries."""
        self._failures += 1
        self.reconnects += 1
        if self.max_retries is not None and self._failures > self.max_retries:
            if err is not None:
                raise err
            raise ConnectionError("the subscription dropped too many times")
        return float(min(self.backoff * 2 ** (self._failures - 1), 5.0))


class Subscription(_Resume):
    """``async for match in Subscription(url, from_seq=0, queries=["q1"])``: matches as
    dicts (docs/semantics.md §9), each once, in ``seq`` order, across reconnects.
    ``async for matches in Subscription(...).batches()``: the same, a message's matches
    at a time (a list, as the server framed them) — for a consumer that keeps up with
    tens of thousands of matches a second, one step of the loop per message instead of
    per match.

    A live feed: without ``idle_timeout`` the iteration waits for the next match for
    ever (``break`` out of it, or cancel its task, to stop); with it, the iteration ends
    when no match arrives for ``idle_timeout`` seconds. ``next_seq`` is the cursor to
    resume from later. ``max_retries`` consecutive failed connections raise the last error. A refusal (bad
    token, unknown query, invalid ``from_seq``) raises :class:`ApiError` at once.
    """

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        async for matches in self.batches():
            for match in matches:
                yield match

    async def batches(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Each message's matches not seen before (never an empty list)."""
        while True:
            error: BaseException | None = None
            try:
                async with ws_connect(
                    self.url(),
                    additional_headers=_headers(self.token),
                    max_size=None,
                    proxy=None,
                    **self.connect_kwargs,
                ) as ws:
                    while True:
                        try:
                            text = await asyncio.wait_for(ws.recv(), self.idle_timeout)
                        except TimeoutError:
                            return
                        fresh = self.accept(text)
                        if fresh:
                            yield fresh
            except (websockets.ConnectionClosed, OSError, websockets.InvalidHandshake) as err:
                error = self.failed(err)
            await asyncio.sleep(self.retry_delay(error))


class SyncSubscription(_Resume):
    """The blocking twin of :class:`Subscription` (``websockets.sync``), with the same
    :meth:`batches`."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for matches in self.batches():
            yield from matches

    def batches(self) -> Iterator[list[dict[str, Any]]]:
        """Each message's matches not seen before (never an empty list)."""
        while True:
            error: BaseException | None = None
            try:
                with ws_connect_sync(
                    self.url(),
                    additional_headers=_headers(self.token),
                    max_size=None,
                    proxy=None,
                    **self.connect_kwargs,
                ) as ws:
                    while True:
                        try:
                            text = ws.recv(timeout=self.idle_timeout)
                        except TimeoutError:
                            return
                        fresh = self.accept(text)
                        if fresh:
                            yield fresh
            except (websockets.ConnectionClosed, OSError, websockets.InvalidHandshake) as err:
                error = self.failed(err)
            time.sleep(self.retry_delay(error))
