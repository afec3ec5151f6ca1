"""Factory fixtures for real servers: ``scemon serve`` in a subprocess on 127.0.0.1.

Tests talk to the server over real HTTP and WebSocket, as the Spark sink and the
subscribers do; a server can be killed (SIGKILL) and started again on the same store.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.client import Client

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """One ``scemon serve`` process; ``restart()`` starts a new one on the same store."""

    data: Path
    port: int
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)
    clients: list[Client] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.log = self.data.parent / f"{self.data.name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = None) -> Client:
        """A client closed with the server."""
        client = Client(self.url, token=token)
        self.clients.append(client)
        return client

    def start(self, timeout: float = 60.0) -> Server:
        command = [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data",
            str(self.data),
            "--log-level",
            "warning",
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> Server:
        self.stop()
        return self.start()


StartServer = Callable[..., Server]


@pytest.fixture
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """``start_server(tokens="t:admin", SCEMON_SUBSCRIBER_QUEUE="10")`` → a ready server."""
    servers: list[Server] = []

    def start(tokens: str = "", data: Path | None = None, **settings: Any) -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCEMON_")}
        env["SCEMON_TOKENS"] = tokens
        env.update({k: str(v) for k, v in settings.items()})
        directory = data if data is not None else tmp_path_factory.mktemp("server") / "data"
        server = Server(directory, free_port(), env)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for a module whose tests do not care what the others registered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCEMON_")}
    server = Server(tmp_path_factory.mktemp("shared") / "data", free_port(), env)
    server.start()
    yield server
    server.stop()
