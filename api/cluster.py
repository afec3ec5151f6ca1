"""A cluster of scemon shards, used as one service (docs/architecture.md, "A cluster").

A **cluster spec** is the shard URLs in the Spark job's ``--service`` order (a list, or
one string of them separated by commas). Over it:

- :class:`Cluster`: register or delete queries once on every shard, all or none
  (check everywhere, apply in turn, roll back on a failure, settle a shard left in
  doubt when it returns; :meth:`Cluster.repair` settles what an interrupted call left),
  a registration at one event time every shard installs it at (``at="next"``), never
  during a slot move;
  the queries, figures (:meth:`Cluster.stats`) and Prometheus text
  (:meth:`Cluster.metrics`) of the whole cluster.
- the slot map (:meth:`Cluster.slot_map`) and moving slots between shards with their
  partial matches (:meth:`Cluster.move_slots`, :meth:`Cluster.rebalance`,
  :meth:`Cluster.apply_slots`: fence at a batch boundary, bring the clocks together,
  export the slots' retained events, each shard takes the new map and rebuilds);
- :class:`ClusterSubscription` (async) and :class:`SyncClusterSubscription`: one
  WebSocket per shard, merged; each match carries ``shard`` (its shard's position in
  the spec); one opaque resumable :attr:`cursor` holds every shard's next ``seq``. A
  shard that dies is resumed from its ``seq`` when it returns; the others go on.

Every shard is talked to through :mod:`api.client` (httpx, websockets): no other
protocol than the service's own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import math
import queue
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import orjson
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from api.client import FRAME_MATCHES, ApiError, Client, QueryLike, Subscription, _query_body, _query_dict
from api.models import ClusterShards, QueryPublic, Stats
from api.routing import SLOTS, SlotMap

# What an action retried at a later event time gives back (Cluster._at_next).
_T = TypeVar("_T")

__all__ = [
    "Cluster",
    "ClusterError",
    "ClusterStats",
    "ClusterSubscription",
    "SyncClusterSubscription",
    "decode_cursor",
    "encode_cursor",
    "seed_shards",
    "shard_urls",
]

CURSOR_VERSION = 1
# Figures of /v1/stats that add up over shards (counters and sizes).
SUMMED = (
    "events",
    "batches",
    "duplicates",
    "matches",
    "subscribers",
    "backlog",
    "overflows",
    "store_bytes",
    "held",
    "late_events",
    "refused_ahead",
    "buffer_full",
)
# The engine's figures that add up (the rest, e.g. its clock, do not).
ENGINE_SUMMED = ("queries", "ecqs", "stored_instances", "pmb_entries", "pending_matches")


class ClusterError(Exception):
    """A cluster call that did not complete everywhere. ``shards`` says what happened on
    each shard (URL → outcome, in words); ``in_doubt``: shards that may hold part of it
    until :meth:`Cluster.repair` runs with every shard up."""

    def __init__(self, message: str, shards: Mapping[str, str] | None = None, in_doubt: Sequence[str] = ()):
        self.message = message
        self.shards = dict(shards or {})
        self.in_doubt = list(in_doubt)
        super().__init__(message)


def shard_urls(spec: str | Iterable[str]) -> list[str]:
    """The shard URLs of a spec, as given (a list, or ``"http://a:8081,http://b:8082"``),
    without trailing slashes. Raises ValueError for an empty spec or a URL twice."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    urls = [u.strip().rstrip("/") for item in items for u in item.split(",") if u.strip()]
    if not urls:
        raise ValueError("a cluster needs at least one shard URL")
    seen = {u for u in urls if urls.count(u) > 1}
    if seen:
        raise ValueError(f"shard {sorted(seen)[0]} is given twice")
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"shard {url!r} is not an http:// or https:// URL")
    return urls


def seed_shards(seed: str, token: str | None = None, timeout: float = 10.0) -> list[str]:
    """The shard URLs a seed shard knows (``GET /v1/cluster``, its ``SCEMON_CLUSTER``).
    ValueError when it names none; :class:`ApiError` or an httpx error when it cannot
    be asked."""
    with Client(seed, token=token, timeout=timeout) as client:
        known = ClusterShards.model_validate_json(client._send("GET", "/v1/cluster").content)
    if not known.shards:
        raise ValueError(f"{seed.rstrip('/')} names no cluster (its SCEMON_CLUSTER is empty)")
    return shard_urls(known.shards)


# --------------------------------------------------------------------------- cursor


def encode_cursor(next_seqs: Mapping[str, int]) -> str:
    """The cursor of every shard's next seq: unpadded base64url of
    ``{"v": 1, "shards": {url: next_seq}}``."""
    raw = orjson.dumps({"v": CURSOR_VERSION, "shards": dict(next_seqs)}, option=orjson.OPT_SORT_KEYS)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(cursor: str, urls: Sequence[str]) -> dict[str, int]:
    """Every shard's next seq from a cursor; ValueError if it is malformed or names other
    shards than ``urls``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise ValueError("the cursor is not one a cluster subscription gave") from None
    if (
        not isinstance(data, dict)
        or data.get("v") != CURSOR_VERSION
        or not isinstance(data.get("shards"), dict)
    ):
        raise ValueError("the cursor is not one a cluster subscription gave (or of another version)")
    shards = data["shards"]
    if set(shards) != set(urls):
        raise ValueError(
            f"the cursor is for shards {', '.join(sorted(shards))}, not {', '.join(sorted(urls))}"
        )
    out: dict[str, int] = {}
    for url in urls:
        seq = shards[url]
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"the cursor's seq for {url} is not a non-negative integer")
        out[url] = seq
    return out


# --------------------------------------------------------------------------- stats


@dataclass
class ClusterStats:
    """Every shard's ``/v1/stats`` and their sums. ``down``: shards that did not answer
    (URL → why), left out of ``total``."""

    shards: dict[str, Stats]
    down: dict[str, str] = field(default_factory=dict)
    total: dict[str, float | int] = field(default_factory=dict)
    # The earliest and latest shard clock (event time), None before any event.
    clock_min: float | None = None
    clock_max: float | None = None

    @classmethod
    def of(cls, shards: dict[str, Stats], down: dict[str, str]) -> ClusterStats:
        total: dict[str, float | int] = {
            name: sum(getattr(s, name) for s in shards.values()) for name in SUMMED
        }
        total["backlog_max"] = max((s.backlog_max for s in shards.values()), default=0)
        total["ingest_count"] = sum(s.ingest.count for s in shards.values())
        total["ingest_seconds"] = sum(s.ingest.seconds for s in shards.values())
        for name in ENGINE_SUMMED:
            values = [s.engine.get(name) for s in shards.values()]
            total[f"engine_{name}"] = sum(v for v in values if isinstance(v, int | float))
        clocks = [s.clock for s in shards.values() if s.clock is not None]
        return cls(shards, down, total, min(clocks) if clocks else None, max(clocks) if clocks else None)


class _Relabelled(Collector):
    """Parsed metric families with a ``shard`` label added to every sample."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> Iterator[Any]:
        yield from self.families


