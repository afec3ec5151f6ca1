"""Half-sent requests: connections that send half a header, or a POST header promising
1,000 bytes and then one byte, are closed after the header or body timeout (with a log
line), and another client is served meanwhile and after. With the connection cap
reached, a request is answered 503 and the log says why; once the half-sent connections
are closed, requests are served again.

Counts are small (tens of connections, 2 s timeouts): what is shown is that every such
connection ends, not how many a machine can hold."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.service.conftest import Server, StartServer

pytestmark = pytest.mark.faults

TIMEOUT = 2  # seconds, for both the header and the body
HALF_BODY = (
    b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000\r\n\r\n{"
)
HALF_HEADER = b"POST /v1/queries HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Len"


def open_half_sent(server: Server, count: int, payload: bytes) -> list[socket.socket]:
    out = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(payload)
        out.append(sock)
    return out


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (it may answer first)."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def served(server: Server) -> int:
    return httpx.get(f"{server.url}/v1/stats", timeout=5).status_code


def test_half_sent_requests_are_closed_and_others_are_served(start_server: StartServer) -> None:
    server = start_server(SCEMON_HEADER_TIMEOUT=TIMEOUT, SCEMON_BODY_TIMEOUT=TIMEOUT)
    started = time.monotonic()
    held = open_half_sent(server, 40, HALF_BODY) + open_half_sent(server, 40, HALF_HEADER)
    try:
        assert served(server) == 200  # while they are held
        # Each closes within its timeout (plus slack for a loaded machine), never later.
        assert all(closed_by_server(sock, TIMEOUT + 20) for sock in held)
        assert time.monotonic() - started < TIMEOUT + 25
        assert served(server) == 200
    finally:
        for sock in held:
            sock.close()
    log = server.log.read_text()
    assert "its request's body did not arrive within 2 s" in log
    assert "its request's headers did not arrive within 2 s" in log


def test_a_body_trickled_in_slowly_is_not_cut_while_bytes_come(start_server: StartServer) -> None:
    # The body timeout is an idle timeout: a slow but steady client is served.
    server = start_server(SCEMON_BODY_TIMEOUT=TIMEOUT)
    body = b'{"name": "slow", "text": "SEQ(A, B) WITHIN 10"}'
    head = (
        b"POST /v1/queries HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head)
        for at in range(0, len(body), len(body) // 4 + 1):  # about 4 s in all: longer than the timeout
            time.sleep(1)
            sock.sendall(body[at : at + len(body) // 4 + 1])
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201"), answer[:200]


def test_at_the_connection_cap_requests_get_503_and_the_log_says_so(start_server: StartServer) -> None:
    # A longer header timeout: the held connections must outlive the request below.
    server = start_server(SCEMON_HEADER_TIMEOUT=5, SCEMON_MAX_CONNECTIONS=20)
    held = open_half_sent(server, 25, HALF_HEADER)
    try:
        time.sleep(0.5)  # let the server take them all
        assert served(server) == 503
        assert all(closed_by_server(sock, 5 + 20) for sock in held)
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 10
    while served(server) != 200:
        assert time.monotonic() < deadline, "still refused after the half-sent connections closed"
        time.sleep(0.2)
    assert "connection cap reached" in server.log.read_text()
