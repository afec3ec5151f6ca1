"""The running server: a FastAPI app over one engine, on uvicorn.

- ``main``: assembles the app (:func:`~service.server.main.create_app`); ``routes/``: one
  router per resource (queries, events, matches, health); ``deps``: what routes ask for.
- ``runtime``: the app's parts, started and stopped together; ``host``: EngineHost, the
  single writer that owns the engine; ``ingest``: event batches (JSON, Arrow) read and
  checked; ``store``: queries, applied batches, event log and match log (SQLite);
  ``hub``: the WebSocket subscribers and their bounded queues.
- ``auth``, ``limits``, ``metrics``, ``config`` (settings), ``errors`` (the service's
  errors), ``handlers`` (errors → HTTP, in one place), ``responses``, ``openapi``.
- ``process``: ``scemon serve`` as a child process on a free loopback port (the demo,
  the benchmarks and the tests use it).

May import ``ecq`` and ``api`` (and fastapi, uvicorn); nothing else of ``service``.
"""
