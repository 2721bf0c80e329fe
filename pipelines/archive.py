"""``archive``: a streaming job that copies topics into a Parquet dataset, once per record.

Reads ``--topics`` (a comma list) or ``--topic-pattern`` with the ``yak`` data source and
writes every record to ``--output`` as Parquet, partitioned by ``topic`` and ``date`` (the UTC
date of the record's timestamp), with the columns ``key`` and ``value`` (binary), ``partition``,
``offset``, ``timestamp`` (microseconds, UTC) and ``headers`` (a list of key/value structs)::

    <output>/topic=orders/date=2024-05-01/part-00000-….c000.snappy.parquet
    <output>/_spark_metadata/0, 1, …, 9.compact, …     the file sink's commit log

``--output`` is a local folder by default and any Hadoop path on a cluster (``s3a://bucket/
archive``, ``hdfs://…``); ``--checkpoint`` must live on storage the driver always sees again.

Exactly once. The source's position is kept in the checkpoint (the next offset per
partition), so each run archives only what came since the last one. Spark's file sink is
exactly-once by its own log: a micro-batch's files are listed in ``_spark_metadata/<batch>``
only after they were all written, and a batch replayed after a crash rewrites its files under
new names and commits the same batch id once. **Spark** reading ``--output`` (``spark.read.
parquet``) sees only the committed files, hence every record exactly once. Other readers
(pyarrow, DuckDB, Trino) list the folders and would also see the orphaned files of a crashed
batch: read the files ``committed_files`` names (a local folder), or dedupe on (topic,
partition, offset), which identifies a record.

Retention. ``archived_offsets`` reads the dataset with Spark and returns, per topic and
partition, ``archived_to`` = max(offset) + 1: every record below it has been archived (each
micro-batch reads a contiguous offset range per partition and commits its files atomically),
so records below it may be deleted (the broker's DeleteRecords) or left to time retention.
``--watermarks PATH`` writes them (a folder with one JSON-lines file) after the query ends.

    spark-submit pipelines/archive.py --url http://127.0.0.1:9430 --topics orders,payments \\
        --output /data/archive --checkpoint /data/ck/archive --available-now \\
        --watermarks /data/archive-watermarks

Runs on ``local[*]`` unless ``spark-submit --master`` names a cluster (standalone, YARN or
Kubernetes); the workers need the ``yak[spark]`` package (``docs/spark.md``), and the output
and checkpoint must be on storage every node sees (HDFS, S3 with the ``hadoop-aws`` jars, a
shared volume). Each micro-batch writes a file per Spark partition and date: use a trigger
interval of minutes (``--trigger-interval``) and ``--max-offsets-per-trigger`` to keep files
large.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812  # Spark's own convention
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DateType, StringType, StructField, StructType

from yak.spark import SCHEMA, register

__all__ = ["ARCHIVE_SCHEMA", "archived_offsets", "committed_files", "main", "start"]

_COLUMNS = ("key", "value", "partition", "offset", "timestamp", "headers")
#: The dataset's columns; ``topic`` and ``date`` are its partition folders.
ARCHIVE_SCHEMA = StructType(
    [SCHEMA[name] for name in _COLUMNS]
    + [StructField("topic", StringType()), StructField("date", DateType())]
)
_MS_PER_DAY = 86_400_000


def utc_date(timestamp: Column) -> Column:
    """The UTC calendar date of ``timestamp``, whatever the session's time zone."""
    days = F.floor(F.unix_millis(timestamp) / _MS_PER_DAY).cast("int")
    return F.date_from_unix_date(days)


