"""The wire contract of the scemon REST API, version 1: one model family per resource.

Shared by the server (``service/server/routes``) and the clients (``api/client.py``), so both
sides read and write the same shapes. The server generates ``openapi.yaml`` from these
models; the examples here are the ones that document shows.

Families:

- queries: ``QueryCreate`` → ``QueryPublic``; ``QueryBulkCreate`` → ``QueryBulkPublic``;
  ``QueryList``; ``QueryValidate`` → ``QueryValid`` (a dry run of registering);
- events: ``EventIn``, ``EventBatch`` → ``BatchResult`` (with ``LateEvent``);
  ``TimeAdvance`` → ``TimeResult``;
- matches: ``MatchPublic``, ``MatchPage``;
- errors: ``ErrorBody`` (``{"detail": {"message", ...where}}``) for every 4xx;
- health: ``Health``; the service's figures: ``Stats``; the caller: ``Identity``.

Events posted without an ``id`` are named ``"<batch_id>:<index>"`` in matches, the index
being the 0-based position of the event in the batch as posted.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

__all__ = [
    "ARROW_MEDIA_TYPE",
    "ATTRS_MAX",
    "ATTR_NAME_MAX",
    "ATTR_VALUE_MAX",
    "ID_MAX",
    "SRC_MAX",
    "TYPE_MAX",
    "BATCH_EXAMPLE",
    "BATCH_HEADER",
    "NAME_PATTERN",
    "PRODUCER_HEADER",
    "AttrValue",
    "BatchResult",
    "ClusterRouting",
    "ClusterShards",
    "ClusterSlots",
    "SlotExport",
    "SlotFence",
    "SlotMapBody",
    "SlotMapPut",
    "RoutingKey",
    "ErrorBody",
    "ErrorDetail",
    "EventBatch",
    "EventIn",
    "Health",
    "Identity",
    "IngestStats",
    "LATE_EVENTS_SHOWN",
    "LateEvent",
    "MatchPage",
    "MatchPublic",
    "QueryBulkCreate",
    "QueryBulkPublic",
    "QueryCreate",
    "QueryList",
    "QueryPublic",
    "QueryValid",
    "QueryValidate",
    "Stats",
    "TimeAdvance",
    "TimeResult",
]

ARROW_MEDIA_TYPE = "application/vnd.apache.arrow.stream"
PRODUCER_HEADER = "X-Scemon-Producer"
BATCH_HEADER = "X-Scemon-Batch-Id"

# Query names appear in URLs and as ``@name`` in other queries' text, so they are what
# the query language reads as a name: a letter or ``_``, then letters, digits, ``_`` and
# single inner ``-``.
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(-[A-Za-z0-9_]+)*$"
NAME_MAX = 128
ID_MAX = 256
# Per-field limits of a posted event (422 naming the event's index and the field).
SRC_MAX = 256
TYPE_MAX = 128
ATTR_NAME_MAX = 128
ATTR_VALUE_MAX = 4096
ATTRS_MAX = 256
# Event times and time advances lie within +-TIME_MAX seconds: about 31,700 years either
# side of 0, and millisecond steps stay exact (a float's spacing there is 1.2e-4 s). A
# timestamp in milliseconds since 1970 (~1.8e12) is beyond it.
TIME_MAX = 1e12
# Late events a batch answer lists by default (``?late_events=`` asks for more).
LATE_EVENTS_SHOWN = 10

AttrValue = bool | int | float | str

BATCH_EXAMPLE: dict[str, Any] = {
    "producer": "spark-job-1",
    "batch_id": 17,
    "events": [
        {"id": "tx1", "src": "card-1", "type": "A", "start": 1.0, "attrs": {"payment": 30}},
        {"src": "card-1", "type": "B", "start": 2.0, "end": 3.0},
    ],
}

_DINNER = (
    "PATTERN Sequence WITH CNMA_A, RSTR_B, BAR_C\n"
    "WHERE [symbol] $20 < CNMA_A.payment < $50 AND $80 < RSTR_B.payment < $120 AND BAR_C.payment < $50\n"
    "WITHIN 5 hours"
)
_AB_PATTERN: dict[str, Any] = {
    "kind": "query",
    "pattern": {
        "kind": "seq",
        "items": [
            {"kind": "component", "classes": ["A"], "alias": "a"},
            {"kind": "component", "classes": ["B"], "alias": "b"},
        ],
    },
    "within": 10.0,
    "mode": "recent",
}


class _Model(BaseModel):
    """Unknown fields are errors: a misspelt field should fail loudly, not be ignored."""

    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------ errors


class ErrorDetail(BaseModel):
    """What went wrong and where. ``message`` always says both in words; the other
    fields locate the mistake for programs: ``line``/``column``/``token`` in query text,
    ``index`` of the event (or of the query in a bulk call), ``field`` the bad field,
    ``query`` the query's name; ``indexes`` every event of the batch refused for the
    same reason, when there are several (events too far ahead of the clock);
    ``dependents`` the queries that read a query refused deletion (as ``@name``)."""

    message: str
    line: int | None = None
    column: int | None = None
    token: str | None = None
    index: int | None = None
    field: str | None = None
    query: str | None = None
    indexes: list[int] | None = None
    dependents: list[str] | None = None
    damaged_seqs: list[int] | None = Field(
        default=None,
        description="A damaged match block's seqs, [first, next): not served; resume from next.",
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"message": "expected ',' or ')' (line 1, column 10 at 'B')", "line": 1, "column": 10},
                {"message": "event 3, field 'end': end 1 is before start 2", "index": 3, "field": "end"},
            ]
        }
    )


class ErrorBody(BaseModel):
    """Every 4xx answer has this body."""

    detail: ErrorDetail


# ----------------------------------------------------------------------------- queries


class QueryBase(_Model):
    name: str = Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=NAME_PATTERN,
        description="Unique name; other queries read its matches as the class @name.",
    )


class _QueryForm(_Model):
    """A query's text or its AST JSON: exactly one of them."""

    text: str | None = Field(
        default=None, min_length=1, max_length=100_000, description="Query text (docs/language.md)."
    )
    pattern: dict[str, Any] | None = Field(
        default=None, description="The whole query's AST JSON: an object with kind 'query'."
    )

    @model_validator(mode="after")
    def _one_form(self) -> _QueryForm:
        if (self.text is None) == (self.pattern is None):
            raise ValueError("give exactly one of 'text' and 'pattern'")
        return self


