"""Every benchmark behind ``scemon bench``: tables printed, written as CSV, and plotted.

- ``runner``: one measurement (interleaved engines, the paper's metrics);
  ``figures``: the SCEMon paper's evaluation (§7, Figures 7-14), the targets and the
  event-rate sweep, each a function returning :class:`~service.bench.table.Table` values;
  ``table``: those values.
- ``report``: tables on the terminal, as CSV and PNG files, with the machine they ran
  on; ``page``: ``docs/benchmarks.md``, generated from those files.
- ``replay``: ``scemon replay`` end to end, in a process of its own; ``server``: a real
  server's ingest rate with subscribers; ``pipeline``: the whole path (replay, the
  service with subscribers, the Spark job) against the engine alone, its subscribers
  in processes of their own (``subscribers``).

May import ``ecq``, ``api``, ``service.server`` and ``service.files``; never
``service.cli`` (the commands call in, with their progress bars).
"""
