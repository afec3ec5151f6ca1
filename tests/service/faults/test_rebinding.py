"""DNS rebinding with auth off: a page at ``attacker.example`` whose name now resolves
to 127.0.0.1 sends ``Host`` and ``Origin`` both naming itself, so the cross-site check
(Origin against Host) cannot see it. The server must answer only to the names it is
reached by on this machine (and those the operator allowed), on every route and the
WebSocket upgrade; the probes answer any name."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.service.conftest import Server, StartServer

pytestmark = pytest.mark.faults


def rebound(server: Server, name: str = "attacker.example") -> dict[str, str]:
    host = f"{name}:{server.port}"
    return {"Host": host, "Origin": f"http://{host}"}


def test_a_rebinding_page_is_refused_on_every_route(start_server: StartServer) -> None:
    server = start_server()
    headers = rebound(server)
    query = {"name": "q", "text": "SEQ(A, B) WITHIN 10"}
    with httpx.Client(base_url=server.url, headers=headers) as client:
        answers = [
            client.post("/v1/queries", json=query),
            client.get("/v1/queries"),
            client.get("/v1/matches"),
            client.get("/v1/stats"),
            client.post("/v1/events", json={"producer": "p", "batch_id": "b", "events": []}),
            client.delete("/v1/queries/q"),
            client.get("/"),
        ]
    for answer in answers:
        assert answer.status_code == 403, (answer.request.url, answer.status_code, answer.text)
        message = answer.json()["detail"]["message"]
        assert "attacker.example" in message and "--allowed-host" in message
    # Nothing was registered.
    assert httpx.get(f"{server.url}/v1/queries").json()["queries"] == []
    # The probes answer any name: they say only whether the server serves.
    assert httpx.get(f"{server.url}/healthz", headers=headers).status_code == 200
    assert httpx.get(f"{server.url}/readyz", headers=headers).status_code == 200


def upgrade(server: Server, host: str) -> bytes:
    """The server's answer to a WebSocket handshake naming ``host`` in ``Host`` and
    ``Origin`` (one of each, as a browser sends them), up to the end of its headers."""
    request = (
        f"GET /v1/matches/ws?from_seq=0 HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        if answer.startswith(b"HTTP/1.1 403"):
            answer += sock.recv(4096)  # the body saying why
    return answer


def test_the_websocket_upgrade_of_a_rebinding_page_is_refused(start_server: StartServer) -> None:
    server = start_server()
    refused = upgrade(server, f"attacker.example:{server.port}")
    assert refused.startswith(b"HTTP/1.1 403"), refused[:100]
    assert b"attacker.example" in refused
    # Loopback names are answered.
    assert upgrade(server, f"localhost:{server.port}").startswith(b"HTTP/1.1 101")


def test_loopback_and_allowed_names_are_answered(start_server: StartServer) -> None:
    server = start_server(SCEMON_ALLOWED_HOSTS="scemon.lan")
    for name in ("localhost", "127.0.0.1", "[::1]", "scemon.lan", "SCEMON.LAN"):
        answer = httpx.post(
            f"{server.url}/v1/queries",
            json={"name": f"q{abs(hash(name))}", "text": "SEQ(A, B) WITHIN 10"},
            headers={"Host": f"{name}:{server.port}", "Origin": f"http://{name}:{server.port}"},
        )
        assert answer.status_code == 201, (name, answer.text)
    assert httpx.get(f"{server.url}/v1/stats", headers=rebound(server)).status_code == 403


def test_with_tokens_any_name_is_answered_unless_names_are_listed(start_server: StartServer) -> None:
    # A rebinding page has no token, so with tokens the name does not matter...
    server = start_server(tokens="t:admin")
    auth = {"Authorization": "Bearer t"}
    answer = httpx.get(f"{server.url}/v1/queries", headers={**auth, "Host": "scemon.example"})
    assert answer.status_code == 200
    # ... unless the operator listed the names: then they are binding.
    listed = start_server(tokens="t:admin", SCEMON_ALLOWED_HOSTS="scemon.example")
    answer = httpx.get(f"{listed.url}/v1/queries", headers={**auth, "Host": "scemon.example"})
    assert answer.status_code == 200
    answer = httpx.get(f"{listed.url}/v1/queries", headers={**auth, "Host": "other.example"})
    assert answer.status_code == 403