def start(
    spark: SparkSession,
    *,
    url: str,
    output: str,
    checkpoint: str,
    topics: str | None = None,
    topic_pattern: str | None = None,
    available_now: bool = False,
    trigger_interval: str = "1 minute",
    max_offsets_per_trigger: int | None = None,
    starting_offsets: str = "earliest",
) -> StreamingQuery:
    """Start the query on ``spark`` (where ``yak`` is registered); the caller waits or stops.

    Sets ``spark.sql.parquet.outputTimestampType`` to ``TIMESTAMP_MICROS`` in the session (not
    Spark's legacy INT96), so every Parquet reader gets a UTC timestamp.
    """
    if (topics is None) == (topic_pattern is None):
        raise ValueError("give exactly one of topics and topic_pattern")
    reader = (
        spark.readStream.format("yak")
        .option("url", url)
        .option("startingOffsets", starting_offsets)
    )
    if topics is not None:
        reader = reader.option("subscribe", topics)
    else:
        assert topic_pattern is not None
        reader = reader.option("subscribePattern", topic_pattern)
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    records = reader.load().select(*_COLUMNS, "topic", utc_date(F.col("timestamp")).alias("date"))
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    writer = (
        records.writeStream.format("parquet")
        .queryName(f"archive-{topics or topic_pattern}")
        .partitionBy("topic", "date")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=trigger_interval).start()


def archived_offsets(spark: SparkSession, output: str) -> DataFrame:
    """Per topic and partition: ``archived_to`` (max offset + 1) and ``records`` archived.

    Read through the file sink's log, so only committed files count.
    """
    dataset = spark.read.schema(ARCHIVE_SCHEMA).parquet(output)
    return (
        dataset.groupBy("topic", "partition")
        .agg((F.max("offset") + 1).alias("archived_to"), F.count("*").alias("records"))
        .orderBy("topic", "partition")
    )


def committed_files(output: Path) -> list[Path]:
    """The data files of a local ``output`` folder that its ``_spark_metadata`` log commits.

    The log holds one file per micro-batch (``"v1"``, then a JSON line per file added or
    deleted) and, every ``spark.sql.streaming.fileSink.log.compactInterval`` batches, a
    ``<batch>.compact`` with everything up to it; older entries may be deleted after that.
    """
    log = output / "_spark_metadata"
    batches: dict[int, Path] = {}
    for entry in log.iterdir():
        name = entry.name.removesuffix(".compact")
        if name.isdigit():
            batches[int(name)] = entry
    compacted = [b for b, entry in batches.items() if entry.suffix == ".compact"]
    first = max(compacted, default=0)
    files: dict[str, bool] = {}
    for batch in sorted(b for b in batches if b >= first):
        lines = batches[batch].read_text().splitlines()[1:]  # after the version line
        for status in map(json.loads, filter(None, lines)):
            files[status["path"]] = status["action"] == "add"
    return sorted(Path(unquote(urlparse(path).path)) for path, kept in files.items() if kept)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="archive", description="topics → Parquet dataset")
    parser.add_argument("--url", required=True, help="rest-proxy URL(s), comma separated")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topics", help="comma list of topics to archive")
    which.add_argument("--topic-pattern", help="regular expression of topics to archive")
    parser.add_argument("--output", required=True, help="dataset folder or Hadoop path")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint folder")
    parser.add_argument("--available-now", action="store_true", help="archive the backlog, stop")
    parser.add_argument("--trigger-interval", default="1 minute", help="when running on")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest, JSON")
    parser.add_argument("--watermarks", help="write archived_to per partition here (JSON)")
    args = parser.parse_args(argv)

    # No master here: spark-submit's --master wins, and without one (plain `python`) PySpark
    # starts its JVM through spark-submit, whose default is local[*]. A SparkConf made before
    # the JVM exists never sees --master, so testing one for it made every run local.
    builder = SparkSession.builder.appName("yak-archive")
    spark = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    register(spark)
    query = start(
        spark,
        url=args.url,
        output=args.output,
        checkpoint=args.checkpoint,
        topics=args.topics,
        topic_pattern=args.topic_pattern,
        available_now=args.available_now,
        trigger_interval=args.trigger_interval,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        starting_offsets=args.starting_offsets,
    )
    query.awaitTermination()
    if args.watermarks is not None:
        marks = archived_offsets(spark, args.output)
        marks.coalesce(1).write.mode("overwrite").json(args.watermarks)
        marks.show(truncate=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
