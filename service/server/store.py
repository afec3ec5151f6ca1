"""The durable state of the service, in one SQLite file (stdlib ``sqlite3``, WAL).

Why these tables, and why one transaction per operation:

- ``ops`` is the ordered log of everything that changed the engine — query
  registrations and unregistrations, event batches, time advances, changes of the
  allowed lateness — at their original positions. A batch posted as JSON is logged as
  JSON (sorted, ids assigned); one posted as Arrow is logged as the bytes that came,
  behind :data:`ARROW_LOG` and its batch id (:func:`arrow_log`): encoding the batch's
  events again cost about as much as decoding them, and the same stable sort and the
  same id rule give back the same events on rebuild (:func:`events_of`). The engine and
  its time keeper are deterministic, so replaying the log into a fresh one rebuilds
  their state (stored instances, partial matches, pending trailing negations, the events
  held in the reorder buffer). Old batches are trimmed once no query's window can reach
  them. A batch's late events (``late``: ``[[index, id, seconds], ...]``) are kept with
  it, so a producer re-sending it is told them again.
- ``batches`` holds every applied ``(producer, batch_id)``, so a batch replayed by a
  producer after a crash — ours or theirs — is recognised.
- ``match_blocks`` is the match log: one row per operation that produced matches, its
  matches as one JSON array text with where each starts and which query each is of
  (:class:`~service.server.blocks.Block`); polling and WebSocket backlogs read it by
  ``seq``. One row per match (and its index entry) was most of the cost of committing a
  batch: about 11 µs a match against 0.7 for the block. (``matches``, the one-row-per-
  match log of older builds, is moved into blocks when such a store is opened.)
- ``queries`` lists the registered queries.
- ``query_texts`` keeps each registered query's canonical text by the position of its
  registration, with the build of the query language that printed it
  (:func:`~service.server.versions.language_version`), so a rebuild need not print it
  again. A cache, not part of the state: its rows are checked when read and one of
  another build or failing its checksum is left out (the query is printed again), so it
  is not in ``CHECKED`` and never refuses the store.
- ``meta`` holds ``next_seq``, ``clock`` (the engine's, released), ``observed`` (the
  largest event time taken or time advanced to) and ``counts``, each query's match
  count and last match end as one JSON object, rewritten by each commit that has
  matches: one UPDATE of ``queries`` per query that matched cost ~3 ms a batch with a
  thousand queries. (``queries.matches`` and ``queries.last_match`` are read only where
  ``counts`` has no entry for the query: stores of older builds.)

A batch's op, its id, its matches and the new ``next_seq`` commit together, so after a
kill the store holds either all of a batch's effects or none of them.

The writer connection belongs to the EngineHost's thread; readers (polling, WebSocket
backlogs) use one connection per thread, which WAL lets run beside the writer.

Checksums: every row of ``ops``, ``match_blocks``, ``meta``, ``queries`` and
``batches`` carries ``crc``, a CRC-32 of its columns (:func:`row_crc`; ``CHECKED``
names the columns), written with the row. ``PRAGMA quick_check`` sees the structure of
the file, not what a row says: a damaged byte inside a row's text (a digit of a match's
``start``) passes it. So the store is refused at start when any row fails its checksum
(:func:`check`, which reads every row as quick_check reads every page); while serving,
rows are checked as they are read (the op log on rebuild, but for the start's first
read of it, just checked; the clocks, every match block a reader takes:
:class:`~service.server.faults.DamagedRows`) and by a periodic
scrub (:meth:`Store.scrub`); what fails is never served and is reported on ``/readyz``
(:attr:`Store.damage`). A store of an older build gets the column, filled in, when it
is first opened.

Faults: every SQLite error is raised as a :class:`~service.server.faults.StoreFault`
that says what it is (disk full, read-only, I/O error, corrupt). A store that cannot be
served is refused when it is opened (:meth:`Store.open`: an empty file without
``init``, a file that is not a scemon store, one ``PRAGMA quick_check`` finds corrupt,
or one with a row failing its checksum) with :class:`~service.server.faults.UnusableStore`.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ecq.event import Event
from service.server import rowscan
from service.server.blocks import Block, Run, u32_bytes, u32_list
from service.server.faults import DamagedRows, StoreFault, UnusableStore

__all__ = [
    "ARROW_LOG",
    "STORE_FILE",
    "arrival_key",
    "arrow_log",
    "Clocks",
    "Meta",
    "Op",
    "Store",
    "StoredQuery",
    "check",
    "events_body",
    "events_of",
]

# No quotes or semicolons in the comments, and none after the column before a crc: SQLite
# rewrites this text when a column is dropped (ALTER TABLE DROP COLUMN), and those break it.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL, crc INTEGER);
CREATE TABLE IF NOT EXISTS ops (
    pos INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,           -- register | unregister | batch | time | lateness
    name TEXT,                    -- the query (register, unregister)
    body BLOB,                    -- register: spec JSON, batch: events JSON or ARROW_LOG
    time REAL,                    -- batch: largest end, time: the time advanced to, lateness: seconds
    late BLOB,                    -- batch: its late events, JSON (null when none)
    clock REAL,                   -- batch: the clock after it (that of the slowest live producer)
    crc INTEGER                   -- the checksum of the row (row_crc), as every table has
);
CREATE TABLE IF NOT EXISTS queries (
    name TEXT PRIMARY KEY,
    spec BLOB NOT NULL,
    pos INTEGER NOT NULL,
    matches INTEGER NOT NULL DEFAULT 0,
    last_match REAL,
    crc INTEGER
);
CREATE TABLE IF NOT EXISTS batches (
    producer TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    accepted INTEGER NOT NULL,
    crc INTEGER,
    PRIMARY KEY (producer, batch_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS matches (seq INTEGER PRIMARY KEY, query TEXT NOT NULL, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS match_blocks (
    first_seq INTEGER PRIMARY KEY,
    next_seq INTEGER NOT NULL,    -- the seq after its last match
    names TEXT NOT NULL,          -- JSON: the distinct query names of its matches
    picks BLOB NOT NULL,          -- per match, the index of its query in names (uint32 LE)
    starts BLOB NOT NULL,         -- per match, where it starts in body, in characters, then len(body)
    -- body: the matches as one JSON array, in seq order
    body BLOB NOT NULL,
    crc INTEGER
);
CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS query_texts (
    pos INTEGER PRIMARY KEY,      -- the registration op
    version TEXT NOT NULL,        -- the build that printed it (service.server.rebuild.TEXT_VERSION)
    text TEXT NOT NULL,           -- the canonical text of the query
    crc INTEGER NOT NULL
);
"""
TABLES = ("meta", "ops", "queries", "batches", "matches")
STORE_FILE = "scemon.sqlite3"

log = logging.getLogger("scemon.store")

# What a probe writes to learn whether the store writes again: about one large batch.
PROBE_BYTES = 256 * 1024