# --------------------------------------------------------------------------- cluster


NEXT, NOW = "next", "now"
# Where a cluster registration goes in the stream: an event time, "next" or "now".
At = float | str


class _Passed(Exception):
    """A shard's stream passed the registration's event time: try a later one."""

    def __init__(self, why: str, outcome: dict[str, str]) -> None:
        self.why = why
        self.outcome = outcome
        super().__init__(why)


def _refused_for(err: BaseException, why: str) -> bool:
    """A 409 about ``why``: "at" (the shard's stream passed the registration's event
    time), "fence" (a slot move is under way there)."""
    return isinstance(err, ApiError) and err.status == 409 and err.detail.get("field") == why


class _Fenced(_Passed):
    """A slot move fenced a shard midway: register again once it ends."""


def _why(err: BaseException) -> str:
    if isinstance(err, ApiError):
        return f"refused ({err.status}: {err.message})"
    return (
        f"not reachable ({type(err).__name__}: {err})"
        if str(err)
        else f"not reachable ({type(err).__name__})"
    )


def _unsent(err: BaseException) -> bool:
    """The request never reached the shard (so it changed nothing there)."""
    return isinstance(err, ApiError | httpx.ConnectError | httpx.ConnectTimeout)


def _each_of(clients: Sequence[Client], call: Any) -> list[tuple[str, Any, BaseException | None]]:
    """``call(client)`` on every client at once: (url, result, error) in their order."""

    def one(client: Client) -> tuple[str, Any, BaseException | None]:
        try:
            return client.base_url, call(client), None
        except (ApiError, httpx.HTTPError) as err:
            return client.base_url, None, err

    with ThreadPoolExecutor(max_workers=max(1, len(clients))) as pool:
        return list(pool.map(one, clients))


