"""A ``scemon serve`` child process on a free loopback port: for ``scemon demo``, the
benchmarks and the tests, which all need a real server they own and must stop.

The child runs in a session of its own, so a Ctrl-C in the terminal reaches only the
parent, which then stops the child by its pid — never anything it did not start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

__all__ = ["ServerProcess", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``with ServerProcess(data_dir) as server: server.url``: started and ready on enter,
    stopped on exit (SIGTERM, then SIGKILL after ``grace`` seconds). :meth:`kill` is the
    crash the restart tests need."""

    def __init__(
        self,
        data: Path,
        port: int | None = None,
        log: Path | None = None,
        log_level: str = "warning",
        env: dict[str, str] | None = None,
        grace: float = 10.0,
        inherit_settings: bool = True,
        checkout: Path | None = None,
    ) -> None:
        """``env`` adds to (or overrides) this process's environment; with
        ``inherit_settings=False`` its ``SCEMON_*`` settings are left out first, so the
        server runs on its defaults plus ``env``. ``checkout``: run that checkout's server
        (its ``service`` and ``ecq``, its kernel built in place) with this interpreter —
        a benchmark's older build beside this one."""
        self.data = data
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or data.parent / f"{data.name}-server.log"
        self.log_level = log_level
        self.env = env
        self.grace = grace
        self.inherit_settings = inherit_settings
        self.checkout = checkout
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> Self:
        """Start the server and wait until ``/readyz`` answers 200 (the engine is rebuilt
        from the store). Raises RuntimeError with the log's tail if it does not."""
        self.data.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        command += ["--data", str(self.data), "--log-level", self.log_level]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**self._inherited(), **(self.env or {}), **self._path()},
                cwd=self.checkout,
            )
        deadline = time.monotonic() + timeout
        # One client for every probe: httpx.get makes a client (and its TLS context) per
        # call, milliseconds of CPU each, which a start on two cores pays for.
        with httpx.Client(timeout=1.0) as probe:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"scemon serve exited with status {self.process.returncode}: {self._tail()}"
                    )
                try:
                    if probe.get(f"{self.url}/readyz").status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"scemon serve on {self.url} was not ready after {timeout:.0f}s: {self._tail()}")

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM), or by SIGKILL if it lingers."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(self.grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to flush anything."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _path(self) -> dict[str, str]:
        return {} if self.checkout is None else {"PYTHONPATH": str(self.checkout)}

    def _inherited(self) -> dict[str, str]:
        if self.inherit_settings:
            return dict(os.environ)
        return {k: v for k, v in os.environ.items() if not k.startswith("SCEMON_")}

    def _tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-5:]) or "(empty log)"