# The form comes first among the bases so that the name comes first in the schema
# (pydantic collects fields from the bases in reverse order).
class QueryCreate(_QueryForm, QueryBase):
    """A query to register: its text, or its AST JSON (``ecq.language.ast.to_json``)."""

    at: float | None = Field(
        default=None,
        description=(
            "Install the query where the stream reaches this event time (seconds): after every event "
            "with end < at, before the first with end >= at. Until then it is listed as pending. "
            "409 when the stream is there already. Omitted: at once."
        ),
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"name": "dinner_and_a_movie", "text": _DINNER},
                {"name": "ab", "pattern": _AB_PATTERN},
            ]
        }
    )


class QueryValidate(_QueryForm):
    """A query to check exactly as ``POST /v1/queries`` would, without registering it.
    Without a name, whether the name is free is not checked."""

    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=NAME_MAX,
        pattern=NAME_PATTERN,
        description="The name it would be registered under; checked to be free.",
    )

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"name": "ab", "text": "SEQ(A, B) WITHIN 10 s"}, {"text": "A; B"}]}
    )


class QueryBulkCreate(_Model):
    """Queries registered together, in order: all of them or none."""

    queries: list[QueryCreate] = Field(min_length=1, max_length=20_000)
    at: float | None = Field(
        default=None,
        description=(
            "Install the queries where the stream reaches this event time (seconds): after every event "
            "with end < at, before the first with end >= at (one time for the whole bulk, not given per "
            "query). Until then they are listed as pending. 409 when the stream is there already. "
            "Omitted: at once."
        ),
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "queries": [
                        {"name": "q1", "text": "SEQ(A, B) WITHIN 10 s"},
                        {"name": "q2", "text": "A; B; C WITHIN 1 min MODE ALL"},
                    ]
                }
            ]
        }
    )


class _QueryCompiled(_Model):
    """What compiling a query tells: its canonical text and summary."""

    text: str = Field(description="Canonical text of the query.")
    kind: Literal["seq", "and", "or"]
    classes: list[str] = Field(description="Event classes the query reads, sorted.")
    window: float | None = Field(description="WITHIN in seconds; null for filters and disjunctions.")
    mode: Literal["recent", "all", "chronicle"] = Field(
        description="MODE as written (default recent); the text shows any other policy clause."
    )
    partition: list[str] = Field(
        default=["src"],
        description=(
            "The partition key: the attributes whose values the events of one match share "
            '(PARTITION BY, or [attr] conjuncts; default ["src"]); [] for PARTITION BY NONE.'
        ),
    )


