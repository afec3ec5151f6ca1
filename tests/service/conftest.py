"""Factory fixtures for real servers: ``scemon serve`` in a subprocess on 127.0.0.1, for
the server's, the Spark job's and the commands' tests; and ``scemon`` run as a real
process.

Tests talk to the server over real HTTP and WebSocket, as the Spark sink and the
subscribers do; a server can be killed (SIGKILL) and started again on the same store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.client import Client
from service.server.process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]


class Server(ServerProcess):
    """One ``scemon serve`` process on its defaults plus the test's settings (none of
    the environment's ``SCEMON_*``); ``restart()`` starts a new one on the same store."""

    def __init__(self, data: Path, env: dict[str, str]) -> None:
        super().__init__(
            data, log=data.parent / f"{data.name}.log", env=env, grace=15.0, inherit_settings=False
        )
        self.clients: list[Client] = []

    def client(self, token: str | None = None) -> Client:
        """A client closed with the server."""
        client = Client(self.url, token=token)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()
        super().stop()

    def restart(self) -> Server:
        self.stop()
        return self.start()


StartServer = Callable[..., Server]


@pytest.fixture
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """``start_server(tokens="t:admin", SCEMON_SUBSCRIBER_QUEUE="10")`` → a ready server."""
    servers: list[Server] = []

    def start(tokens: str = "", data: Path | None = None, **settings: Any) -> Server:
        env = {"SCEMON_TOKENS": tokens, **{k: str(v) for k, v in settings.items()}}
        directory = data if data is not None else tmp_path_factory.mktemp("server") / "data"
        server = Server(directory, env)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for a module whose tests do not care what the others registered."""
    server = Server(tmp_path_factory.mktemp("shared") / "data", {})
    server.start()
    yield server
    server.stop()


StartService = Callable[..., ServerProcess]


@pytest.fixture
def start_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartService]:
    """``start_service(SCEMON_X="...")`` → a ready ``scemon serve`` on a free port and a
    fresh store; every one is stopped (by its pid) at the end of the test."""
    servers: list[ServerProcess] = []

    def start(**settings: str) -> ServerProcess:
        server = ServerProcess(tmp_path_factory.mktemp("service") / "data", env=settings or None)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


def scemon(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``scemon ...`` as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )
