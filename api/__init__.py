"""The wire contract and its clients, shared by the server and everyone who talks to it.

- ``models``: the pydantic models of every request and response (one family per
  resource); the server's routes and the clients use the same classes.
- ``client``: HTTP (sync and async) and WebSocket subscriptions that resume by ``seq``.
- ``routing``: which shard owns a partition key's value (``crc32`` of its text mod N).
- ``spark_sink``: the Spark job's delivery — a micro-batch sorted by time, routed to the
  shards owning its sources and its values of the keys in use, posted as Arrow under
  ``(producer, batch id)``, retried.

May import ``ecq`` (event types); never ``service``.
"""