REGISTER, UNREGISTER, BATCH, TIME, LATENESS = "register", "unregister", "batch", "time", "lateness"

# The columns each table's ``crc`` covers, its key (to name a row), and which columns
# are REAL (their values are checksummed as floats: SQLite returns 5.0 for a 5 stored
# there). ``queries.matches`` and ``last_match`` are left out: only older builds wrote them.
CHECKED: dict[str, tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]] = {
    "ops": (("pos", "kind", "name", "body", "time", "late", "clock"), ("pos",), frozenset({"time", "clock"})),
    "match_blocks": (
        ("first_seq", "next_seq", "names", "picks", "starts", "body"),
        ("first_seq", "next_seq"),
        frozenset(),
    ),
    "meta": (("key", "value"), ("key",), frozenset()),
    "queries": (("name", "spec", "pos"), ("name",), frozenset()),
    "batches": (("producer", "batch_id", "pos", "accepted"), ("producer", "batch_id"), frozenset()),
}

_SEP = b"\x1f"
_NULL = b"\x00"


def row_crc(*values: Any) -> int:
    """CRC-32 of a row's values, each as bytes (text as UTF-8, numbers by ``repr``,
    null as a zero byte) and ended by a separator, so no two rows share an encoding.
    zlib's CRC over the values joined (one call: a row of the op log is checked in a
    few microseconds, so a store of 100,000 queries is scanned in well under a second);
    a row holding a large value (a match block's body) is taken a value at a time, so
    that value is not copied."""
    parts = []
    size = 0
    for value in values:
        # The common kinds inline (a third of a scan's time went to a call per value).
        kind = type(value)
        if kind is str:
            part = value.encode()
        elif kind is bytes:
            part = value
        elif value is None:
            part = _NULL
        else:
            part = _encoded(value)
        parts.append(part)
        size += len(part)
    if size <= _JOIN_MAX:
        parts.append(b"")  # the separator after the last value
        return zlib.crc32(_SEP.join(parts))
    crc = 0
    for part in parts:
        crc = zlib.crc32(_SEP, zlib.crc32(part, crc))
    return crc


# Rows up to this many bytes are joined and checksummed in one call.
_JOIN_MAX = 1 << 16


def _encoded(value: Any) -> bytes:
    """What :func:`row_crc` takes for one value (exact types first: SQLite returns them)."""
    kind = type(value)
    if kind is bytes:
        return value  # type: ignore[no-any-return]
    if kind is str:
        return value.encode()  # type: ignore[no-any-return]
    if value is None:
        return _NULL
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return repr(value).encode()


def _text_crc(pos: Any, version: Any, text: Any) -> int:
    """``row_crc(pos, version, text)`` of a kept query text: the same bytes encoded in one
    step when the row holds what it should (a start at 100,000 queries reads them all)."""
    if type(pos) is int and type(version) is str and type(text) is str:
        return zlib.crc32(f"{pos}\x1f{version}\x1f{text}\x1f".encode())
    return row_crc(pos, version, text)


def _real(value: float | None) -> float | None:
    return None if value is None else float(value)


def _meta_rows(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str, int]]:
    return [(key, value, row_crc(key, value)) for key, value in pairs]


_SET_META = "INSERT OR REPLACE INTO meta (key, value, crc) VALUES (?, ?, ?)"
_SET_TEXT = "INSERT OR REPLACE INTO query_texts (pos, version, text, crc) VALUES (?, ?, ?, ?)"


def _checksum(table: str, values: Sequence[Any]) -> int:
    """The checksum of a row of ``table`` as read (``values`` in ``CHECKED`` order)."""
    floats = _FLOATS[table]
    if not floats:
        return row_crc(*values)
    row = list(values)
    for i in floats:
        row[i] = _real(row[i])
    return row_crc(*row)


# Per table, the positions of its REAL columns among the checked ones.
_FLOATS = {
    table: tuple(i for i, c in enumerate(columns) if c in real)
    for table, (columns, _, real) in CHECKED.items()
}


def _name_row(table: str, key: Sequence[Any]) -> str:
    if table == "match_blocks":
        return f"the match block of seqs {key[0]} to {int(key[1]) - 1}"
    if table == "ops":
        return f"logged operation {key[0]}"
    if table == "meta":
        return f"the stored {key[0]!r}"
    if table == "queries":
        return f"the stored query {key[0]!r}"
    return f"the batch id {key[1]!r} of producer {key[0]!r}"


def scan(
    db: sqlite3.Connection, tables: Sequence[str] = tuple(CHECKED), most: int = 20
) -> list[tuple[str, str, tuple[int, int] | None]]:
    """The rows of ``tables`` that fail their checksum, as ``(table, where, seqs)``
    (``seqs``: a match block's ``(first, next)``), at most ``most``; rows without a
    checksum (none once a store is opened by this build) are skipped. Reads every row:
    O(size of the store)."""
    found: list[tuple[str, str, tuple[int, int] | None]] = []
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in tables:
        if table not in present:
            continue
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        columns, key, _ = CHECKED[table]
        if "crc" not in have or not set(columns) <= have:
            continue
        width = len(columns)
        index = [columns.index(k) for k in key]
        cursor = db.execute(f"SELECT {', '.join(columns)}, crc FROM {table} WHERE crc IS NOT NULL")
        for row in cursor:
            if _checksum(table, row[:width]) != row[width]:
                at = [row[i] for i in index]
                seqs = (int(at[0]), int(at[1])) if table == "match_blocks" else None
                found.append((table, _name_row(table, at), seqs))
                if len(found) >= most:
                    cursor.close()
                    return found
    return found


class Op(NamedTuple):
    """One logged operation, as :meth:`Store.ops` yields it. (A named tuple: a rebuild
    reads one per logged operation, a hundred thousand at that many queries, and a frozen
    dataclass cost ten times as much to make.)"""

    pos: int
    kind: str
    name: str | None
    body: bytes | None
    time: float | None
    # A batch's clock after it (None: logged by an older build, the largest end then).
    clock: float | None = None


@dataclass(frozen=True)
class StoredQuery:
    name: str
    spec: dict[str, Any]
    matches: int
    last_match: float | None


@dataclass(frozen=True)
class Clocks:
    """The time keeper's clocks after an operation: the engine's (released) and the
    observed one."""

    released: float
    observed: float


@dataclass(frozen=True)
class Meta:
    """What ``meta`` holds, as last committed."""

    next_seq: int
    clock: float
    observed: float


# The start of a batch logged as posted in Arrow; then the batch id's length in UTF-8
# bytes (2, big-endian), the id, and the Arrow IPC stream. (A JSON log starts with "[".)
ARROW_LOG = b"scemon-arrow-1\n"


# The order a batch is applied in: by ``(end, start)``, stably (ties keep their posted
# order). An attrgetter, not a function: half the cost of the sort's key per event.
arrival_key: Callable[[Event], tuple[float, float]] = attrgetter("end", "start")


