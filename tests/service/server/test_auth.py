"""Bearer tokens with roles: 401 without a (known) token, 403 with the wrong role; and
a server without tokens binds loopback only."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from api.client import ApiError, SyncSubscription
from service.server.process import free_port
from tests.service.conftest import Server, StartServer

ROOT = Path(__file__).resolve().parents[3]

TOKENS = "adm-secret:admin,prod-secret:producer,read-secret:reader"
EVENTS = {"producer": "p", "batch_id": 1, "events": [{"src": 1, "type": "A", "start": 1}]}


def test_roles_decide_what_a_token_may_do(start_server: StartServer) -> None:
    server = start_server(tokens=TOKENS)
    url = server.url

    def call(method: str, path: str, token: str | None, **kwargs: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, f"{url}{path}", headers=headers, **kwargs)  # type: ignore[arg-type]

    query = {"name": "a", "text": "OR(A)"}
    # No token, an unknown token, a malformed header: 401 saying what is needed.
    for token in (None, "guess"):
        response = call("POST", "/v1/queries", token, json=query)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        assert "token" in response.json()["detail"]["message"]
    assert httpx.get(f"{url}/v1/matches", headers={"Authorization": "Basic eDp5"}).status_code == 401
    # Wrong role: 403 naming the role needed.
    response = call("POST", "/v1/queries", "prod-secret", json=query)
    assert response.status_code == 403 and "admin" in response.json()["detail"]["message"]
    assert call("POST", "/v1/events", "read-secret", json=EVENTS).status_code == 403
    assert call("POST", "/v1/time", "read-secret", json={"time": 5}).status_code == 403
    assert call("POST", "/v1/time", "prod-secret", json={"time": 5}).status_code == 403
    assert call("GET", "/v1/matches", "prod-secret").status_code == 403
    assert call("DELETE", "/v1/queries/a", "read-secret").status_code == 403
    # Nothing happened so far.
    assert call("GET", "/v1/queries", "read-secret").json() == {"queries": []}
    # The right roles.
    assert call("POST", "/v1/queries", "adm-secret", json=query).status_code == 201
    assert call("POST", "/v1/events", "prod-secret", json=EVENTS).json()["matches"] == 1
    assert call("POST", "/v1/time", "adm-secret", json={"time": 5}).status_code == 200
    assert len(call("GET", "/v1/matches", "read-secret").json()["matches"]) == 1
    assert call("GET", "/v1/queries/a", "prod-secret").status_code == 200
    # Probes need no token.
    for path in ("/healthz", "/readyz"):
        assert httpx.get(f"{url}{path}").status_code == 200
    # WebSocket: reader yes, producer no, none no.
    assert len(list(SyncSubscription(url, token="read-secret", idle_timeout=0.5))) == 1
    for token, status in ((None, 401), ("prod-secret", 403)):
        with pytest.raises(ApiError) as caught:
            list(SyncSubscription(url, token=token, idle_timeout=0.5))
        assert caught.value.status == status
    with pytest.raises(Exception) as refused:
        with connect(url.replace("http", "ws") + "/v1/matches/ws", proxy=None):
            pass
    assert refused.value.response.status_code == 401  # type: ignore[attr-defined]


def test_without_tokens_the_server_refuses_a_non_loopback_address(tmp_path: object) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
            "--data",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "SCEMON_TOKENS": ""},
    )
    assert result.returncode == 1
    assert "refusing to bind 0.0.0.0 without tokens" in result.stderr


def test_with_tokens_the_metrics_and_the_api_description_need_one(start_server: StartServer) -> None:
    server = start_server(tokens=TOKENS)
    for path in ("/metrics", "/docs", "/openapi.json"):
        assert httpx.get(f"{server.url}{path}").status_code == 401, path
        for token in ("adm-secret", "prod-secret", "read-secret"):
            answer = httpx.get(f"{server.url}{path}", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, (path, token)
    assert (
        "scemon"
        in httpx.get(f"{server.url}/openapi.json", headers={"Authorization": "Bearer read-secret"}).text
    )
    for path in ("/healthz", "/readyz"):  # probes have no token
        assert httpx.get(f"{server.url}{path}").status_code == 200


def test_with_auth_off_another_sites_requests_are_refused(start_server: StartServer) -> None:
    server = start_server()
    url = server.url
    same = url  # what a page served by this server would send
    for headers in ({"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}):
        answer = httpx.post(f"{url}/v1/events", json=EVENTS, headers=headers)
        assert answer.status_code == 403 and "cross-site" in answer.json()["detail"]["message"], headers
        assert httpx.delete(f"{url}/v1/queries/a", headers=headers).status_code == 403
    # What a browser sends cross-site without a preflight: no type, text/plain, a form.
    body = orjson.dumps(EVENTS)
    for kind in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        answer = httpx.post(f"{url}/v1/events", content=body, headers={"Content-Type": kind} if kind else {})
        assert answer.status_code == 415, kind
    assert httpx.get(f"{url}/v1/matches").json()["next_seq"] == 0  # nothing was applied
    assert httpx.post(f"{url}/v1/events", json=EVENTS, headers={"Origin": same}).status_code == 200
    reading = httpx.get(f"{url}/v1/queries", headers={"Origin": "https://evil.example"})
    assert reading.status_code == 200  # reads are not state-changing
    # A subscription from another site's page would read the matches.
    with pytest.raises(Exception) as refused:
        ws_url = url.replace("http", "ws") + "/v1/matches/ws"
        with connect(ws_url, additional_headers={"Origin": "https://evil.example"}, proxy=None):
            pass
    assert refused.value.response.status_code == 403  # type: ignore[attr-defined]
    with connect(url.replace("http", "ws") + "/v1/matches/ws", proxy=None):
        pass
    server.stop()
    assert "WARNING" in server.log.read_text() and "auth is off" in server.log.read_text()


def test_no_credential_reaches_the_log_and_refused_handshakes_are_not_errors(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    server = Server(tmp_path_factory.mktemp("log") / "data", {"SCEMON_TOKENS": TOKENS})
    server.log_level = "debug"
    server.start()
    try:
        ws = server.url.replace("http", "ws") + "/v1/matches/ws"
        for token in ("read-secret", "prod-secret", "wrong-secret", None):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            try:
                with connect(ws, additional_headers=headers, proxy=None):
                    pass
            except Exception:
                pass
            httpx.get(f"{server.url}/v1/queries", headers=headers)
        with connect(ws, subprotocols=_offer("read-secret"), proxy=None):  # as a browser does
            pass
    finally:
        server.stop()
    log = server.log.read_text()
    assert "authorization: <redacted>" in log  # the handshake's headers are logged at debug
    assert "scemon.bearer.<redacted>" in log
    for secret in ("adm-secret", "prod-secret", "read-secret", "wrong-secret"):
        assert secret not in log, secret
        assert _offer(secret)[1].removeprefix("scemon.bearer.") not in log, secret
    assert not [line for line in log.splitlines() if line.startswith("ERROR")], log
    refusals = [line for line in log.splitlines() if "refused a subscription" in line]
    assert len(refusals) == 3 and all(line.startswith("WARNING") and "40" in line for line in refusals)


def _offer(token: str) -> list[Subprotocol]:
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return [Subprotocol("scemon"), Subprotocol(f"scemon.bearer.{encoded}")]


def test_a_browser_passes_its_token_as_a_websocket_subprotocol(start_server: StartServer) -> None:
    """A browser cannot set the Authorization header on a WebSocket; it offers the token
    as a subprotocol beside ``scemon``, and the server answers ``scemon`` (never the
    token) or refuses the handshake as it would the header."""
    server = start_server(tokens=TOKENS)
    admin = server.client("adm-secret")
    admin.register("a", "OR(A)")
    admin.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}])
    url = server.url.replace("http", "ws") + "/v1/matches/ws"
    with connect(url, subprotocols=_offer("read-secret"), proxy=None) as ws:
        assert ws.subprotocol == "scemon"
        assert orjson.loads(ws.recv(timeout=10))["seq"] == 0
    bad_base64 = [Subprotocol("scemon"), Subprotocol("scemon.bearer.%%%")]
    for protocols, status in ((_offer("prod-secret"), 403), (_offer("guess"), 401), (bad_base64, 401)):
        with pytest.raises(InvalidStatus) as refused:
            with connect(url, subprotocols=protocols, proxy=None):
                pass
        assert refused.value.response.status_code == status
