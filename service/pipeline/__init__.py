"""The Spark job behind ``scemon stream``: event files (or a synthetic rate) → events →
service shards, exactly once.

- ``job``: :class:`~service.pipeline.job.Pipeline`, one run of the streaming query and
  the delivery of each micro-batch; ``options``: what the job is told, and its error.
- ``sources``: where rows come from (a watched folder, or Spark's rate source);
  ``rows``: one file's bytes → event rows and dead-letter rows, in Spark's Python tasks.
- ``checks``: what is checked before Spark starts; ``dead_letters``: the rows that
  could not be delivered, with the reason; ``session``: the Spark session.

Delivery — sorting, routing each source to its shard, posting Arrow — is the sink's,
:mod:`api.spark_sink`. ``deploy/stream_job.py`` is the ``spark-submit`` entry point.

May import ``ecq``, ``api`` and ``service.files`` (and pyspark, only inside functions,
so the rest of scemon runs without the ``spark`` extra).
"""