class Cluster:
    """``Cluster(["http://a:8081", "http://b:8082"], token=...)``: the shards as one
    service. ``recover``: how long a write waits for a shard that broke off mid-call to
    come back, to settle it (roll back a registration, complete a delete) before giving
    up and saying it is in doubt."""

    def __init__(
        self,
        spec: str | Iterable[str],
        token: str | None = None,
        timeout: float = 60.0,
        recover: float = 30.0,
        boundary_wait: float = 30.0,
        fence_wait: float = 60.0,
    ) -> None:
        self.urls = shard_urls(spec)
        self.boundary_wait = boundary_wait
        # How long a registration waits for a slot move's fences to end.
        self.fence_wait = fence_wait
        self.token = token
        self.timeout = timeout
        self.recover = recover
        self.clients = [Client(url, token=token, timeout=timeout) for url in self.urls]

    @classmethod
    def from_seed(cls, seed: str, token: str | None = None, **kwargs: Any) -> Cluster:
        """The cluster one of its shards knows (:func:`seed_shards`)."""
        return cls(seed_shards(seed, token), token=token, **kwargs)

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _each(self, call: Any) -> list[tuple[str, Any, BaseException | None]]:
        """``call(client)`` on every shard at once: (url, result, error) in spec order."""
        return _each_of(self.clients, call)

    def _check_up(self) -> dict[str, float]:
        """Every shard ready, or :class:`ClusterError` changing nothing; each shard's
        start time (``/v1/stats``' ``started``), which tells a restart later."""
        answers = self._each(lambda c: c.stats())
        down = {url: _why(err) for url, _, err in answers if err is not None}
        down |= {url: f"not ready ({s.state})" for url, s, err in answers if err is None and s.state != "ok"}
        if down:
            raise ClusterError(
                f"nothing was changed: shard {', '.join(down)} is down or not ready",
                {url: down.get(url, "ready, left unchanged") for url in self.urls},
            )
        return {url: s.started for url, s, _ in answers}

    # ----------------------------------------------------------------- queries

    def register(
        self,
        name: str,
        text: str | None = None,
        pattern: Mapping[str, Any] | None = None,
        at: At = NEXT,
        lead: float = 0.0,
    ) -> QueryPublic:
        """Register one query on every shard, or on none (:class:`ClusterError`), at one
        point of the stream (see :meth:`register_bulk`)."""
        [info] = self.register_bulk([_query_body(name, text, pattern)], at=at, lead=lead)
        return info

    def register_bulk(
        self, queries: Iterable[QueryLike], at: At = NEXT, lead: float = 0.0, attempts: int = 8
    ) -> list[QueryPublic]:
        """Register queries on every shard (one bulk call each), or on none: a shard
        down or refusing before anything is applied leaves every shard unchanged; a
        shard failing while they are applied has the shards done before it rolled back,
        and itself settled when it returns. Raises :class:`ClusterError` saying so.

        Where in the stream (docs/architecture.md,
        "Registering and deleting at one point of the stream"): ``at="next"`` (the default)
        reads every shard's released clock and registers on every shard at an event
        time ``T`` after the latest (``lead`` seconds of event time after it; the
        smallest time after it for 0), so every
        shard installs the queries where its share of the stream reaches ``T``, and the
        shards' matches are one service's registering at ``T`` (the answers' ``at``). A
        shard whose stream passed ``T`` before the call reached it refuses (409): the
        queries are deleted from the shards that took them (they were still waiting,
        so nothing of them ran) and it is tried again at a later ``T`` (the lead grown
        with the stream's pace), up to ``attempts`` times. A number: that ``T``, once.
        ``"now"``: every shard at the moment the call reaches it (the same point only
        while the stream is quiet). Before any shard has a clock, ``"next"`` is
        ``"now"``: no event has been processed anywhere."""
        bodies = [dict(_query_dict(q)) for q in queries]
        names = [str(b.get("name")) for b in bodies]
        if not bodies:
            return []
        if isinstance(at, str) and at not in (NEXT, NOW):
            raise ValueError(f"at must be an event time, 'next' or 'now', not {at!r}")
        deadline = time.monotonic() + self.fence_wait
        while True:
            # A slot move fences the shards for seconds: wait for it to end, and
            # register again when a shard's fence went up midway (the shards done
            # before it were rolled back).
            self._wait_unfenced(deadline)
            try:
                if at == NEXT:
                    return self._register_next(bodies, names, lead, attempts, deadline)
                return self._register(bodies, names, None if at == NOW else float(at), deadline)
            except _Fenced as fenced:
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"nothing was registered: {fenced.why} for over {self.fence_wait:g} s", fenced.outcome
                    ) from None

    def _wait_unfenced(self, deadline: float, what: str = "registered") -> None:
        """Until no shard is fenced by a slot move (:class:`ClusterError` past ``deadline``)."""
        while True:
            answers = self._each(lambda c: c.slots())
            fenced = [url for url, got, err in answers if err is None and got.fenced]
            if not fenced:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"nothing was {what}: a slot move kept shard {', '.join(fenced)} fenced for over "
                    f"{self.fence_wait:g} s",
                    {url: "fenced" if url in fenced else "left unchanged" for url in self.urls},
                )
            time.sleep(0.2)

    def _released(self) -> list[float]:
        """Every shard's released clock that it has one (:class:`ClusterError` when a
        shard does not answer)."""
        answers = self._each(lambda c: c.stats())
        down = {url: _why(err) for url, _, err in answers if err is not None}
        if down:
            raise ClusterError(
                f"nothing was changed: shard {', '.join(down)} is down or not ready",
                {url: down.get(url, "ready, left unchanged") for url in self.urls},
            )
        return [
            s.released_clock
            for _, s, _ in answers
            if s.released_clock is not None and math.isfinite(s.released_clock)
        ]

    def _register_next(
        self, bodies: list[dict[str, Any]], names: list[str], lead: float, attempts: int, deadline: float
    ) -> list[QueryPublic]:
        """Register at an event time after every shard's released clock, again later
        while a shard's stream passes it before the registration reaches it."""
        return self._at_next(
            lambda at: self._register(bodies, names, at, deadline),
            lead,
            attempts,
            "registered",
            "registration's",
        )

    def _at_next(
        self, act: Callable[[float | None], _T], lead: float, attempts: int, done: str, whose: str
    ) -> _T:
        """``act(T)`` at an event time ``T`` after every shard's released clock (``lead``
        seconds after the latest, else just after it), or ``act(None)`` (at once) before
        any shard has a clock; while a shard's stream passes ``T`` before ``act`` reaches
        it (:class:`_Passed`), again at a later ``T``, up to ``attempts`` times."""
        for attempt in range(max(1, attempts)):
            clocks = self._released()
            if not clocks:
                return act(None)
            latest = max(clocks)
            at = latest + lead if lead > 0 else math.nextafter(latest, math.inf)
            try:
                return act(at)
            except _Passed as passed:
                if attempt == max(1, attempts) - 1:
                    raise ClusterError(
                        f"nothing was {done}: the stream passed the {whose} event time "
                        f"{attempts} times (last: {at:g}; {passed.why}); try a larger lead",
                        passed.outcome,
                    ) from None
                # Grow the lead with the stream's pace: what the clock moved meanwhile.
                moved = max(self._released(), default=latest) - latest
                lead = max(2 * lead, 2 * moved) or 1.0
        raise AssertionError("unreachable")

    def _register(
        self, bodies: list[dict[str, Any]], names: list[str], at: float | None, deadline: float
    ) -> list[QueryPublic]:
        """Register on every shard, at ``at`` (an event time) or at once. A shard
        fenced by a slot move meanwhile: the shards done are rolled back (once their
        fences allow it, by ``deadline``) and :class:`_Fenced` says to try again."""
        started = self._check_up()
        refused: dict[str, str] = {}

        def check(client: Client) -> None:
            for body in bodies:
                client.validate(body.get("text"), body.get("pattern"), body.get("name"))

        for url, _, err in self._each(check):
            if err is not None:
                refused[url] = _why(err)
        if refused:
            url, why = next(iter(refused.items()))
            raise ClusterError(
                f"nothing was registered: {url} {why}",
                {u: refused.get(u, "accepted the check, left unchanged") for u in self.urls},
            )
        done: list[Client] = []
        infos: list[QueryPublic] = []
        for client in self.clients:
            try:
                answer = client.register_bulk(bodies, at=at)
            except (ApiError, httpx.HTTPError) as err:
                if _refused_for(err, "fence"):
                    outcome = {c.base_url: "took it, deleted again" for c in done}
                    for undo in done:
                        self._delete_unfenced(undo, names, deadline, client, err, outcome)
                    outcome[client.base_url] = _why(err)
                    raise _Fenced(f"a slot move fenced {client.base_url}", outcome) from None
                if at is not None and _refused_for(err, "at"):
                    outcome = {c.base_url: "took it (waiting), deleted again" for c in done}
                    for undo in done:
                        try:
                            self._delete_names(undo, names)
                        except (ApiError, httpx.HTTPError) as undo_err:
                            outcome[undo.base_url] = f"in doubt: deleting it failed ({_why(undo_err)})"
                            raise ClusterError(
                                f"nothing was registered: {client.base_url} {_why(err)}; in doubt on "
                                f"{undo.base_url}: run `scemon cluster repair` once it is up",
                                outcome,
                                [undo.base_url],
                            ) from None
                    outcome[client.base_url] = _why(err)
                    raise _Passed(f"{client.base_url} {_why(err)}", outcome) from None
                self._undo_register(done, client, err, names, started[client.base_url])
            else:
                done.append(client)
                infos = infos or answer
        return infos

    def _undo_register(
        self, done: list[Client], failed: Client, err: BaseException, names: list[str], started: float
    ) -> None:
        outcome = {c.base_url: "rolled back" for c in done}
        for client in done:
            try:
                self._delete_names(client, names)
            except (ApiError, httpx.HTTPError) as undo_err:
                outcome[client.base_url] = f"in doubt: rolling back failed ({_why(undo_err)})"
        in_doubt = [url for url, what in outcome.items() if what.startswith("in doubt")]
        if _unsent(err):
            outcome[failed.base_url] = f"{_why(err)}: nothing registered there"
        elif self._settle(failed, lambda c: self._roll_back(c, names, started)):
            outcome[failed.base_url] = f"broke off ({_why(err)}); came back and was rolled back"
        else:
            outcome[failed.base_url] = f"broke off ({_why(err)}); in doubt until `repair` runs"
            in_doubt.append(failed.base_url)
        for client in self.clients[len(done) + 1 :]:
            outcome[client.base_url] = "not reached, left unchanged"
        message = f"nothing was registered: {failed.base_url} {_why(err)}"
        if in_doubt:
            message += f"; in doubt on {', '.join(in_doubt)}: run `scemon cluster repair` once it is up"
        raise ClusterError(message, outcome, in_doubt)

    def _settle(self, client: Client, action: Any) -> bool:
        """Wait up to ``recover`` seconds for a shard to be ready and ``action(client)``
        to succeed (it returns False to be asked again); whether it did."""
        deadline = time.monotonic() + self.recover
        while True:
            if client.ready():
                try:
                    if action(client) is not False:
                        return True
                except (ApiError, httpx.HTTPError):
                    pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def _roll_back(self, client: Client, names: list[str], started: float) -> bool:
        """Undo a registration whose answer was lost. A shard that restarted since
        (another ``started``) has what it committed and nothing in flight: delete what
        it has. The same process may still be at work on it: only once the queries are
        there can they be deleted for good (False: ask again)."""
        have = {q.name for q in client.queries()}
        if client.stats().started == started and not all(n in have for n in names):
            return False
        self._delete_names(client, names)
        return True

    def _delete_unfenced(
        self,
        client: Client,
        names: list[str],
        deadline: float,
        failed: Client,
        err: BaseException,
        outcome: dict[str, str],
    ) -> None:
        """Delete a registration from a shard, waiting while a fence refuses it (a query
        still waiting for its event time goes at once)."""
        while True:
            try:
                self._delete_names(client, names)
                return
            except (ApiError, httpx.HTTPError) as undo_err:
                if _refused_for(undo_err, "fence") and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                outcome[client.base_url] = f"in doubt: deleting it failed ({_why(undo_err)})"
                raise ClusterError(
                    f"nothing was registered: {failed.base_url} {_why(err)}; in doubt on "
                    f"{client.base_url}: run `scemon cluster repair` once it is up",
                    outcome,
                    [client.base_url],
                ) from None

    @staticmethod
    def _delete_names(client: Client, names: Iterable[str]) -> None:
        """Delete those of ``names`` the shard has (a name it lacks is already gone)."""
        have = {q.name for q in client.queries()}
        for name in reversed([n for n in names if n in have]):  # readers of @name first
            try:
                client.delete_query(name)
            except ApiError as err:
                if err.status != 404:
                    raise

    def delete_query(self, name: str, at: At = NEXT, lead: float = 0.0, attempts: int = 8) -> float | None:
        """Delete a query on every shard at one point of the stream, or on none (:class:`ClusterError`).
        Every shard must be up and have it. Waits for a slot move under way to end (``fence_wait``).

        Where (docs/architecture.md, "Registering and deleting at one point of the stream"), as
        :meth:`register_bulk`: ``at="next"`` (the default) holds the delete on every shard at an
        event time ``T`` after every shard's released clock (``lead`` seconds of event time after
        the latest), so the query matches every event with ``end < T`` and none after on every
        shard: one service's matches deleting at ``T``. A shard refusing (its stream passed
        ``T``, a query reading it, down) has the held deletes of the shards before it cancelled
        (nothing happened yet), and ``next`` tries again at a later ``T``, up to ``attempts``
        times. A number: that ``T``, once. ``"now"``: every shard as the call reaches it; a shard
        failing midway is waited for and the delete completed there. Returns ``T`` (None for
        ``"now"``)."""
        if isinstance(at, str) and at not in (NEXT, NOW):
            raise ValueError(f"at must be an event time, 'next' or 'now', not {at!r}")
        deadline = time.monotonic() + self.fence_wait
        while True:
            self._wait_unfenced(deadline, "deleted")
            started = self._check_up()
            answers = self._each(lambda c: {q.name for q in c.queries()})
            missing = [url for url, have, err in answers if err is not None or name not in have]
            if missing:
                raise ClusterError(
                    f"nothing was deleted: no query named {name!r} on {', '.join(missing)}"
                    + (
                        " (the shards disagree: run `scemon cluster repair`)"
                        if len(missing) < len(self.urls)
                        else ""
                    ),
                )
            try:
                if at == NOW:
                    self._delete_now(name)
                    return None
                if at != NEXT:
                    self._delete_at(name, float(at), started, deadline)
                    return float(at)
                return self._delete_next(name, lead, attempts, started, deadline)
            except _Fenced as fenced:
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"nothing was deleted: {fenced.why} for over {self.fence_wait:g} s", fenced.outcome
                    ) from None
            except _Passed as passed:
                raise ClusterError(f"nothing was deleted: {passed.why}", passed.outcome) from None

    def _delete_next(
        self, name: str, lead: float, attempts: int, started: dict[str, float], deadline: float
    ) -> float | None:
        """Delete at an event time after every shard's released clock, again later while
        a shard's stream passes it before the delete reaches it."""

        def delete(at: float | None) -> float | None:
            if at is None:
                self._delete_now(name)
            else:
                self._delete_at(name, at, started, deadline)
            return at

        return self._at_next(delete, lead, attempts, "deleted", "delete's")

    def _delete_at(self, name: str, at: float, started: dict[str, float], deadline: float) -> None:
        """Hold the delete at ``at`` on every shard, or cancel it on those that took it:
        :class:`_Passed` when a shard's stream passed ``at``, :class:`_Fenced` when a slot
        move fenced one, :class:`ClusterError` for any other refusal or a shard failing."""
        done: list[Client] = []
        for client in self.clients:
            try:
                client.delete_query(name, at=at)
            except (ApiError, httpx.HTTPError) as err:
                outcome = {c.base_url: "held it, cancelled again" for c in done}
                in_doubt, applied = self._cancel_deletes(done, name, outcome)
                outcome[client.base_url] = _why(err)
                if applied:
                    # A shard's stream reached ``at`` before its delete could be
                    # cancelled: the query is gone there, so it goes everywhere.
                    self._delete_now(name)
                    raise ClusterError(
                        f"{name!r} is deleted, but not at one point of the stream: {', '.join(applied)} "
                        f"reached event time {at:g} before the delete could be cancelled there "
                        f"({client.base_url} {_why(err)}); the other shards deleted it at once",
                        {**outcome, **{c.base_url: "deleted at once" for c in self.clients if c not in done}},
                    ) from None
                if not _unsent(err):
                    if self._settle(client, lambda c: self._cancel_lost(c, name, at, started[c.base_url])):
                        outcome[client.base_url] = f"broke off ({_why(err)}); came back and was cancelled"
                    else:
                        outcome[client.base_url] = f"broke off ({_why(err)}); in doubt until `repair` runs"
                        in_doubt.append(client.base_url)
                for rest in self.clients[len(done) + 1 :]:
                    outcome[rest.base_url] = "not reached, left unchanged"
                message = f"nothing was deleted: {client.base_url} {_why(err)}"
                if in_doubt:
                    raise ClusterError(
                        message
                        + f"; in doubt on {', '.join(in_doubt)}: run `scemon cluster repair` once it is up",
                        outcome,
                        in_doubt,
                    ) from None
                if _refused_for(err, "fence"):
                    raise _Fenced(f"a slot move fenced {client.base_url}", outcome) from None
                if _refused_for(err, "at"):
                    raise _Passed(f"{client.base_url} {_why(err)}", outcome) from None
                raise ClusterError(message, outcome) from None
            done.append(client)

    def cancel_delete(self, name: str) -> None:
        """Cancel the delete held for a query on every shard. Every shard must be up and
        still hold it (:class:`ClusterError` changing nothing otherwise: a shard whose
        stream reached the time has deleted the query, and cancelling elsewhere would
        leave the shards disagreeing)."""
        self._check_up()
        answers = self._each(lambda c: {q.name: q.deleting_at for q in c.queries()})
        down = {url: _why(err) for url, _, err in answers if err is not None}
        if down:
            raise ClusterError(f"nothing was cancelled: shard {', '.join(down)} did not answer", down)
        lacking = [url for url, got, _ in answers if got.get(name) is None]
        if lacking:
            raise ClusterError(
                f"nothing was cancelled: {', '.join(lacking)} holds no delete of {name!r} "
                "(none was held, or its stream reached the time and the query is deleted there)",
                {url: "holds it" if url not in lacking else "holds none" for url, _, _ in answers},
            )
        outcome = {url: "cancelled" for url in self.urls}
        failed, applied = self._cancel_deletes(self.clients, name, outcome)
        if applied:
            self._delete_now(name)
            raise ClusterError(
                f"{name!r} is deleted: {', '.join(applied)} reached the delete's event time before it could "
                "be cancelled there, so the other shards deleted it at once",
                outcome,
            )
        if failed:
            raise ClusterError(
                f"the delete of {name!r} is cancelled except on {', '.join(failed)}: "
                "run `scemon cluster repair` once it is up",
                outcome,
                failed,
            )

    @staticmethod
    def _cancel_deletes(
        done: list[Client], name: str, outcome: dict[str, str]
    ) -> tuple[list[str], list[str]]:
        """Cancel the held delete on the shards that took it; the shards where that
        failed, and those whose stream reached its time first (the query deleted there)."""
        failed, applied = [], []
        for client in done:
            try:
                client.cancel_delete(name)
            except (ApiError, httpx.HTTPError) as err:
                if isinstance(err, ApiError) and err.status == 404:
                    outcome[client.base_url] = "its stream reached the time first: deleted"
                    applied.append(client.base_url)
                    continue
                if isinstance(err, ApiError) and err.status == 409:  # no delete held: nothing to undo
                    continue
                outcome[client.base_url] = f"in doubt: cancelling its held delete failed ({_why(err)})"
                failed.append(client.base_url)
        return failed, applied

    @staticmethod
    def _cancel_lost(client: Client, name: str, at: float, started: float) -> bool:
        """Cancel a held delete whose answer was lost. A shard that restarted since has
        what it committed and nothing in flight; the same process may still be at work
        on it: only once the delete shows can it be cancelled for good (False: ask again)."""
        held = {q.name: q.deleting_at for q in client.queries()}
        if held.get(name) == at:
            client.cancel_delete(name)
            return True
        return client.stats().started != started

    def _delete_now(self, name: str) -> None:
        """Delete on every shard as the call reaches it; a shard failing midway is waited
        for and the delete completed there (a delete cannot be undone without losing the
        query's partial matches)."""
        outcome: dict[str, str] = {}
        in_doubt: list[str] = []
        for client in self.clients:
            try:
                client.delete_query(name)
                outcome[client.base_url] = "deleted"
            except (ApiError, httpx.HTTPError) as err:
                if self._settle(client, lambda c: self._delete_names(c, [name])):
                    outcome[client.base_url] = f"broke off ({_why(err)}); came back and was deleted"
                else:
                    outcome[client.base_url] = f"{_why(err)}; in doubt until `repair` runs"
                    in_doubt.append(client.base_url)
        if in_doubt:
            raise ClusterError(
                f"{name!r} is deleted except on {', '.join(in_doubt)}: run `scemon cluster repair` once it is up",
                outcome,
                in_doubt,
            )

    def queries(self) -> list[QueryPublic]:
        """The cluster's queries (the first shard's summaries, match counts and rates
        summed over shards). Raises :class:`ClusterError` when a shard is down or the
        shards do not hold the same queries (:meth:`repair` settles that)."""
        answers = self._each(lambda c: c.queries())
        down = {url: _why(err) for url, _, err in answers if err is not None}
        if down:
            raise ClusterError(f"shard {', '.join(down)} did not answer", down)
        lists: list[list[QueryPublic]] = [a for _, a, _ in answers]
        names = [{q.name for q in found} for found in lists]
        every = set.intersection(*names)
        # A query whose held delete some shards' streams reached already is gone there.
        going = {q.name for found in lists for q in found if q.deleting_at is not None}
        partial = set.union(*names) - every - going
        if partial:
            raise ClusterError(
                f"the shards disagree on {', '.join(sorted(partial))}: run `scemon cluster repair`",
                {url: ", ".join(sorted(n & partial)) or "-" for url, n in zip(self.urls, names, strict=True)},
            )
        by_name = [{q.name: q for q in found} for found in lists]
        first = {q.name: q for found in reversed(lists) for q in found}
        out = []
        for query in [first[n] for n in dict.fromkeys(q.name for found in lists for q in found)]:
            parts = [found[query.name] for found in by_name if query.name in found]
            ends = [p.last_match for p in parts if p.last_match is not None]
            out.append(
                query.model_copy(
                    update={
                        "matches": sum(p.matches for p in parts),
                        "rate": sum(p.rate for p in parts),
                        "last_match": max(ends) if ends else None,
                        "pending": any(p.pending for p in parts),
                        # Until the stream reaches it on every shard.
                        "deleting_at": max(
                            (p.deleting_at for p in parts if p.deleting_at is not None), default=None
                        ),
                    }
                )
            )
        return out

    def repair(self) -> dict[str, list[str]]:
        """Settle what an interrupted register or delete left: a query name on some
        shards but not every one is deleted where it is (an unfinished registration is
        rolled back, an unfinished delete completed) unless a held delete will remove it
        there; a held delete some shards hold and others not (or at another time) is
        cancelled where it is held (listed as ``"<name> (held delete)"``). Every shard
        must answer. Returns name → the shards it was deleted from; safe to run at any
        time."""
        self._check_up()
        answers = self._each(lambda c: [q.name for q in c.queries()])
        down = {url: _why(err) for url, _, err in answers if err is not None}
        if down:
            raise ClusterError(f"nothing was repaired: shard {', '.join(down)} did not answer", down)
        held = {url: names for url, names, _ in answers}
        every = set.intersection(*(set(n) for n in held.values()))
        # Left alone: a query gone where the stream reached its held delete, still
        # there (and going at the same time) elsewhere.
        going = (
            {
                q.name
                for _, found, _ in self._each(lambda c: c.queries())
                if found
                for q in found
                if q.deleting_at
            }
            if any(set(n) != every for n in held.values())
            else set()
        )
        removed: dict[str, list[str]] = {}
        for client in self.clients:
            partial = [n for n in held[client.base_url] if n not in every and n not in going]
            if partial:
                self._delete_names(client, partial)
                for name in partial:
                    removed.setdefault(name, []).append(client.base_url)
        # A held delete some shards took and others not (an interrupted delete at an
        # event time): cancelled where it is held, as nothing of it happened yet.
        deleting = self._each(lambda c: {q.name: q.deleting_at for q in c.queries()})
        down = {url: _why(err) for url, _, err in deleting if err is not None}
        if down:
            raise ClusterError(f"held deletes not repaired: shard {', '.join(down)} did not answer", down)
        times = [got for _, got, _ in deleting]
        on_every = set.intersection(*(set(got) for got in times))
        for client, got in zip(self.clients, times, strict=True):
            for name, at in got.items():
                # (A query gone from a shard whose stream reached its held delete is left
                # to go from the others at the same time.)
                if at is not None and name in on_every and any(other[name] != at for other in times):
                    try:
                        client.cancel_delete(name)
                    except ApiError as err:
                        if err.status not in (404, 409):  # applied meanwhile, or cancelled
                            raise
                    removed.setdefault(f"{name} (held delete)", []).append(client.base_url)
        return removed

    # ----------------------------------------------------------------- figures

    def stats(self) -> ClusterStats:
        """Every shard's figures and their sums; shards that do not answer are listed
        in ``down``."""
        answers = self._each(lambda c: c.stats())
        return ClusterStats.of(
            {url: s for url, s, err in answers if err is None},
            {url: _why(err) for url, _, err in answers if err is not None},
        )

    def metrics(self) -> str:
        """Every shard's ``/metrics`` as one Prometheus exposition, each sample labelled
        ``shard="<url>"``. Shards that do not answer are left out (``scemon_shard_up``
        says which)."""
        answers = self._each(lambda c: c.metrics())
        merged: dict[str, Any] = {}
        for url, text, err in answers:
            if err is not None:
                continue
            for family in text_string_to_metric_families(text):
                into = merged.get(family.name)
                if into is None:
                    into = merged[family.name] = Metric(
                        family.name, family.documentation, family.type, unit=family.unit
                    )
                for sample in family.samples:
                    into.samples.append(sample._replace(labels={**sample.labels, "shard": url}))
        up = GaugeMetricFamily("scemon_shard_up", "1 if the shard answered /metrics.", labels=["shard"])
        for url, _, err in answers:
            up.add_metric([url], 0.0 if err is not None else 1.0)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Relabelled([*merged.values(), up]))
        return generate_latest(registry).decode()

    # ----------------------------------------------------------------- slots

    def slot_map(self) -> SlotMap:
        """The cluster's slot map, as every shard holds it (a shard told of no cluster
        holds none; when none holds one, the default map of the spec's shards). Raises
        :class:`ClusterError` when a shard does not answer or the shards hold different
        maps (a move that broke off: :meth:`apply_slots` with the map it was making)."""
        held = self._held_maps()
        if len({(m.epoch, m.owners, m.shards) for m in held.values()}) > 1:
            raise ClusterError(
                "the shards hold different slot maps (a move broke off): apply the map it was making again",
                {url: f"epoch {m.epoch}" for url, m in held.items()},
            )
        return next(iter(held.values())) if held else SlotMap.default(self.urls)

    def _held_maps(self) -> dict[str, SlotMap]:
        """The map each shard of the spec holds (those told of a cluster), its shards
        named (the spec's, for a map of ``SCEMON_SHARD`` alone)."""
        answers = self._each(lambda c: c.slots())
        down = {url: _why(err) for url, _, err in answers if err is not None}
        if down:
            raise ClusterError(f"shard {', '.join(down)} did not answer", down)
        held: dict[str, SlotMap] = {}
        for url, answer, _ in answers:
            if answer.me is None:
                continue
            found = SlotMap.from_json(answer.map.model_dump())
            if not found.shards:
                if found.count != len(self.urls):
                    raise ClusterError(
                        f"{url} was told a cluster of {found.count} (SCEMON_SHARD) but {len(self.urls)} "
                        "shards are given"
                    )
                found = SlotMap(found.epoch, found.owners, tuple(self.urls))
            held[url] = found
        return held

    def move_slots(self, slots: Iterable[int], to: str) -> SlotMap:
        """Move ``slots`` to the shard at ``to`` (a shard of the map, or a new one, which
        joins the end of the shard list), their partial matches with them; see
        :meth:`apply_slots`. Returns the new map."""
        wanted = sorted(set(slots))
        bad = [s for s in wanted if not 0 <= s < SLOTS]
        if bad:
            raise ValueError(f"slot {bad[0]} is not within 0-{SLOTS - 1}")
        [url] = shard_urls([to])
        current = self.slot_map()
        shards = list(current.shards)
        if url not in shards:
            shards.append(url)
        owners = list(current.owners)
        for slot in wanted:
            owners[slot] = shards.index(url)
        target = SlotMap(current.epoch + 1, tuple(owners), tuple(shards))
        return self.apply_slots(target, current)

    def rebalance(self, shards: Iterable[str]) -> SlotMap:
        """Spread the slots evenly over ``shards`` (the new shard list: shards may be added
        or left out), moving as few as possible; see :meth:`apply_slots`."""
        current = self.slot_map()
        return self.apply_slots(current.rebalanced(shard_urls(list(shards))), current)

    def apply_slots(self, target: SlotMap, current: SlotMap | None = None) -> SlotMap:
        """Make ``target`` the cluster's slot map, moving each slot that changes owner
        with its partial matches (docs/architecture.md, "Moving slots"):

        1. every shard of the old and new map must be up, else nothing changes;
        2. every one is fenced: it applies what was queued, then refuses event batches
           (503, which the job's sink retries) until the move ends;
        3. every clock is brought to the latest shard clock, as one service's would be,
           so a shard rebuilding a moved value's matches releases none its old owner had
           not (and holds back none it had);
        4. each shard giving slots up exports their values' retained events;
        5. every shard of the new map takes it, with the events of the slots it gains:
           it splices them into its op log in time order and rebuilds its engine, so the
           moved values' partial matches live on with the new owner and are gone from
           the old; a shard left out of the new map takes it too and owns no slot
           (it refuses event batches with 409 naming the map; its matches stay readable);
        6. the fences end.

        The same map again changes nothing. A move that broke off (the shards hold
        different maps) is completed by applying the map it was making again: the slots
        move from their owners in the oldest map held. Raises :class:`ClusterError`
        (what happened on each shard) when a shard fails on the way."""
        if current is None:
            held = self._held_maps()
            current = min(held.values(), key=lambda m: m.epoch) if held else SlotMap.default(self.urls)
            if any(m != current for m in held.values()):
                current = SlotMap(target.epoch - 1, current.owners, current.shards)
        if target.owners == current.owners and target.shards == current.shards:
            return current
        if not target.shards:
            raise ValueError("the new map must name its shards")
        if target.epoch <= current.epoch:
            target = SlotMap(current.epoch + 1, target.owners, target.shards)
        every = list(dict.fromkeys([*current.shards, *target.shards]))
        extra = [Client(url, token=self.token, timeout=self.timeout) for url in every if url not in self.urls]
        clients = {c.base_url: c for c in [*self.clients, *extra]}
        outcome: dict[str, str] = {}
        fenced: list[str] = []
        try:
            answers = _each_of([clients[u] for u in every], lambda c: c.stats())
            down = {url: _why(err) for url, _, err in answers if err is not None}
            down |= {
                url: f"not ready ({st.state})" for url, st, err in answers if err is None and st.state != "ok"
            }
            if down:
                raise ClusterError(
                    f"no slot was moved: shard {', '.join(down)} is down or not ready",
                    {url: down.get(url, "up, left unchanged") for url in every},
                )
            joining = [url for url in target.shards if url not in current.shards]
            if joining:
                self._give_queries(clients[current.shards[0]], [clients[u] for u in joining], outcome)
            boundary = self._fence_at_a_boundary(clients, every, current, fenced, outcome)
            clocks = {
                url: st.clock for url, st, _ in _each_of([clients[u] for u in every], lambda c: c.stats())
            }
            known = [c for c in clocks.values() if c is not None and math.isfinite(c)]
            if known:
                latest = max(known)
                for url, clock in clocks.items():
                    if clock is None or clock < latest:
                        clients[url].advance_time(latest)
            moving: dict[tuple[str, str], list[int]] = {}
            for slot, (old, new) in enumerate(zip(current.owners, target.owners, strict=True)):
                was, now = current.shards[old], target.shards[new]
                if was != now:
                    moving.setdefault((was, now), []).append(slot)
            imported: dict[str, list[dict[str, Any]]] = {}
            for (was, now), slots in moving.items():
                imported.setdefault(now, []).extend(clients[was].export_slots(slots))
            body = target.to_json()
            for k, url in enumerate(target.shards):
                clients[url].put_slots(body, k, imported.get(url, []), boundary)
                outcome[url] = f"took epoch {target.epoch} ({len(target.slots_of(k))} slots)"
            for url in every:
                if url not in target.shards:
                    # It takes the map too: it then owns no slot and refuses events (409)
                    # naming the map; its matches stay readable until it is stopped.
                    clients[url].put_slots(body, None, [], boundary)
                    outcome[url] = "left out of the map: owns no slot, refuses events (stop it when read)"
            for url in every:
                clients[url].fence(False)
                fenced.remove(url)
            return target
        except (ApiError, httpx.HTTPError) as err:
            for url in list(fenced):
                with contextlib.suppress(ApiError, httpx.HTTPError):
                    clients[url].fence(False)
                    fenced.remove(url)
            raise ClusterError(f"the slot move broke off: {_why(err)}", outcome) from None
        finally:
            for client in extra:
                client.close()

    @staticmethod
    def _give_queries(source: Client, joining: list[Client], outcome: dict[str, str]) -> None:
        """Give each shard joining the cluster the queries of ``source`` (a shard of the
        current map) that it lacks, as they were given there: registered at once, or at
        their event time ``at`` (installed or still waiting), and their held deletes —
        so that its rebuild installs and deletes them at the same points of the events
        it gains. In listing order, a run of the same ``at`` in one bulk call."""
        queries = source.queries()
        for client in joining:
            have = {q.name: q for q in client.queries()}
            todo = [q for q in queries if q.name not in have]
            runs: list[list[QueryPublic]] = []
            for q in todo:
                if runs and runs[-1][0].at == q.at:
                    runs[-1].append(q)
                else:
                    runs.append([q])
            try:
                for run in runs:
                    client.register_bulk([{"name": q.name, "text": q.text} for q in run], at=run[0].at)
                for q in queries:
                    if q.deleting_at is not None and (q.name not in have or have[q.name].deleting_at is None):
                        client.delete_query(q.name, at=q.deleting_at)
            except (ApiError, httpx.HTTPError) as err:
                outcome[client.base_url] = f"taking the cluster's queries failed ({_why(err)})"
                raise ClusterError(
                    f"no slot was moved: {client.base_url} did not take the cluster's queries: {_why(err)}",
                    outcome,
                ) from None
            outcome[client.base_url] = f"took the cluster's queries ({len(todo)} it lacked)"

    def _fence_at_a_boundary(
        self,
        clients: dict[str, Client],
        every: list[str],
        current: SlotMap,
        fenced: list[str],
        outcome: dict[str, str],
    ) -> dict[str, int]:
        """Fence every shard, at a point where no job's batch is half delivered: the
        shards the jobs post to (the current map's; a job posts its share to each, empty
        ones too) must report the same last batch of every producer. When they do not,
        a batch was being posted as the fences went up: the fences end, the job finishes
        that batch, and the fences go up again (for up to ``boundary_wait`` seconds).
        Returns the batch every producer is at."""
        deadline = time.monotonic() + self.boundary_wait
        while True:
            answers = {}
            for url in every:
                answers[url] = clients[url].fence(True)
                if url not in fenced:
                    fenced.append(url)
                outcome[url] = "fenced"
            posted = [url for url in current.shards if url in answers]
            producers = {p for url in posted for p in answers[url].batches}
            half = {
                p: {url: answers[url].batches.get(p) for url in posted}
                for p in producers
                if len({answers[url].batches.get(p) for url in posted}) > 1
            }
            if not half:
                return {p: max(answers[url].batches.get(p, -1) for url in posted) for p in producers}
            for url in list(fenced):
                clients[url].fence(False)
                fenced.remove(url)
                outcome[url] = "fence lifted: a batch was being posted"
            if time.monotonic() > deadline:
                producer, at = next(iter(half.items()))
                raise ClusterError(
                    f"no slot was moved: producer {producer}'s batches were still half delivered after "
                    f"{self.boundary_wait:g} s ({', '.join(f'{u}: {n}' for u, n in at.items())})",
                    outcome,
                )
            time.sleep(0.2)

    def subscribe(self, **kwargs: Any) -> SyncClusterSubscription:
        """A merged subscription over this cluster's shards (same token)."""
        return SyncClusterSubscription(self.urls, token=self.token, **kwargs)