# What compiling the query "ab" gives: the examples of a checked and a registered query.
_AB_COMPILED: dict[str, Any] = {
    "name": "ab",
    "text": "PATTERN SEQ(A a, B b)\nWITHIN 10 s",
    "kind": "seq",
    "classes": ["A", "B"],
    "window": 10.0,
    "mode": "recent",
    "partition": ["src"],
}


class _CheckedName(_Model):
    name: str | None = Field(description="The name it was checked under, if one was given.")


class QueryValid(_QueryCompiled, _CheckedName):
    """A query that would be registered as it stands: its canonical text and summary."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_AB_COMPILED]})


class QueryPublic(_QueryCompiled, QueryBase):
    """A registered query: its compiled summary, its canonical text and its matches."""

    matches: int = Field(ge=0, description="Matches emitted so far.")
    last_match: float | None = Field(description="End time of the latest match, or null.")
    rate: float = Field(
        default=0.0, ge=0.0, description="Matches per second over the last minute (since start if sooner)."
    )
    at: float | None = Field(
        default=None, description="The event time it was registered at (null: registered at once)."
    )
    pending: bool = Field(
        default=False, description="Registered at an event time the stream has not reached yet."
    )
    deleting_at: float | None = Field(
        default=None,
        description="The event time its held delete waits for (DELETE with at): it matches every event "
        "with end < deleting_at and is deleted there (null: no delete held).",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{**_AB_COMPILED, "matches": 2, "last_match": 9.0, "rate": 0.03}]},
    )


class QueryBulkPublic(_Model):
    queries: list[QueryPublic]


class QueryList(_Model):
    """Every registered query, in registration order."""

    queries: list[QueryPublic]


# ------------------------------------------------------------------------------ events


AttrName = Annotated[str, StringConstraints(max_length=ATTR_NAME_MAX)]
AttrValueIn = bool | int | float | Annotated[str, StringConstraints(max_length=ATTR_VALUE_MAX)]


class EventIn(_Model):
    """One event (docs/semantics.md §1). ``end`` defaults to ``start``; ``end < start`` is
    rejected; ``prob`` defaults to 1. Longer fields than their limits are 422 naming the
    event's index and the field."""

    src: Annotated[str, StringConstraints(max_length=SRC_MAX)] | int = Field(
        description="Event source; every match is within one source."
    )
    type: str = Field(min_length=1, max_length=TYPE_MAX, description="Primitive event class.")
    start: float = Field(description="Seconds.")
    end: float | None = Field(default=None, description="Seconds, at least start; default start.")
    attrs: dict[AttrName, AttrValueIn] | None = Field(
        default=None, max_length=ATTRS_MAX, description="Flat attributes."
    )
    prob: float | None = Field(default=None, gt=0.0, le=1.0, description="Probability in (0, 1].")
    id: Annotated[str, StringConstraints(max_length=ID_MAX)] | int | None = Field(
        default=None, description="Echoed in matches; default '<batch_id>:<index in the batch>'."
    )


class EventBatch(_Model):
    """A micro-batch. ``(producer, batch_id)`` is its idempotency key: a batch already
    applied is acknowledged with ``duplicate: true`` and changes nothing. ``batch_id``
    compares as text (``7`` and ``"7"`` are the same batch). The batch is sorted stably
    by ``(end, start)`` before the engine sees it."""

    producer: str = Field(min_length=1, max_length=ID_MAX)
    batch_id: str | int = Field(description="Unique per producer; compared as text.")
    events: list[EventIn]

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [BATCH_EXAMPLE]},
    )


class LateEvent(_Model):
    """An event that reached the engine with ``end`` below the released clock: applied
    all the same, but matches with events the engine had already let go are lost."""

    index: int = Field(ge=0, description="Its position in the batch as posted.")
    id: str | int = Field(description="Its id (or '<batch_id>:<index>').")
    by: float = Field(ge=0, description="Seconds its end lay below the released clock.")


