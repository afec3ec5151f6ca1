"""The job's Spark session: the cluster's under ``spark-submit``, else a quiet local one."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_session"]


def spark_session(master: str | None = None, app_name: str = "scemon-stream") -> SparkSession:
    """The job's session. Under ``spark-submit`` the master and resources come from it;
    run directly, Spark runs in this process with ``master`` (default ``local[2]``)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not started by spark-submit
        _quiet_local_jvm()
        builder = (
            builder.master(master or "local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if threading.current_thread() is threading.main_thread():
        # pyspark's own SIGINT handler cancels jobs through py4j from inside the signal,
        # which breaks a py4j call in progress; the job handles Ctrl-C itself (Pipeline.run).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return spark


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
"""


# The local JVM's flags. Its just-in-time compiler stops at the first tier (C1): in a
# local job the JVM only reads the files, schedules the Python tasks and moves one packed
# cell per file (service.pipeline.rows), so the optimising tier's compiler threads would
# be most of its CPU — with C2 on, a micro-batch of 110,000 bare-sequence events costs
# the JVM about twice the CPU per event for its first dozen micro-batches, and its
# start-up half as much again — on the cores the service beside it needs.
# Its collector is the throughput one (parallel, stop-the-world) rather than G1, the
# default on a machine of 2 cores or more: the job's heap is mostly short-lived file
# bytes, and G1's concurrent marking and refinement threads take CPU the service beside
# it needs (about 40% more JVM CPU over ``scemon demo``'s events).
_JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"


def _quiet_local_jvm() -> None:
    """Settings that must reach the JVM before it starts: the Python workers run this
    interpreter (they import scemon and pyarrow too), Spark binds to loopback, it logs
    errors only — a terminal running ``scemon demo`` shows the demo, not Spark's
    start-up chatter — and its JIT and collector are set for a short local job (:data:`_JVM_FLAGS`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        config = Path(tempfile.gettempdir()) / "scemon-spark-log4j2.properties"
        config.write_text(_LOG4J2)
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f"--driver-java-options '-Dlog4j2.configurationFile=file:{config} {_JVM_FLAGS}' pyspark-shell"
        )
