"""Entry point for ``spark-submit``: the same job as ``scemon stream``, with the master,
executors and resources coming from spark-submit instead of ``local[2]``.

    spark-submit --master spark://master:7077 deploy/stream_job.py --source ... --service ...
"""

from service.cli.app import app

if __name__ == "__main__":
    import sys

    app(["stream", *sys.argv[1:]])