class BatchResult(_Model):
    accepted: int = Field(ge=0, description="Events in the batch (0 for a duplicate).")
    duplicate: bool = Field(description="The batch was applied before; nothing changed.")
    matches: int = Field(ge=0, description="Matches the batch released.")
    late: int = Field(
        default=0, ge=0, description="Events of the batch that were late (also told again for a duplicate)."
    )
    late_events: list[LateEvent] = Field(
        default_factory=list,
        description=f"The first late events, in batch order: {LATE_EVENTS_SHOWN} unless ?late_events= asks otherwise.",
    )
    matches_capped: int = Field(
        default=0,
        ge=0,
        description="Matches dropped because one event completed more than the server's cap "
        "(--max-matches-per-event) for one query; not counted in `matches`.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"accepted": 2, "duplicate": False, "matches": 1, "late": 0, "late_events": []},
                {
                    "accepted": 2,
                    "duplicate": False,
                    "matches": 0,
                    "late": 1,
                    "late_events": [{"index": 0, "id": "tx1", "by": 12.5}],
                },
            ]
        },
    )


class TimeAdvance(_Model):
    """Move the clock forward (it never goes back): matches waiting for a window to
    close (trailing negation) are released, idle streams make progress. With an allowed
    lateness ``L`` the released clock moves to ``time - L``. At most ``max_ahead``
    seconds beyond the clock (or the wall clock)."""

    # Strict: a JSON number only ("5" and true are refused, not read as 5 and 1).
    time: float = Field(strict=True, description="Seconds, a JSON number; finite.")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"time": 3600.0}]})


class TimeResult(_Model):
    clock: float | None = Field(
        description="The clock after the call: the largest event time taken or time advanced to "
        "(null before any)."
    )
    released_clock: float | None = Field(
        default=None,
        description="The engine's clock: what the reorder buffer has released (null before any).",
    )
    matches: int = Field(ge=0, description="Matches the advance released.")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"clock": 3600.0, "released_clock": 3570.0, "matches": 0}]},
    )


# ----------------------------------------------------------------------------- matches


class MatchPublic(_Model):
    """One match (docs/semantics.md §9). ``events`` holds event ids in component order (a
    Kleene component or a sub-pattern gives a list); ``seq`` numbers matches across the
    service's life, without gaps, so a consumer resumes with ``from_seq = seq + 1``."""

    query: str
    src: str | int | float | bool | list[Any] | None = Field(
        description=(
            "The match's partition value: the source by default; under PARTITION BY the "
            "attribute's value (a list for several attributes, null for NONE)."
        )
    )
    start: float
    end: float
    events: list[Any]
    attrs: dict[str, AttrValue]
    prob: float
    seq: int = Field(ge=0)

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "ab",
                    "src": "card-1",
                    "start": 1.0,
                    "end": 3.0,
                    "events": ["tx1", "17:1"],
                    "attrs": {},
                    "prob": 1.0,
                    "seq": 0,
                }
            ]
        },
    )


class MatchPage(_Model):
    """Matches with ``seq >= from_seq`` in ``seq`` order; ask again with ``from_seq =
    next_seq`` for more."""

    matches: list[MatchPublic]
    next_seq: int = Field(ge=0)


# ------------------------------------------------------------------------------ health


class Health(_Model):
    """``starting``: rebuilding from the store (detail: progress); ``unwritable``: the
    store refuses writes (detail: disk full, read-only or I/O error, and the fix);
    ``failed``: the store cannot be replayed (detail: why); ``damaged``: rows of the
    store fail their checksum (detail: which; they are not served, the rest is)."""

    status: Literal["ok", "starting", "unwritable", "failed", "damaged"]
    detail: str | None = None


class Identity(_Model):
    """Who the caller is to this server: what its token's role may do."""

    auth: bool = Field(description="Whether the server checks tokens; without, everything is allowed.")
    role: Literal["admin", "producer", "reader"] | None = Field(
        description="The token's role; null with auth off."
    )
    may: list[Literal["manage_queries", "post_events", "read_matches", "read_queries"]] = Field(
        description="What the caller may do."
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"auth": True, "role": "reader", "may": ["read_matches", "read_queries"]}]
        },
    )


class IngestStats(_Model):
    """``POST /v1/events`` answer times since start, as the ``scemon_ingest_seconds``
    histogram counts them: a client takes the difference of two readings."""

    count: int = Field(ge=0, description="Batches answered.")
    seconds: float = Field(ge=0.0, description="Their answer times added up.")
    buckets: list[tuple[float, int]] = Field(
        description="[upper bound in seconds, batches answered within it], cumulative; `count` is the +inf bucket."
    )


