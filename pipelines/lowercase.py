"""``lowercase``: a streaming job that copies topic A to topic B with lower-cased values.

The seeds' stream transformer on Spark: reads ``--source`` with the ``yak`` data source, writes
``lower(value)`` (values read as UTF-8 text) with the same keys and headers to ``--target``.
Keys hash to the target's partitions as Kafka's producer would. Exactly-once into the target
across failures and restarts from ``--checkpoint`` (the query is deterministic: see
``docs/spark.md``). ``--available-now`` processes what is there when it starts and stops;
otherwise it runs until stopped.

    spark-submit pipelines/lowercase.py --url http://127.0.0.1:9430 \\
        --source words --target lower-words --checkpoint /tmp/ck/lowercase --available-now

Runs on ``local[*]`` unless ``spark-submit --master`` names a cluster (standalone, YARN or
Kubernetes); the workers need the ``yak[spark]`` package (``docs/spark.md``) and a checkpoint
folder they all see (HDFS, S3, a shared volume).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812  # Spark's own convention
from pyspark.sql.streaming.query import StreamingQuery

from yak.spark import register

__all__ = ["main", "start"]


def start(
    spark: SparkSession,
    *,
    url: str,
    source: str,
    target: str,
    checkpoint: str,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    starting_offsets: str = "earliest",
) -> StreamingQuery:
    """Start the query on ``spark`` (where ``yak`` is registered); the caller waits or stops."""
    reader = (
        spark.readStream.format("yak")
        .option("url", url)
        .option("subscribe", source)
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    lowered = reader.load().select(
        "key", F.lower(F.col("value").cast("string")).alias("value"), "headers"
    )
    writer = (
        lowered.writeStream.format("yak")
        .queryName(f"lowercase-{source}-to-{target}")
        .option("url", url)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lowercase", description="topic A → lower-cased values → topic B"
    )
    parser.add_argument("--url", required=True, help="rest-proxy URL(s), comma separated")
    parser.add_argument("--source", required=True, help="topic to read")
    parser.add_argument("--target", required=True, help="topic to write")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint folder")
    parser.add_argument("--available-now", action="store_true", help="process the backlog, stop")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest, JSON")
    args = parser.parse_args(argv)

    # No master here: spark-submit's --master wins, and without one (plain `python`) PySpark
    # starts its JVM through spark-submit, whose default is local[*]. A SparkConf made before
    # the JVM exists never sees --master, so testing one for it made every run local.
    spark = SparkSession.builder.appName("yak-lowercase").getOrCreate()
    register(spark)
    query = start(
        spark,
        url=args.url,
        source=args.source,
        target=args.target,
        checkpoint=args.checkpoint,
        available_now=args.available_now,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        starting_offsets=args.starting_offsets,
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
