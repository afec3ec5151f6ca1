"""The wire contract and its clients, shared by the server and everyone who talks to it.

- ``models``: the pydantic models of every request and response (one family per
  resource); the server's routes and the clients use the same classes.
- ``client``: HTTP (sync and async) and WebSocket subscriptions that resume by ``seq``.
- ``spark_sink``: the Spark job's delivery — a micro-batch sorted by time, routed to its
  shard by ``crc32(src)``, posted as Arrow under ``(producer, batch id)``, retried.

May import ``ecq`` (event types); never ``service``.
"""