class Stats(_Model):
    """The service's own figures, as ``/metrics`` has them, in JSON (the console reads
    them every second). Counters count from the process's start; a client derives rates
    from two readings. ``engine`` holds the engine's own figures as it reports them (its
    ``clock`` is the released clock). Event time: ``clock`` (the largest event time taken,
    or time advanced to) and ``released_clock`` (what the reorder buffer has let through
    to the engine) are null before any event; ``max_ahead`` null is no bound."""

    state: Literal["ok", "starting", "unwritable", "failed"] = Field(description="As /readyz says.")
    uptime: float = Field(ge=0.0, description="Seconds since the process started.")
    started: float = Field(description="When it started, in seconds since the epoch.")
    kernel: str = Field(description="The engine's kernel: 'compiled', or 'pure' (several times slower).")
    version: str = Field(description="scemon's version, as `scemon --version` prints it.")
    events: int = Field(ge=0, description="Events applied since start.")
    batches: int = Field(ge=0, description="Batches applied since start.")
    duplicates: int = Field(ge=0, description="Batches recognised as already applied, since start.")
    matches: int = Field(ge=0, description="Matches in the service's life: the next seq.")
    ingest: IngestStats
    subscribers: int = Field(ge=0, description="Connected WebSocket subscribers.")
    backlog: int = Field(ge=0, description="Matches queued for subscribers, not yet sent, over all of them.")
    backlog_max: int = Field(ge=0, description="The longest one subscriber's queue.")
    subscriber_queue: int = Field(ge=1, description="How long a queue may grow before it is cut off.")
    overflows: int = Field(ge=0, description="Subscribers cut off for falling behind, since start.")
    store_bytes: int = Field(ge=0, description="Size of the store's files.")
    engine: dict[str, float | int | str | bool | None] = Field(
        description="The engine's figures: queries, ECQs, stored instances, PMB entries, pending matches, clock."
    )
    clock: float | None = Field(description="The largest event time taken, or time advanced to.")
    released_clock: float | None = Field(
        description="The engine's clock: what the reorder buffer has released."
    )
    lateness: float = Field(ge=0, description="Allowed lateness, seconds (scemon serve --lateness).")
    max_ahead: float | None = Field(description="How far ahead of the clock an event may be; null: no bound.")
    held: int = Field(ge=0, description="Events held in the reorder buffer.")
    held_max: int = Field(ge=1, description="The buffer's cap: a batch that would exceed it gets 503.")
    producers: dict[str, float] = Field(
        default_factory=dict,
        description="Each live producer's watermark (the largest end it sent); the clock is the smallest.",
    )
    producer_idle: float | None = Field(
        default=None,
        description="Seconds without a batch after which a producer stops holding the clock; null: never.",
    )
    late_events: int = Field(
        ge=0, description="Events applied late (end below the released clock), since start."
    )
    refused_ahead: int = Field(
        ge=0, description="Events and time advances refused as too far ahead of the clock, since start."
    )
    buffer_full: int = Field(
        ge=0, description="Batches answered 503 because the buffer was at its cap, since start."
    )
    matches_capped: int = Field(
        default=0,
        ge=0,
        description="Matches dropped because one event completed more than --max-matches-per-event "
        "for one query, since start.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "state": "ok",
                    "uptime": 42.5,
                    "started": 1767225600.0,
                    "kernel": "compiled",
                    "events": 1200,
                    "batches": 3,
                    "duplicates": 0,
                    "matches": 17,
                    "ingest": {"count": 3, "seconds": 0.012, "buckets": [[0.001, 0], [0.005, 2], [0.01, 3]]},
                    "subscribers": 1,
                    "backlog": 0,
                    "backlog_max": 0,
                    "subscriber_queue": 50000,
                    "overflows": 0,
                    "store_bytes": 4112384,
                    "engine": {"queries": 2, "ecqs": 3, "stored_instances": 410, "clock": 3570.0},
                    "clock": 3600.0,
                    "released_clock": 3570.0,
                    "lateness": 30.0,
                    "max_ahead": 86400.0,
                    "held": 85,
                    "held_max": 1000000,
                    "producers": {"spark-job-1": 3600.0, "gateway": 3612.5},
                    "producer_idle": 60.0,
                    "late_events": 2,
                    "refused_ahead": 1,
                    "buffer_full": 0,
                }
            ]
        },
    )


