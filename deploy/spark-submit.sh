#!/usr/bin/env bash
# Submit the scemon stream job to a Spark cluster.
#
#   SPARK_MASTER=spark://spark-master:7077 deploy/spark-submit.sh \
#       --source hdfs:///scemon/in --checkpoint hdfs:///scemon/checkpoint \
#       --dead-letter /var/lib/scemon/dead-letter \
#       --service http://shard-0:8080 --service http://shard-1:8080
#
# Every node (driver and executors) needs Python 3.11+ with scemon's spark extra
# installed: `pip install 'scemon[spark]'` (or this repository: `pip install '.[spark]'`),
# the same version everywhere. The job runs in client deploy mode: the driver posts to the
# services and writes the dead-letter folder, so run this where both are reachable.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${SPARK_MASTER:?set SPARK_MASTER, e.g. spark://spark-master:7077, yarn or k8s://https://host:6443}"
PYTHON_BIN="${PYSPARK_PYTHON:-$(command -v python3)}"

exec spark-submit \
    --master "$SPARK_MASTER" \
    --deploy-mode client \
    --name scemon-stream \
    --conf "spark.pyspark.python=$PYTHON_BIN" \
    --conf "spark.pyspark.driver.python=$PYTHON_BIN" \
    --conf spark.sql.shuffle.partitions="${SPARK_SHUFFLE_PARTITIONS:-8}" \
    ${SPARK_SUBMIT_EXTRA:-} \
    deploy/stream_job.py "$@"