def events_body(events: Sequence[Event]) -> bytes:
    """A batch's events as the op log keeps them (JSON, ids assigned)."""
    return orjson.dumps([e.to_dict() for e in events])


def arrow_log(batch_id: str, body: bytes) -> bytes:
    """A batch posted as Arrow, as the op log keeps it: the posted bytes as they came,
    with the batch id that names its id-less events (``"<batch_id>:<index>"``)."""
    key = batch_id.encode()
    return b"".join((ARROW_LOG, len(key).to_bytes(2, "big"), key, body))


def events_of(body: bytes) -> list[Event]:
    """The events of a logged batch, in the order they were applied."""
    if body.startswith(ARROW_LOG):
        at = len(ARROW_LOG)
        size = int.from_bytes(body[at : at + 2], "big")
        batch_id = body[at + 2 : at + 2 + size].decode()
        # Checked when it was posted; read with the same rules, sorted as it was applied.
        # Imported here: the API's models (pydantic) are a tenth of a second that the
        # store's row check (python -m service.server.rowscan) has no use for.
        from service.server.ingest import from_arrow

        events = from_arrow(body[at + 2 + size :], "log", batch_id, sys.maxsize, times=False).events
        events.sort(key=arrival_key)
        return events
    return [
        Event(d["src"], d["type"], d["start"], d["end"], d.get("attrs"), d.get("prob", 1.0), d.get("id"))
        for d in orjson.loads(body)
    ]