class ClusterShards(_Model):
    """The cluster a shard belongs to, as its operator told it (``SCEMON_CLUSTER``): every
    shard's base URL in routing order (the Spark job's ``--service`` order), this one
    included; empty when it was told none. A client given one shard (a seed) reads the
    others here."""

    shards: list[str] = Field(description="Base URLs of the cluster's shards, in routing order.")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"shards": ["http://shard-0:8080", "http://shard-1:8080"]}]},
    )


class RoutingKey(_Model):
    """A partition key in use on a shard other than ``src``, and the event classes its
    queries read: the job sends an event of one of them also to the shard that owns the
    event's value of the key."""

    key: list[str] = Field(description="The key's attributes; [] for PARTITION BY NONE.")
    classes: list[str] = Field(description="The event classes the key's queries read.")


class SlotMapBody(_Model):
    """The cluster's slot map (docs/architecture.md, "A cluster"): a value belongs to slot
    ``crc32(text) mod 4096``, a slot to a shard, its position in ``shards``. ``owners``
    holds every slot's shard, slot 0 first, as unsigned 16-bit little-endian integers
    in unpadded base64url; a map sent to a shard may give ``ranges`` instead,
    ``[first slot, last slot, shard]`` runs covering every slot once."""

    epoch: int = Field(ge=0, description="Grows by one with every change of the map.")
    shards: list[str] = Field(
        default_factory=list, description="The shards' base URLs in routing order; [] when not named."
    )
    owners: str | None = Field(
        default=None, description="Every slot's shard: 4096 uint16 little-endian, base64url, unpadded."
    )
    ranges: list[list[int]] | None = Field(
        default=None, description="Instead of owners: [first slot, last slot, shard] runs covering 0-4095."
    )


class ClusterRouting(_Model):
    """What the Spark job routes by (docs/architecture.md, "A cluster"): which shard of
    how many this one is (``SCEMON_SHARD``, ``"K/N"``; empty when it was told none, and
    then it owns every value), the keys other than ``src`` its queries use, and the slot
    map it holds."""

    shard: str = Field(description='This shard\'s place, "K/N" (K from 0); empty when not told.')
    keys: list[RoutingKey] = Field(
        description="The partition keys other than src in use, with their classes."
    )
    epoch: int = Field(default=0, description="The epoch of the slot map (sent back with each batch).")
    slots: SlotMapBody | None = Field(
        default=None, description="The slot map; null when this shard was told of no cluster."
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"shard": "0/2", "keys": [{"key": ["symbol"], "classes": ["Buy", "Sell"]}]}]
        },
    )


class ClusterSlots(_Model):
    """A shard's slot map (``GET /v1/cluster/slots``): the cluster's map as this shard
    holds it, its own place in it, and whether a move has fenced it."""

    map: SlotMapBody
    me: int | None = Field(description="This shard's position in the map; null when told none.")
    fenced: bool = Field(description="A move is under way: event batches are refused (503) meanwhile.")
    batches: dict[str, int] = Field(
        default_factory=dict,
        description="Per producer, the highest Spark batch number this shard has taken (or was told "
        "the cluster was at when it joined): a move waits until every shard has the same.",
    )


class SlotFence(_Model):
    """Start (``on``) or end a move's fence on a shard: while fenced it refuses event
    batches with 503 and Retry-After, which the job's sink retries."""

    on: bool


class SlotExport(_Model):
    """The slots whose retained events a move reads from their owner (which must be
    fenced), and the answer: those events, in the order the shard applied them."""

    slots: list[int] = Field(default_factory=list, description="Slots, 0-4095.")
    events: list[dict[str, Any]] = Field(default_factory=list, description="The answer: events as posted.")


class SlotMapPut(_Model):
    """A new slot map for a shard (``PUT /v1/cluster/slots``): its place ``me`` in it,
    and the retained events of the slots it gains, read from their owners."""

    map: SlotMapBody
    me: int | None = Field(
        ge=0,
        description="This shard's position in the map; null for a shard the map leaves out: it then "
        "owns no slot and refuses event batches (409).",
    )
    events: list[dict[str, Any]] = Field(
        default_factory=list, description="Events of the slots this shard gains (SlotExport's answer)."
    )
    batches: dict[str, int] = Field(
        default_factory=dict, description="Per producer, the batch number the cluster is at (ClusterSlots)."
    )
