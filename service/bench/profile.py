"""Where a server's time goes: py-spy samples of its process, summed by layer.

``scemon bench pipeline --profile`` runs ``py-spy record`` on the server over each
row's measured part and sorts every sample into the layer of the path it was in: the
deepest frame of the stack that names one (:data:`MARKERS`, a function in a file)
decides, so the engine called from the writer thread counts as the engine, and the
JSON a match is turned into counts as the match rows. py-spy names a method
``Class.method`` and a nested function ``outer.<locals>.inner``: a marker's function
matches the last dotted part of a frame's name (a nested function counts as the frame
that made it, one up the stack). A writer-thread stack with no deeper marker is the
host's own bookkeeping (sorting the batch, counters); a stack with no marker at all is
the HTTP server and event loop (uvicorn, starlette, asyncio) or, failing that, other.
py-spy sees Python frames only: time in C (SQLite, orjson, Arrow, the compiled kernel)
is billed to the Python function that called it, which is the layer we want.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

__all__ = ["LAYERS", "MARKERS", "Sampler", "layer_of", "layers_of", "py_spy"]

# (file, function, layer): a frame is "function (path/to/file.py:line)" in py-spy's raw output.
MARKERS: tuple[tuple[str, str, str], ...] = (
    ("service/server/ingest.py", "from_arrow", "decode (Arrow → events)"),
    ("service/server/ingest.py", "from_json", "decode (JSON → events)"),
    ("ecq/time/timekeeper.py", "process", "engine"),
    ("ecq/time/timekeeper.py", "check_ahead", "engine"),
    ("ecq/time/timekeeper.py", "held_after", "engine"),
    ("service/server/host.py", "_number", "match rows (seq, JSON)"),
    ("service/server/store.py", "events_body", "event log (encode)"),
    ("service/server/store.py", "commit_batch", "store commit (SQLite)"),
    ("service/server/store.py", "trim", "store trim"),
    ("service/server/host.py", "_refresh_stats", "stats"),
    ("service/server/hub.py", "publish", "hub fan-out"),
    ("service/server/store.py", "read_matches", "WebSocket backlog reads"),
    ("service/server/routes/matches.py", "_stream", "WebSocket send"),
    # Outermost of the writer thread's ops: only what no marker above claims is left here.
    ("service/server/host.py", "_ingest", "host bookkeeping"),
    ("service/server/host.py", "_advance", "host bookkeeping"),
)
_LOOP = ("uvicorn", "starlette", "fastapi", "asyncio", "h11", "httptools", "anyio", "concurrent/futures")
LAYERS: tuple[str, ...] = tuple(dict.fromkeys(layer for _, _, layer in MARKERS)) + (
    "HTTP server and event loop",
    "other",
)


def py_spy() -> str | None:
    """The py-spy executable (beside this interpreter, as ``pip install py-spy`` in a
    virtualenv puts it, or on PATH), or None when it is not installed."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def layer_of(stack: list[str]) -> str:
    """The layer of one sampled stack (root first)."""
    for frame in reversed(stack):
        name, _, where = frame.partition(" (")
        function_name = name.rpartition(".")[2]
        for file, function, layer in MARKERS:
            if function_name == function and file in where:
                return layer
    if any(part in frame for frame in stack for part in _LOOP):
        return "HTTP server and event loop"
    return "other"


def layers_of(raw: Path) -> Counter[str]:
    """Samples per layer in a py-spy ``--format raw`` file (``frame;frame;... count``)."""
    counts: Counter[str] = Counter()
    if not raw.exists():
        return counts
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[layer_of(stack.split(";"))] += int(n)
    return counts


class Sampler:
    """``py-spy record`` on a running process until :meth:`stop` (SIGINT makes it write
    its file). Samples without pausing the process (``--nonblocking``), threads that
    are idle left out."""

    def __init__(self, exe: str, pid: int, out: Path, rate: int = 100) -> None:
        self.out = out
        command = [exe, "record", "--pid", str(pid), "--format", "raw", "--output", str(out)]
        command += ["--rate", str(rate), "--nonblocking"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> Counter[str]:
        """End the recording; the samples per layer."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return layers_of(self.out)