# --------------------------------------------------------------------------- subscriptions


class _Merged:
    """What both merged subscriptions share: the shards and every shard's next seq."""

    def __init__(
        self,
        spec: str | Iterable[str],
        cursor: str | None = None,
        queries: Iterable[str] | None = None,
        token: str | None = None,
        idle_timeout: float | None = None,
        backoff: float = 0.1,
        batch: int = FRAME_MATCHES,
        **connect_kwargs: Any,
    ) -> None:
        self.urls = shard_urls(spec)
        self.next_seqs = decode_cursor(cursor, self.urls) if cursor else dict.fromkeys(self.urls, 0)
        self.queries = list(queries) if queries else None
        self.token = token
        self.idle_timeout = idle_timeout
        self.backoff = backoff
        self.batch = batch
        self.connect_kwargs = connect_kwargs

    @property
    def cursor(self) -> str:
        """Where to resume: every shard's next seq after the last match handed out."""
        return encode_cursor(self.next_seqs)

    def took(self, match: dict[str, Any]) -> dict[str, Any]:
        """``match`` was handed out: the cursor moves past it."""
        self.next_seqs[self.urls[match["shard"]]] = int(match["seq"]) + 1
        return match

    def took_all(self, matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A message's matches were handed out (one shard's, in seq order)."""
        self.took(matches[-1])
        return matches


class ClusterSubscription(_Merged):
    """``async for match in ClusterSubscription(urls, cursor=...)``: every shard's
    matches, each once, each with ``shard`` (its position in the spec); in ``seq`` order
    within a shard, as they come across shards. :attr:`cursor` after any match resumes
    right after it. A shard that drops is reconnected (backoff up to 5 s) as long as the
    iteration runs, from its own next seq; the others go on meanwhile. A refusal (bad
    token, unknown query, a seq the shard no longer keeps) raises :class:`ApiError`.
    ``idle_timeout``: end when no shard delivered for that many seconds."""

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        # aclosing: a consumer that stops early closes every shard's connection now.
        async with contextlib.aclosing(self._merged()) as merged:
            async for matches in merged:
                for match in matches:
                    yield self.took(match)

    async def batches(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Each shard message's matches not seen before (never an empty list)."""
        async with contextlib.aclosing(self._merged()) as merged:
            async for matches in merged:
                yield self.took_all(matches)

    async def _merged(self) -> AsyncGenerator[list[dict[str, Any]], None]:
        """The shards' messages as they come, each match marked with its shard; the
        cursor is moved by the caller, as matches are handed out."""
        inbox: asyncio.Queue[tuple[int, list[dict[str, Any]] | BaseException]] = asyncio.Queue(
            maxsize=2 * len(self.urls)
        )

        async def pump(shard: int, url: str) -> None:
            sub = Subscription(
                url,
                from_seq=self.next_seqs[url],
                queries=self.queries,
                token=self.token,
                max_retries=None,
                backoff=self.backoff,
                batch=self.batch,
                **self.connect_kwargs,
            )
            try:
                async for matches in sub.batches():
                    await inbox.put((shard, matches))
            except Exception as err:  # a refusal: the consumer raises it
                await inbox.put((shard, err))

        tasks = [asyncio.create_task(pump(i, url)) for i, url in enumerate(self.urls)]
        try:
            while True:
                try:
                    shard, item = await asyncio.wait_for(inbox.get(), self.idle_timeout)
                except TimeoutError:
                    return
                if isinstance(item, BaseException):
                    raise item
                for match in item:
                    match["shard"] = shard
                yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


