"""How long a client may take to send a request, and how many connections are open.

Why: uvicorn times out only an idle keep-alive connection *after* a response. A client
that connects and sends half a header, or a header and one byte of a promised body, was
held forever: 1,100 such connections took every file descriptor and locked every other
client out, with no log line. So, as nginx does (``client_header_timeout``,
``client_body_timeout``):

- **Headers**: from the moment a connection opens (or the next request on it starts),
  its headers must be complete within ``header_timeout`` seconds — a deadline, not an
  idle timer, so a byte every few seconds does not keep it open.
- **Body**: while a request's body is coming, no more than ``body_timeout`` seconds may
  pass without a byte (an idle timer: a large batch over a slow link keeps going).

Either way the connection is closed (the route, if it runs, sees the client gone) and
one line is logged, with the count of such closures so far. The connection cap is
uvicorn's ``limit_concurrency`` (a request beyond it is answered 503 and logged); and
:func:`raise_open_files` lifts the process's soft limit on open files to make room for
that many connections.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["TimedHttpProtocol", "raise_open_files", "timed_protocol"]

log = logging.getLogger("scemon.http")

# Seconds between two log lines saying the connection cap is reached.
CAP_LOG_EVERY = 10.0

# Descriptors besides the connections: the store, its readers, the log, Python's own.
SPARE_FILES = 256


class TimedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a body idle timeout (see
    the module docstring). Set the class attributes with :func:`timed_protocol`."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    # Connections closed for each reason since the process started (for the log line).
    closed: dict[str, int] = {"header": 0, "body": 0}  # noqa: RUF012 (shared on purpose)
    # Requests answered 503 for the connection cap, and when that was last logged.
    refused = 0
    cap_logged = -float("inf")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timer: asyncio.TimerHandle | None = None
        self._in_body = False

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(seconds, self._expired, what)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _expired(self, what: str) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        TimedHttpProtocol.closed[what] += 1
        seconds = self.header_timeout if what == "header" else self.body_timeout
        peer = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.warning(
            "closed the connection of %s: its request's %s did not arrive within %g s "
            "(%d connections closed so far for a late header, %d for a stalled body)",
            peer,
            "headers" if what == "header" else "body",
            seconds,
            TimedHttpProtocol.closed["header"],
            TimedHttpProtocol.closed["body"],
        )
        self.transport.close()

    def _at_cap(self, limit: int) -> None:
        """Say, at most every CAP_LOG_EVERY seconds, that requests get 503 for the cap."""
        TimedHttpProtocol.refused += 1
        now = self.loop.time()
        if now - TimedHttpProtocol.cap_logged >= CAP_LOG_EVERY:
            TimedHttpProtocol.cap_logged = now
            log.warning(
                "connection cap reached: %d connections open (--max-connections %d); requests are "
                "answered 503 until some close (%d refused so far)",
                len(self.connections),
                limit,
                TimedHttpProtocol.refused,
            )

    # The connection and httptools' parser callbacks.

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout, "header")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_body:
            self._arm(self.body_timeout, "body")  # bytes of the body came: idle again
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._read_timer is None:  # the next request on a kept-alive connection
            self._arm(self.header_timeout, "header")

    def on_headers_complete(self) -> None:
        self._disarm()
        limit = self.limit_concurrency
        upgrade = self.parser.should_upgrade() and self._should_upgrade()
        # uvicorn's own test, which answers 503 (a WebSocket upgrade is not held to it).
        if limit is not None and not upgrade and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self._at_cap(limit)
        super().on_headers_complete()
        if self.transport.is_closing():
            return
        # A WebSocket upgrade hands the connection over when the headers are complete.
        if not upgrade:
            self._in_body = True
            self._arm(self.body_timeout, "body")

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        super().on_message_complete()


def timed_protocol(header_timeout: float, body_timeout: float) -> type[TimedHttpProtocol]:
    """A protocol class with these timeouts (uvicorn builds one instance per connection)."""
    return type(
        "TimedHttpProtocol",
        (TimedHttpProtocol,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )


def raise_open_files(connections: int) -> int:
    """Lift the soft limit on open files towards ``connections`` + SPARE_FILES (never
    above the hard limit, which only the service manager raises: ``LimitNOFILE``).
    Returns the soft limit now in force; logs when it is below what was wanted."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
    if soft != resource.RLIM_INFINITY and soft < wanted:
        log.warning(
            "open files are limited to %d, fewer than --max-connections %d needs (%d): raise the hard "
            "limit (systemd: LimitNOFILE=) or lower --max-connections",
            soft,
            connections,
            wanted,
        )
    return int(soft)