class Store:
    """The SQLite store under ``data/``. Methods that write are for the writer thread.

    ``init``: an empty store file (zero bytes) may be started afresh; without it, it is
    refused (a store is never empty once created: an empty one was lost or truncated).
    ``max_bytes``: a cap on the store file's size (0: none); past it writes fail as a
    full disk would."""

    def __init__(self, directory: Path, init: bool = False, max_bytes: int = 0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / STORE_FILE
        self.max_bytes = max_bytes
        checked = check(self.path, init)
        try:
            self._db = self._connect()
            self._db.executescript(SCHEMA)
            self._upgrade()
            # Whether every row's checksum was found right by the check of this very file
            # (this process's, and nothing written since): the first rebuild then reads
            # the op log without checking each row again (a second pass over every
            # registration of a large store). Any write or reopen clears it.
            self._rows_checked = checked and _checked.get(self.path) == _file_stamp(self.path)
            # Each query's (matches, last match end), as committed: see the docstring.
            self._counts = self._read_counts()
        except sqlite3.Error as err:
            raise StoreFault.of(err, self.path) from None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        # Rows found failing their checksum while serving: where -> the seqs of a match
        # block (None for other rows). Any thread adds; /readyz reports them.
        self.damage: dict[str, tuple[int, int] | None] = {}
        # Readers running a read now, and the writer's reopen count (see _reading).
        self._in_use: set[sqlite3.Connection] = set()
        self._generation = 0

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN ... COMMIT) so that one
        # operation's rows commit together, and nothing else is ever in a transaction.
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL under WAL: a commit survives the process being killed (the OS has the
        # WAL pages); only a power cut can lose the latest commits.
        db.execute("PRAGMA synchronous=NORMAL")
        if self.max_bytes:
            page = int(db.execute("PRAGMA page_size").fetchone()[0])
            db.execute(f"PRAGMA max_page_count={max(1, self.max_bytes // page)}")
        return db

    @contextmanager
    def _faults(self) -> Iterator[None]:
        """SQLite errors raised as what they are (:class:`StoreFault`)."""
        try:
            yield
        except sqlite3.Error as err:
            raise StoreFault.of(err, self.path) from None

    def _upgrade(self) -> None:
        """Bring a store written by an older build to this schema (columns added since)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(ops)")}
        if "late" not in columns:
            self._db.execute("ALTER TABLE ops ADD COLUMN late BLOB")
        if "clock" not in columns:
            self._db.execute("ALTER TABLE ops ADD COLUMN clock REAL")
        self._add_checksums()
        if self._db.execute("SELECT 1 FROM matches LIMIT 1").fetchone() is not None:
            self._blocks_from_rows()

    def _add_checksums(self) -> None:
        """Give a store of an older build its ``crc`` columns and fill them in, in one
        transaction (the rows are taken as they are: nothing older can vouch for them)."""
        db = self._db
        missing = [
            table
            for table in CHECKED
            if "crc" not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        ]
        unsealed = [
            t
            for t in CHECKED
            if t not in missing and db.execute(f"SELECT 1 FROM {t} WHERE crc IS NULL LIMIT 1").fetchone()
        ]
        if not missing and not unsealed:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            for table in missing:
                db.execute(f"ALTER TABLE {table} ADD COLUMN crc INTEGER")
            for table in [*missing, *unsealed]:
                columns, key, _ = CHECKED[table]
                where = " AND ".join(f"{k} = ?" for k in key)
                # The keys first (small), then the rows a few at a time: a match log of
                # gigabytes is never in memory at once.
                keys = db.execute(f"SELECT {', '.join(key)} FROM {table} WHERE crc IS NULL").fetchall()
                for at in range(0, len(keys), 64):
                    sealed = []
                    for values in keys[at : at + 64]:
                        row = db.execute(
                            f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", values
                        ).fetchone()
                        sealed.append((_checksum(table, row), *values))
                    db.executemany(f"UPDATE {table} SET crc = ? WHERE {where}", sealed)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        log.info("checksums added to the rows of %s", self.path)

    def _seal(self, table: str, key: tuple[str, ...], values: tuple[Any, ...]) -> None:
        """Write the checksum of a row changed in place (in the caller's transaction)."""
        columns = CHECKED[table][0]
        where = " AND ".join(f"{k} = ?" for k in key)
        row = self._db.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", values).fetchone()
        if row is not None:
            self._db.execute(f"UPDATE {table} SET crc = ? WHERE {where}", (_checksum(table, row), *values))

    def _blocks_from_rows(self) -> None:
        """Move a store's one-row-per-match log (older builds) into blocks of up to
        LEGACY_BLOCK consecutive seqs, in one transaction; the matches read the same."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            run: list[tuple[int, str, bytes]] = []
            for row in db.execute("SELECT seq, query, body FROM matches ORDER BY seq"):  # streamed
                if run and (row[0] != run[-1][0] + 1 or len(run) == LEGACY_BLOCK):
                    self._insert_block(_legacy_block(run))
                    run = []
                run.append(row)
            if run:
                self._insert_block(_legacy_block(run))
            db.execute("DELETE FROM matches")
            db.execute("DROP INDEX IF EXISTS matches_by_query")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        log.info("the match log of %s moved into blocks", self.path)

    def close(self) -> None:
        with self._readers_lock:
            for db in self._readers:
                db.close()
            self._readers.clear()
        self._db.close()

    # --------------------------------------------------------------------- reading

    def size_bytes(self) -> int:
        """The store's size on disk: the database and its write-ahead log."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += self.path.with_name(self.path.name + suffix).stat().st_size
            except FileNotFoundError:
                pass
        return total

    def meta(self) -> Meta:
        """``next_seq`` and the clocks as last committed (a store from before the observed
        clock was kept reads it as the clock)."""
        with self._faults():
            rows = {
                key: self._checked_meta(key, value, crc)
                for key, value, crc in self._db.execute("SELECT key, value, crc FROM meta")
            }
        clock = float(rows.get("clock", "-inf"))
        return Meta(int(rows.get("next_seq", 0)), clock, float(rows.get("observed", clock)))

    def ops(self) -> Iterator[Op]:
        """The op log in its original order, each row's checksum checked unless the
        start's check of the store found every row right and nothing was written since
        (once: a later read, a rebuild while serving, checks them again)."""
        with self._faults():
            checked, self._rows_checked = self._rows_checked, False
            cursor = self._db.execute(
                "SELECT pos, kind, name, body, time, late, clock, crc FROM ops ORDER BY pos"
            )
            for pos, kind, name, body, time, late, clock, crc in cursor:
                if (
                    crc is not None
                    and not checked
                    and row_crc(pos, kind, name, body, _real(time), late, _real(clock)) != crc
                ):
                    cursor.close()
                    raise self._damaged("ops", (pos,))
                yield Op(pos, kind, name, body, time, clock)

    def producers(self) -> dict[str, list[float]]:
        """The live producers as last committed: ``name -> [watermark, wall time last
        heard from]`` (empty for a store of an older build)."""
        with self._faults():
            row = self._db.execute("SELECT value, crc FROM meta WHERE key = 'producers'").fetchone()
        if row is None:
            return {}
        text = self._checked_meta("producers", row[0], row[1])
        return {str(name): [float(mark), float(seen)] for name, (mark, seen) in orjson.loads(text).items()}

    def _checked_meta(self, key: str, value: str, crc: int | None) -> str:
        if crc is not None and row_crc(key, value) != crc:
            raise self._damaged("meta", (key,))
        return value

    def _damaged(self, table: str, key: Sequence[Any]) -> DamagedRows:
        """Note a row that failed its checksum (logged once) and say so."""
        where = _name_row(table, key)
        seqs = (int(key[0]), int(key[1])) if table == "match_blocks" else None
        if where not in self.damage:
            self.damage[where] = seqs
            log.error("the store %s is damaged: %s fails its checksum; it is not served", self.path, where)
        return DamagedRows(self.path, where, seqs)

    def scrub(self) -> list[str]:
        """Check every row's checksum (any thread; its own snapshot): what fails is noted
        in :attr:`damage` (and logged); returns all that is known damaged."""
        with self._reading() as db, self._faults():
            db.execute("BEGIN")
            try:
                found = scan(db, most=1000)
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
        for _table, where, seqs in found:
            if where not in self.damage:
                self.damage[where] = seqs
                log.error(
                    "the store %s is damaged: %s fails its checksum; it is not served", self.path, where
                )
        return list(self.damage)

    def queries(self) -> list[StoredQuery]:
        """Registered queries in registration order, with their match counts."""
        with self._faults():
            rows = self._db.execute("SELECT name, spec FROM queries ORDER BY pos").fetchall()
        counts = self._counts
        return [StoredQuery(name, orjson.loads(spec), *counts.get(name, (0, None))) for name, spec in rows]

    def query_counts(self) -> list[tuple[str, int, int, float | None]]:
        """Registered queries in registration order as ``(name, registration pos,
        matches, last match end)``: what a rebuild needs, without reading their specs."""
        with self._faults():
            rows = self._db.execute("SELECT name, pos FROM queries ORDER BY pos").fetchall()
        counts = self._counts
        return [(name, int(pos), *counts.get(name, (0, None))) for name, pos in rows]

    def query_texts(self, version: str) -> dict[int, str]:
        """The kept canonical texts printed by the build ``version``, by registration pos.
        A cache: a row of another build or failing its checksum is left out (the query
        is printed again), never refused."""
        out: dict[int, str] = {}
        bad = 0
        with self._faults():
            for pos, kept, text, crc in self._db.execute("SELECT pos, version, text, crc FROM query_texts"):
                if kept != version:
                    continue
                if _text_crc(pos, kept, text) != crc:
                    bad += 1
                    continue
                out[pos] = text
        if bad:
            log.warning("%d kept query texts of %s fail their checksum: printed again", bad, self.path)
        return out

    def _read_counts(self) -> dict[str, tuple[int, float | None]]:
        rows = self._db.execute("SELECT name, matches, last_match FROM queries").fetchall()
        counts: dict[str, tuple[int, float | None]] = {name: (n, last) for name, n, last in rows}
        row = self._db.execute("SELECT value, crc FROM meta WHERE key = 'counts'").fetchone()
        text = self._checked_meta("counts", row[0], row[1]) if row else "{}"
        for name, (n, last) in orjson.loads(text).items():
            if name in counts:
                counts[name] = (int(n), last)
        return counts

    def _write_counts(self, counts: dict[str, tuple[int, float | None]]) -> None:
        self._db.executemany(_SET_META, _meta_rows([("counts", orjson.dumps(counts).decode())]))

    def is_applied(self, producer: str, batch_id: str) -> bool:
        with self._faults():
            row = self._db.execute(
                "SELECT 1 FROM batches WHERE producer = ? AND batch_id = ?", (producer, batch_id)
            ).fetchone()
        return row is not None

    def late_of(self, producer: str, batch_id: str) -> bytes | None:
        """The late events recorded with an applied batch (None when it had none, or its
        op has been trimmed)."""
        with self._faults():
            row = self._db.execute(
                "SELECT o.late FROM batches b JOIN ops o ON o.pos = b.pos WHERE b.producer = ? AND b.batch_id = ?",
                (producer, batch_id),
            ).fetchone()
        return None if row is None else row[0]

    def op_count(self) -> int:
        with self._faults():
            return int(self._db.execute("SELECT COUNT(*) FROM ops").fetchone()[0])

    # --------------------------------------------------------------------- writing

    def _next_pos(self) -> int:
        row = self._db.execute("SELECT MAX(pos) FROM ops").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction of the writer connection: committed when the block
        ends, rolled back when it fails; an SQLite error comes out as a
        :class:`StoreFault` saying what it was.

        Why the rollback is guarded: when a commit fails for a full disk or an I/O
        error, SQLite may have rolled the transaction back itself, and a ROLLBACK then
        raises "cannot rollback - no transaction is active", which hid the real error.
        """
        db = self._db
        self._rows_checked = False
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error as err:  # the first error is the one to report
                        log.warning("rollback after a failed write also failed: %s", err)
                raise
        except sqlite3.Error as err:
            raise StoreFault.of(err, self.path) from None

    def reopen(self) -> None:
        """Open the writer connection again. Why: SQLite opens a file it may not write
        read-only, and that connection stays read-only after the file is made writable;
        only a new one can write. The old one is closed first: while it is open, a new
        connection of this process shares its read-only state of the file. If the new
        one cannot be opened, the next call tries again (until then every write fails
        as that open did)."""
        with self._readers_lock:
            self._generation += 1
            for reader in [r for r in self._readers if r not in self._in_use]:
                self._drop_reader(reader)  # a reader busy now is dropped when done
        self._rows_checked = False
        self._db.close()
        try:
            self._db = self._connect()
        except sqlite3.Error as err:
            raise StoreFault.of(err, self.path) from None

    def probe(self, nbytes: int = PROBE_BYTES, reopen: bool = False) -> None:
        """Write ``nbytes`` and take them back, in two commits: raises :class:`StoreFault`
        while the store cannot write that much (the disk is full, read-only, failing).
        ``reopen``: on a fresh writer connection (:meth:`reopen`)."""
        if reopen:
            self.reopen()
        with self._writing() as db:
            db.execute("DELETE FROM probe")
            db.execute("INSERT INTO probe (body) VALUES (zeroblob(?))", (nbytes,))
        with self._writing() as db:
            db.execute("DELETE FROM probe")

    def commit_register(
        self,
        entries: Sequence[tuple[str, dict[str, Any]]],
        texts: Sequence[str] | None = None,
        version: str = "",
        at: float | None = None,
    ) -> None:
        """Log queries registered together (a bulk call) in one transaction; ``texts``:
        their canonical texts as printed by the build ``version``, kept beside them so
        a rebuild need not print them again (:meth:`query_texts`). ``at``: the event
        time they are held for (the op's ``time``), None when installed at once."""
        when = _real(at)
        with self._writing() as db:
            pos = self._next_pos()
            ops, rows, printed = [], [], []
            for offset, (name, spec) in enumerate(entries):
                body = orjson.dumps(spec)
                at_pos = pos + offset
                ops.append(
                    (
                        at_pos,
                        REGISTER,
                        name,
                        body,
                        when,
                        row_crc(at_pos, REGISTER, name, body, when, None, None),
                    )
                )
                rows.append((name, body, at_pos, row_crc(name, body, at_pos)))
                if texts is not None:
                    printed.append((at_pos, version, texts[offset], row_crc(at_pos, version, texts[offset])))
            db.executemany(
                "INSERT INTO ops (pos, kind, name, body, time, crc) VALUES (?, ?, ?, ?, ?, ?)", ops
            )
            db.executemany("INSERT INTO queries (name, spec, pos, crc) VALUES (?, ?, ?, ?)", rows)
            # A text kept at one of these positions (an op dropped since) is not theirs.
            db.execute("DELETE FROM query_texts WHERE pos >= ?", (pos,))
            db.executemany(_SET_TEXT, printed)
        self._counts = {**self._counts, **{name: (0, None) for name, _ in entries}}

    def keep_texts(self, texts: Sequence[tuple[int, str]], version: str) -> None:
        """Keep canonical texts printed by a rebuild (``(registration pos, text)``) for
        the next one: registrations logged without them (an older build) or printed by
        another build."""
        with self._writing() as db:
            db.executemany(
                _SET_TEXT, [(pos, version, text, row_crc(pos, version, text)) for pos, text in texts]
            )

    def commit_unregister(self, name: str, at: float | None = None) -> None:
        """Log a query's deletion. ``at``: the event time it is held for (the op's
        ``time``; an op without one, as every older build wrote, deletes at once): the
        query stays listed, with its counts, until the op that reaches ``at`` forgets it
        (``forget`` of :meth:`commit_batch` / :meth:`commit_time`)."""
        when = _real(at)
        with self._writing() as db:
            pos = self._next_pos()
            db.execute(
                "INSERT INTO ops (pos, kind, name, time, crc) VALUES (?, ?, ?, ?, ?)",
                (pos, UNREGISTER, name, when, row_crc(pos, UNREGISTER, name, None, when, None, None)),
            )
            if at is not None:
                return
            counts = self._forget([name], self._counts)
        self._counts = counts

    def cancel_unregister(self, name: str) -> bool:
        """Take a held deletion of the registered query ``name`` out of the log (it has
        changed nothing yet, so the log is then as if it had never been asked for);
        False when none is held."""
        with self._writing() as db:
            row = db.execute("SELECT pos FROM queries WHERE name = ?", (name,)).fetchone()
            if row is None:
                return False
            gone = db.execute(
                "DELETE FROM ops WHERE kind = ? AND name = ? AND time IS NOT NULL AND pos > ?",
                (UNREGISTER, name, row[0]),
            ).rowcount
        return bool(gone)

    def forget_queries(self, names: Sequence[str]) -> None:
        """Drop the rows and counts of queries a held delete removed (a rebuild that
        found them removed by its replay)."""
        with self._writing():
            counts = self._forget(names, self._counts)
        self._counts = counts

    def _forget(
        self, names: Sequence[str], counts: dict[str, tuple[int, float | None]]
    ) -> dict[str, tuple[int, float | None]]:
        """Drop deleted queries' rows and their ``counts`` (in the caller's transaction);
        returns the counts to keep once it commits."""
        counts = dict(counts)
        for name in names:
            counts.pop(name, None)  # a query registered again under the name starts from 0
            self._db.execute(
                "DELETE FROM query_texts WHERE pos = (SELECT pos FROM queries WHERE name = ?)", (name,)
            )
            self._db.execute("DELETE FROM queries WHERE name = ?", (name,))
        self._write_counts(counts)
        return counts

    def commit_batch(
        self,
        producer: str,
        batch_id: str,
        events: bytes,
        accepted: int,
        max_end: float,
        matches: Block | None,
        counts: dict[str, tuple[int, float]],
        next_seq: int,
        clocks: Clocks,
        late: bytes | None = None,
        clock: float | None = None,
        producers: bytes | None = None,
        forget: Sequence[str] = (),
    ) -> None:
        """One batch's effects, together: its op (with its late events and the clock
        after it), its id, its matches (one block, None when none), the per-query counts
        (``name -> (new matches, last match end)``), ``next_seq``, the clocks, the
        producers' watermarks (JSON) and the queries a held delete removed (``forget``)."""
        with self._writing() as db:
            pos = self._next_pos()
            db.execute(
                "INSERT INTO ops (pos, kind, body, time, late, clock, crc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    pos,
                    BATCH,
                    events,
                    max_end,
                    late,
                    clock,
                    row_crc(pos, BATCH, None, events, _real(max_end), late, _real(clock)),
                ),
            )
            if producers is not None:
                db.executemany(_SET_META, _meta_rows([("producers", producers.decode())]))
            db.execute(
                "INSERT INTO batches (producer, batch_id, pos, accepted, crc) VALUES (?, ?, ?, ?, ?)",
                (producer, batch_id, pos, accepted, row_crc(producer, batch_id, pos, accepted)),
            )
            totals = self._write_matches(matches, counts, next_seq, clocks)
            if forget:
                totals = self._forget(forget, totals)
        self._counts = totals

    def commit_time(
        self,
        time: float,
        matches: Block | None,
        counts: dict[str, tuple[int, float]],
        next_seq: int,
        clocks: Clocks,
        kind: str = TIME,
        forget: Sequence[str] = (),
    ) -> None:
        """A time advance (or, ``kind=LATENESS``, a change of the allowed lateness to
        ``time`` seconds), the matches it released and the queries a held delete
        removed (``forget``)."""
        with self._writing() as db:
            pos = self._next_pos()
            db.execute(
                "INSERT INTO ops (pos, kind, time, crc) VALUES (?, ?, ?, ?)",
                (pos, kind, time, row_crc(pos, kind, None, None, _real(time), None, None)),
            )
            totals = self._write_matches(matches, counts, next_seq, clocks)
            if forget:
                totals = self._forget(forget, totals)
        self._counts = totals

    def _insert_block(self, block: Block) -> None:
        names = list(dict.fromkeys(block.queries))
        index = {name: k for k, name in enumerate(names)}
        row = (
            block.first,
            block.next_seq,
            orjson.dumps(names).decode(),
            u32_bytes([index[q] for q in block.queries]),
            u32_bytes(block.starts),
            block.text.encode(),
        )
        self._db.execute(
            "INSERT INTO match_blocks (first_seq, next_seq, names, picks, starts, body, crc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*row, row_crc(*row)),
        )

    def _write_matches(
        self, matches: Block | None, counts: dict[str, tuple[int, float]], next_seq: int, clocks: Clocks
    ) -> dict[str, tuple[int, float | None]]:
        """Write an operation's matches, the counts and meta; returns the counts to keep
        once the transaction commits (a copy: a failed commit leaves them as they were)."""
        db = self._db
        totals = self._counts
        if matches:
            self._insert_block(matches)
        if counts:
            totals = dict(totals)
            for name, (n, last) in counts.items():
                if name in totals:  # an unregistered query's match (its last) counts for none
                    totals[name] = (totals[name][0] + n, last)
            self._write_counts(totals)
        db.executemany(
            _SET_META,
            _meta_rows(
                [
                    ("next_seq", str(next_seq)),
                    ("clock", repr(clocks.released)),
                    ("observed", repr(clocks.observed)),
                ]
            ),
        )
        return totals

    def rewrite_ops(
        self,
        batches: Sequence[tuple[bytes, float, int]],
        drop: Sequence[int],
        clocks: Clocks,
        batch_clocks: Sequence[tuple[float, int]] = (),
    ) -> None:
        """Replace the events of logged batches (``(events, largest end, pos)``), drop ops
        by position, lower batches' logged clocks (``(clock, pos)``), set the clocks and
        forget the producers' watermarks, in one transaction (``scemon admin
        repair-clock``)."""
        with self._writing() as db:
            db.executemany(
                "UPDATE ops SET body = ?, time = ? WHERE pos = ? AND kind = ?", [(*b, BATCH) for b in batches]
            )
            db.executemany("DELETE FROM ops WHERE pos = ?", [(pos,) for pos in drop])
            db.executemany("UPDATE ops SET clock = ? WHERE pos = ?", list(batch_clocks))
            changed = {pos for *_, pos in batches} | {pos for _, pos in batch_clocks}
            for pos in sorted(changed):
                self._seal("ops", ("pos",), (pos,))
            db.execute("DELETE FROM meta WHERE key = 'producers'")
            db.executemany(
                _SET_META, _meta_rows([("clock", repr(clocks.released)), ("observed", repr(clocks.observed))])
            )

    def last_batches(self) -> dict[str, int]:
        """Per producer, the highest Spark batch number among its applied batch ids of
        the job's form ``<number>.<chunk>`` (a slot move waits until every shard has
        the same: no batch half delivered)."""
        with self._faults():
            rows = self._db.execute(
                "SELECT producer, MAX(CAST(substr(batch_id, 1, instr(batch_id, '.') - 1) AS INTEGER)) "
                "FROM batches WHERE batch_id GLOB '[0-9]*.[0-9]*' GROUP BY producer"
            ).fetchall()
        return {producer: int(n) for producer, n in rows if n is not None}

    def splice_ops(
        self, ops: Sequence[tuple[int | None, str, str | None, bytes | None, float | None, float | None]]
    ) -> None:
        """Replace the op log with ``ops`` in this order, in one transaction (a slot
        move splices another shard's events in, service.server.sharding). Each is
        ``(its position before or None for a new op, kind, name, body, time, clock)``;
        an op that was there keeps its late events, and the batch ids and queries that
        named its position follow it. Positions are given afresh after every one used
        before, so a batch id whose op was trimmed names none of them. The kept query
        texts (a cache) are dropped: the next rebuild prints them again."""
        with self._faults():
            late = dict(self._db.execute("SELECT pos, late FROM ops").fetchall())
            tops = [
                self._db.execute(f"SELECT MAX(pos) FROM {table}").fetchone()[0]
                for table in ("ops", "batches", "queries", "query_texts")
            ]
        base = max((int(t) for t in tops if t is not None), default=-1) + 1
        moved: dict[int, int] = {}
        rows = []
        for offset, (old, kind, name, body, time, clock) in enumerate(ops):
            pos = base + offset
            kept = late.get(old) if old is not None else None
            if old is not None:
                moved[old] = pos
            rows.append(
                (
                    pos,
                    kind,
                    name,
                    body,
                    time,
                    kept,
                    clock,
                    row_crc(pos, kind, name, body, _real(time), kept, _real(clock)),
                )
            )
        with self._writing() as db:
            db.execute("DELETE FROM ops")
            db.executemany(
                "INSERT INTO ops (pos, kind, name, body, time, late, clock, crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            for producer, batch_id, pos in db.execute(
                "SELECT producer, batch_id, pos FROM batches"
            ).fetchall():
                if pos in moved:
                    db.execute(
                        "UPDATE batches SET pos = ? WHERE producer = ? AND batch_id = ?",
                        (moved[pos], producer, batch_id),
                    )
                    self._seal("batches", ("producer", "batch_id"), (producer, batch_id))
            for name, pos in db.execute("SELECT name, pos FROM queries").fetchall():
                if pos in moved:
                    db.execute("UPDATE queries SET pos = ? WHERE name = ?", (moved[pos], name))
                    self._seal("queries", ("name",), (name,))
            db.execute("DELETE FROM query_texts")

    def trim(self, horizon: float, keep: set[str], match_log_max: int, next_seq: int) -> int:
        """Drop what replay no longer needs; returns the number of ops dropped.

        Every batch before the first batch whose events reach ``horizon`` goes, with the
        time advances among them. A registration goes only with its unregistration, when
        both lie in the dropped stretch and no live query reads the name (``keep``) — a
        held unregistration once it has taken effect (the query is no longer listed);
        registrations of live queries stay, so replay registers them first. The match
        log keeps the latest ``match_log_max`` matches, in whole blocks (so up to a
        block more). Of the lateness changes in the
        dropped stretch only the last stays: it is the lateness in force at the cut.
        """
        with self._faults():
            return self._trim(horizon, keep, match_log_max, next_seq)

    def _trim(self, horizon: float, keep: set[str], match_log_max: int, next_seq: int) -> int:
        db = self._db
        row = db.execute("SELECT MIN(pos) FROM ops WHERE kind = ? AND time >= ?", (BATCH, horizon)).fetchone()
        cut = row[0] if row[0] is not None else self._next_pos()
        drop: list[int] = []
        open_reg: dict[str, int] = {}
        lateness = [
            pos for (pos,) in db.execute("SELECT pos FROM ops WHERE pos < ? AND kind = ?", (cut, LATENESS))
        ]
        drop += sorted(lateness)[:-1]
        # A held deletion still waiting for its time (of the query registered under
        # the name now, logged after it) has not closed the registration yet.
        live = dict(db.execute("SELECT name, pos FROM queries").fetchall())
        for pos, kind, name, time in db.execute(
            "SELECT pos, kind, name, time FROM ops WHERE pos < ? AND kind IN (?, ?) ORDER BY pos",
            (cut, REGISTER, UNREGISTER),
        ):
            if kind == REGISTER:
                open_reg[name] = pos
            elif time is not None and name in live and live[name] < pos:
                continue
            elif name in open_reg:
                reg = open_reg.pop(name)
                if name not in keep:
                    drop += [reg, pos]
        with self._writing() as db:
            dropped = db.execute(
                "DELETE FROM ops WHERE pos < ? AND kind IN (?, ?)", (cut, BATCH, TIME)
            ).rowcount
            db.executemany("DELETE FROM ops WHERE pos = ?", [(p,) for p in drop])
            db.execute("DELETE FROM match_blocks WHERE next_seq <= ?", (next_seq - match_log_max,))
        return int(dropped) + len(drop)

    # ------------------------------------------------------------- reading matches

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """This thread's reader connection, marked in use while the block runs. One
        opened before the writer's last :meth:`reopen` is replaced: SQLite shares a
        file's state among a process's connections, so a reader opened while the file
        was read-only would keep the new writer read-only too."""
        local = self._local
        with self._readers_lock:
            db: sqlite3.Connection | None = getattr(local, "db", None)
            if db is not None and local.generation != self._generation:
                self._drop_reader(db)
                db = None
            if db is None:
                with self._faults():
                    db = self._connect()
                local.db, local.generation = db, self._generation
                self._readers.append(db)
            self._in_use.add(db)
        try:
            yield db
        finally:
            with self._readers_lock:
                self._in_use.discard(db)
                if local.generation != self._generation:  # reopened meanwhile
                    self._drop_reader(db)
                    local.db = None

    def _drop_reader(self, db: sqlite3.Connection) -> None:
        # With _readers_lock held. Closing a closed connection does nothing.
        db.close()
        if db in self._readers:
            self._readers.remove(db)

    def read_matches(
        self, from_seq: int, limit: int, queries: frozenset[str] | None = None
    ) -> tuple[list[tuple[int, str]], int, int]:
        """Matches with ``seq >= from_seq`` (of ``queries``, when given) in ``seq`` order,
        at most ``limit``, as ``(seq, JSON text)``; with the committed ``next_seq`` and the
        oldest retained seq, all read in one snapshot. Any thread."""
        runs, next_seq, first_seq = self.read_runs(from_seq, limit, queries)
        return (
            [pair for run in runs for pair in zip(run.seqs(), run.texts(), strict=True)],
            next_seq,
            first_seq,
        )

    def read_runs(
        self,
        from_seq: int,
        limit: int,
        queries: frozenset[str] | None = None,
        whole: bool = False,
        partial: bool = False,
    ) -> tuple[list[Run], int, int]:
        """:meth:`read_matches` as runs of the log's blocks (no text copied per match);
        ``whole``: the last block is not cut at ``limit`` (a WebSocket backlog takes
        whole blocks, whose frames are cut once). Any thread. A block failing its
        checksum is never returned: a read that reaches it raises
        :class:`~service.server.faults.DamagedRows` (naming its seqs); with
        ``partial``, one that reaches it after some matches returns those, with
        ``next_seq`` its first seq (the next read then starts in it and raises)."""
        with self._reading() as db, self._faults():
            return self._read_runs(db, from_seq, limit, queries, whole, partial)

    def _read_runs(
        self,
        db: sqlite3.Connection,
        from_seq: int,
        limit: int,
        queries: frozenset[str] | None,
        whole: bool,
        partial: bool = False,
    ) -> tuple[list[Run], int, int]:
        runs: list[Run] = []
        db.execute("BEGIN")
        try:
            row = db.execute("SELECT value, crc FROM meta WHERE key = 'next_seq'").fetchone()
            next_seq = int(self._checked_meta("next_seq", row[0], row[1])) if row else 0
            first = db.execute("SELECT MIN(first_seq) FROM match_blocks").fetchone()[0]
            first_seq = next_seq if first is None else int(first)
            if limit <= 0 or from_seq >= next_seq:
                return runs, next_seq, first_seq
            # The block holding from_seq (blocks are contiguous), then those after it.
            start = db.execute(
                "SELECT MAX(first_seq) FROM match_blocks WHERE first_seq <= ?", (from_seq,)
            ).fetchone()[0]
            # Read lazily, block by block, until ``limit`` matches are taken: a reader far
            # behind reads a page's worth, not the rest of the log.
            heads = db.execute(
                "SELECT first_seq, names FROM match_blocks WHERE first_seq >= ? AND first_seq < ? ORDER BY first_seq",
                (start if start is not None else from_seq, next_seq),
            )
            taken = 0
            for block_first, names_text in heads:
                if queries is not None and not any(f'"{q}"' in names_text for q in queries):
                    continue  # none of its matches is wanted: its body is not read
                block_next, picks, starts, body, crc = db.execute(
                    "SELECT next_seq, picks, starts, body, crc FROM match_blocks WHERE first_seq = ?",
                    (block_first,),
                ).fetchone()
                if (
                    crc is not None
                    and row_crc(block_first, block_next, names_text, picks, starts, body) != crc
                ):
                    heads.close()
                    damage = self._damaged("match_blocks", (block_first, block_next))
                    if not runs or not partial:
                        raise damage
                    # The intact matches before it, as a page that ends where it begins: the
                    # reader's next read starts at the damaged block and is told.
                    return runs, int(block_first), first_seq
                names = orjson.loads(names_text)
                block = Block(
                    block_first, [names[k] for k in u32_list(picks)], body.decode(), u32_list(starts)
                )
                run = Run(block, range(len(block)) if queries is None else block.of_queries(queries))
                cut = run.after(from_seq - 1)
                if cut is None:
                    continue
                if not whole and taken + len(cut) > limit:
                    cut = Run(block, cut.picks[: limit - taken])
                runs.append(cut)
                taken += len(cut)
                if taken >= limit:
                    break
            heads.close()  # done with it before the snapshot ends
        finally:
            if db.in_transaction:
                db.execute("COMMIT")
        return runs, next_seq, first_seq

    def has_matches_of(self, query: str) -> bool:
        """Whether the match log holds a match of ``query`` (which may be gone now). Any
        thread. O(blocks): a query name has no quote, so its JSON string is found in a
        block's names only as that name."""
        with self._reading() as db, self._faults():
            row = db.execute(
                "SELECT 1 FROM match_blocks WHERE instr(names, ?) > 0 LIMIT 1",
                (orjson.dumps(query).decode(),),
            ).fetchone()
        return row is not None


# A legacy match log is moved into blocks of at most this many matches.
LEGACY_BLOCK = 10_000


def _legacy_block(rows: list[tuple[int, str, bytes]]) -> Block:
    """Consecutive rows of the one-row-per-match log as a block."""
    return Block.of(
        rows[0][0], [query for _, query, _ in rows], [bytes(body).decode() for _, _, body in rows]
    )


def check(path: Path, init: bool) -> bool:
    """Refuse a store that cannot be served (:class:`UnusableStore`, naming the file and
    the fix): an empty file unless ``init`` (then it is started afresh), a file that is
    not an SQLite database or not a scemon store, one that ``PRAGMA quick_check`` finds
    damaged, or one with a row failing its checksum (:func:`scan`). A missing file is a
    new store. O(size of the file): quick_check reads every page and checks the
    structure of every b-tree (not the index-to-table consistency ``integrity_check``
    adds), and the scan reads every row. Returns whether every row of the file was
    checked (False: there is no store yet)."""
    return check_started(path, init, background=False)()


def check_started(path: Path, init: bool, background: bool = True) -> Callable[[], bool]:
    """:func:`check`, its scan of every row's checksum left running in a child process
    (``background``): the file's structure is checked here (raising what ``check``
    raises), and the function returned waits for the rows' verdict, then raises or
    returns what ``check`` would. ``scemon serve`` imports the server meanwhile: the
    scan of a store of 100,000 queries (half a second of Python) then costs a start
    nothing on a second core. If the child cannot give a verdict (it could not start,
    or died), the rows are scanned here instead, and the log says so."""
    if not path.exists():
        log.info("no store at %s: starting a new one", path)
        return lambda: False
    if _checked.get(path) == _file_stamp(path):  # `scemon serve` checked it before the app opened it
        return lambda: True
    if path.stat().st_size == 0:
        if init:
            log.warning("the store %s is empty: --init given, starting a new one", path)
            path.unlink()
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            return lambda: False
        raise UnusableStore(
            f"the store {path} is empty (0 bytes): a store is never empty once created, so it was "
            "lost or truncated; restore it from a backup, or run `scemon serve --init` to start "
            "an empty store in its place (queries, matches and batch ids start over)"
        )
    damaged: list[tuple[str, str, tuple[int, int] | None]] = []
    with _checking(path) as db:
        problems = [" ".join(str(row[0]).split()) for row in db.execute("PRAGMA quick_check(3)")]
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if problems != ["ok"]:
            raise UnusableStore(
                f"the store {path} is damaged (PRAGMA quick_check: {'; '.join(problems)}): {_aside(path)}"
            )
        if not set(TABLES) <= tables:
            raise UnusableStore(
                f"{path} is an SQLite database but not a scemon store (no tables {', '.join(TABLES)}): "
                "point --data at a scemon store or an empty folder"
            )
        if not background:
            damaged = scan(db, most=5)
    child = _start_scan(path) if background else None

    def verdict() -> bool:
        nonlocal damaged
        if child is not None:
            found = _scan_verdict(path, child)
            if found is None:
                with _checking(path) as db:
                    found = scan(db, most=5)
            damaged = found
        if damaged:
            what = "; ".join(where for _, where, _ in damaged)
            raise UnusableStore(f"the store {path} is damaged (rows failing their checksum: {what}): {_aside(path)}")
        # As the file is now: closing the check's connection, the last one, moved the
        # pages of a write-ahead log left by a kill into the file (a new size and mtime,
        # the same rows), and the store's own open would otherwise scan every row again.
        _checked[path] = _file_stamp(path)
        return True

    return verdict


def _aside(path: Path) -> str:
    return (
        f"restore it from a backup, or move it aside (mv {path} {path}.bad) and start again for an "
        "empty store (queries, matches and batch ids start over)"
    )


@contextmanager
def _checking(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection for checking the store file: its errors, and a row that cannot even
    be read, raised as :class:`UnusableStore` saying so."""
    try:
        # Read-write, not mode=ro: opening a WAL store after a crash may need to rebuild
        # its shared-memory index. Nothing is written by the check itself.
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as err:
        raise UnusableStore(f"the store {path} cannot be opened ({err}): {_aside(path)}") from None
    try:
        yield db
    except sqlite3.Error as err:
        raise UnusableStore(f"the store {path} is damaged ({' '.join(str(err).split())}): {_aside(path)}") from None
    except (UnicodeDecodeError, ValueError, OverflowError) as err:  # a damaged row that cannot even be read
        raise UnusableStore(f"the store {path} is damaged (a row cannot be read: {err}): {_aside(path)}") from None
    finally:
        db.close()


def _start_scan(path: Path) -> subprocess.Popen[bytes] | None:
    """A child process scanning every row of ``path`` (service.server.rowscan); None if
    it cannot be started (the rows are then scanned in this process)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "service.server.rowscan", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as err:
        log.warning("the rows of %s are checked in this process (no child process: %s)", path, err)
        return None


def _scan_verdict(path: Path, child: subprocess.Popen[bytes]) -> list[tuple[str, str, tuple[int, int] | None]] | None:
    """What the child scanning ``path`` found (raising UnusableStore for a store it found
    unreadable); None when it gave no verdict."""
    out, err = child.communicate()
    if child.returncode == rowscan.UNREADABLE:
        raise UnusableStore(err.decode(errors="replace").strip())
    if child.returncode == 0:
        try:
            return [
                (table, where, None if seqs is None else (seqs[0], seqs[1]))
                for table, where, seqs in orjson.loads(out)
            ]
        except (orjson.JSONDecodeError, TypeError, ValueError):
            pass
    tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
    log.warning("the rows of %s are checked in this process (the child checking them failed: %s)", path, tail[0])
    return None


def _file_stamp(path: Path) -> tuple[int, int] | None:
    """The size and mtime of a store file (None: there is none)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


# Stores that passed the check in this process, with their size and mtime then.
_checked: dict[Path, tuple[int, int] | None] = {}