class SyncClusterSubscription(_Merged):
    """The blocking twin of :class:`ClusterSubscription`: its event loop runs in a
    thread of its own, handing each message over as it is taken."""

    def __init__(self, spec: str | Iterable[str], **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        self._closing = threading.Event()

    def close(self) -> None:
        """End the iteration (from any thread): it returns within a tenth of a second,
        every shard's connection closed."""
        self._closing.set()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with contextlib.closing(self._merged()) as merged:
            for matches in merged:
                for match in matches:
                    yield self.took(match)

    def batches(self) -> Iterator[list[dict[str, Any]]]:
        """Each shard message's matches not seen before (never an empty list)."""
        with contextlib.closing(self._merged()) as merged:
            for matches in merged:
                yield self.took_all(matches)

    def _merged(self) -> Generator[list[dict[str, Any]], None, None]:
        handoff: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2)
        stop = threading.Event()
        inner = ClusterSubscription(
            self.urls,
            cursor=self.cursor,
            queries=self.queries,
            token=self.token,
            idle_timeout=self.idle_timeout,
            backoff=self.backoff,
            batch=self.batch,
            **self.connect_kwargs,
        )

        def put(item: tuple[str, Any]) -> bool:
            while not stop.is_set():
                try:
                    handoff.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        async def pump() -> None:
            try:
                async with contextlib.aclosing(inner._merged()) as merged:
                    async for matches in merged:
                        # Waiting here holds back the shards' reading: the consumer's pace.
                        if not await asyncio.to_thread(put, ("batch", matches)):
                            return
                put(("end", None))
            except Exception as err:
                put(("error", err))

        loop = asyncio.new_event_loop()
        task = loop.create_task(pump())

        def run() -> None:
            try:
                loop.run_until_complete(task)
            except asyncio.CancelledError:
                pass
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

        thread = threading.Thread(target=run, name="scemon-cluster-subscription", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    kind, item = handoff.get(timeout=0.1)
                except queue.Empty:
                    if self._closing.is_set():
                        return
                    continue
                if kind == "end":
                    return
                if kind == "error":
                    raise item
                yield item
        finally:
            stop.set()
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:  # the loop closed meanwhile
                    pass
            thread.join(timeout=10)
