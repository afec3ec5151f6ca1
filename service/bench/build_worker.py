"""One build of the engine in its own process, for ``scemon bench builds``
(service/bench/builds.py): it reads commands as JSON lines on stdin and answers on
stdout. It runs under another build's interpreter and checkout, so it uses only what
every build of the engine has (``ecq.engine.Engine``, ``ecq.event.Event``,
``ecq.evaluation.workload``) and nothing of ``service``."""

from __future__ import annotations

import gc
import hashlib
import json
import platform
import sys
import time
from typing import Any

from ecq.engine import Engine
from ecq.evaluation.workload import Workload, events, sequence_queries
from ecq.event import Event

# An engine's own cleaning never runs: the worker cleans where the driver says.
_NEVER = 1 << 62


def _kernel(engine: Engine) -> str:
    network: Any = engine.network
    kernel = getattr(network, "kernel", None)
    if kernel is not None:
        return str(kernel.name)
    return "compiled" if getattr(network, "compiled_plain", False) else "pure"


def main() -> None:
    engines: list[Engine] = []
    stream: list[tuple[Any, ...]] = []
    step = 0
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "setup":
            w = Workload(**command["workload"])
            queries = sequence_queries(w)
            stream = [(e.src, e.type, e.start, e.end) for e in events(w, command["total"])]
            engines = []
            for n in command["queries"]:
                engine = Engine(clean_every=_NEVER)
                for name, text in queries[:n]:
                    engine.register(name, text)
                engines.append(engine)
            digest = hashlib.sha256(repr(stream).encode()).hexdigest()[:16]
            import ecq

            answer: dict[str, Any] = {
                "python": platform.python_version(),
                "engine": str(ecq.__file__),
                "kernel": _kernel(engines[0]),
                "stream": digest,
            }
            gc.collect()
            gc.disable()
        elif op == "chunk":
            begin, end = command["begin"], command["end"]
            n = len(engines)
            seconds = [0.0] * n
            cpu = [0.0] * n
            matches = [0] * n
            for turn in range(n):
                i = (step + turn) % n
                batch = [
                    Event(s, c, t0, t1, id=k) for k, (s, c, t0, t1) in enumerate(stream[begin:end], begin)
                ]
                began, began_cpu = time.perf_counter(), time.process_time()
                out = engines[i].process(batch)
                seconds[i] += time.perf_counter() - began
                cpu[i] += time.process_time() - began_cpu
                matches[i] = len(out)
                del out, batch
            if command["clean"]:
                for turn in range(n):
                    i = (step + turn) % n
                    began, began_cpu = time.perf_counter(), time.process_time()
                    engines[i].clean()
                    seconds[i] += time.perf_counter() - began
                    cpu[i] += time.process_time() - began_cpu
                gc.collect(0)
            step += 1
            answer = {"seconds": seconds, "cpu": cpu, "matches": matches}
        elif op == "quit":
            return
        else:
            answer = {"error": f"unknown command {op!r}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
