"""A stand-in for ``scemon serve`` that speaks only the sink's side of the contract.

``POST /v1/events`` (Arrow), ``GET /healthz``; it records each applied batch, answers a
re-posted ``(producer, batch_id)`` with ``duplicate: true``, and can be told to fail the
next posts with 503 or to refuse an event with 422 — what a real service cannot be made
to do on demand. The end-to-end tests use the real service.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pyarrow as pa


@dataclass
class FakeService:
    url: str = ""
    batches: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    schemas: list[pa.Schema] = field(default_factory=list)
    posts: int = 0
    fail_next: int = 0  # answer this many posts with 503
    reject_id: str | None = None  # answer 422 naming the event with this id
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [event for batch in self.batches.values() for event in batch]


def _handler(state: FakeService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: object) -> None:
            data = orjson.dumps(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/healthz", "/readyz"):
                self._answer(200, {"status": "ok"})
            elif self.path == "/v1/cluster/routing":
                self._answer(200, {"shard": "", "keys": []})  # queries by source only
            else:
                self._answer(404, {"detail": {"message": "no such route"}})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            key = (self.headers["X-Scemon-Producer"], self.headers["X-Scemon-Batch-Id"])
            with state.lock:
                state.posts += 1
                if state.fail_next > 0:
                    state.fail_next -= 1
                    self._answer(503, {"detail": {"message": "try later"}})
                    return
                table = pa.ipc.open_stream(body).read_all()
                rows = table.to_pylist()
                for index, row in enumerate(rows):
                    if state.reject_id is not None and row.get("id") == state.reject_id:
                        detail = {"message": "too expensive", "index": index, "field": "attrs"}
                        self._answer(422, {"detail": detail})
                        return
                if key in state.batches:
                    self._answer(200, {"accepted": 0, "duplicate": True, "matches": 0})
                    return
                state.batches[key] = rows
                state.schemas.append(table.schema)
            self._answer(200, {"accepted": len(rows), "duplicate": False, "matches": 0})

    return Handler


@contextmanager
def fake_service() -> Iterator[FakeService]:
    """A fake service on a free loopback port, for the duration of the block."""
    state = FakeService()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
