"""``lag-report``: a batch job writing consumer-group lag and per-topic throughput.

Two outputs under ``--output`` (Parquet by default, ``--format csv`` for CSV with a header):

- ``lag/``: one snapshot per run, **appended**: a row per (group, topic, partition) with the
  group's ``committed_offset`` (null if it never committed there), the partition's
  ``end_offset`` (high watermark), ``lag`` and the run's ``sampled_at`` (UTC). Taken on the
  driver from the public API with the SDK (``GET /api/v1/groups/{g}``); every group, or only
  ``--groups``. Run it every few minutes (cron, Airflow) to build lag history.
- ``throughput/``: records per topic and time bucket (``--bucket``, default ``1 minute``),
  ``bucket_start``/``bucket_end`` (UTC) and ``records``, computed by Spark from the records'
  timestamps with the ``yak`` batch source, ``groupBy(topic, window(timestamp, bucket))``.
  **Replaced** on each run: it is recomputed from what the topics still hold (from
  ``--since``, ms since the epoch, if given), so it covers their retention; archive the topics
  (``pipelines/archive.py``) to keep more. Topics: ``--topics``, ``--topic-pattern``, or by
  default those the lag snapshot names.

Timestamps are the producers' create times: a bucket counts records stamped in it, which is
the arrival rate as long as producers stamp records when they send them (the SDK does).

    spark-submit pipelines/lag_report.py --url http://127.0.0.1:9430 --output /data/lag-report

Runs on ``local[*]`` unless ``spark-submit --master`` names a cluster (standalone, YARN or
Kubernetes); the driver must reach the rest-proxy and the workers need ``yak[spark]``
(``docs/spark.md``); ``--output`` may be any Hadoop path every node sees (``s3a://…``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal, NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812  # Spark's own convention
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from yak.sdk import Admin
from yak.spark import register

__all__ = ["LAG_SCHEMA", "Report", "lag_snapshot", "main", "run", "throughput"]

Format = Literal["parquet", "csv"]

LAG_SCHEMA = StructType(
    [
        StructField("sampled_at", TimestampType(), False),
        StructField("group", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("committed_offset", LongType(), True),
        StructField("end_offset", LongType(), False),
        StructField("lag", LongType(), False),
    ]
)

LagRow = tuple[datetime, str, str, int, int | None, int, int]


class Report(NamedTuple):
    """What one run wrote: lag rows, throughput rows, and the topics counted."""

    lag_rows: int
    throughput_rows: int
    topics: tuple[str, ...]


def lag_snapshot(
    url: str, groups: Sequence[str] | None = None, sampled_at: datetime | None = None
) -> list[LagRow]:
    """Per (group, topic, partition) lag, as the public API at ``url`` (the first of a comma
    list) reports it now."""
    sampled_at = sampled_at or datetime.now(UTC)
    rows: list[LagRow] = []
    with Admin(url.split(",")[0]) as admin:
        names = groups or sorted(g.group_id for g in admin.list_groups().groups)
        for group in names:
            for p in admin.describe_group(group).partitions:
                rows.append(
                    (
                        sampled_at,
                        group,
                        p.topic,
                        p.partition,
                        p.committed_offset,
                        p.end_offset,
                        p.lag,
                    )
                )
    return sorted(rows, key=lambda row: row[1:4])


def throughput(
    spark: SparkSession,
    url: str,
    *,
    topics: str | None = None,
    topic_pattern: str | None = None,
    bucket: str = "1 minute",
    since_ms: int | None = None,
) -> DataFrame:
    """Records per topic and ``bucket`` of their timestamps, read with the ``yak`` source."""
    reader = spark.read.format("yak").option("url", url)
    if topics is not None:
        reader = reader.option("subscribe", topics)
    elif topic_pattern is not None:
        reader = reader.option("subscribePattern", topic_pattern)
    else:
        raise ValueError("give topics or topic_pattern")
    if since_ms is not None:
        reader = reader.option("startingTimestamp", str(since_ms))
    return (
        reader.load()
        .groupBy("topic", F.window("timestamp", bucket).alias("bucket"))
        .count()
        .select(
            "topic",
            F.col("bucket.start").alias("bucket_start"),
            F.col("bucket.end").alias("bucket_end"),
            F.col("count").alias("records"),
        )
        .orderBy("topic", "bucket_start")
    )


def _write(df: DataFrame, path: str, fmt: Format, mode: str) -> None:
    writer = df.coalesce(1).write.mode(mode)
    if fmt == "csv":
        writer.option("header", "true").csv(path)
    else:
        writer.parquet(path)


def run(
    spark: SparkSession,
    *,
    url: str,
    output: str,
    groups: Sequence[str] | None = None,
    topics: str | None = None,
    topic_pattern: str | None = None,
    bucket: str = "1 minute",
    since_ms: int | None = None,
    fmt: Format = "parquet",
) -> Report:
    """Append a lag snapshot to ``output/lag`` and replace ``output/throughput``."""
    snapshot = lag_snapshot(url, groups)
    _write(spark.createDataFrame(snapshot, LAG_SCHEMA), f"{output}/lag", fmt, "append")
    if topics is None and topic_pattern is None:
        topics = ",".join(sorted({row[2] for row in snapshot})) or None
    if topics is None and topic_pattern is None:
        return Report(len(snapshot), 0, ())
    counts = throughput(
        spark, url, topics=topics, topic_pattern=topic_pattern, bucket=bucket, since_ms=since_ms
    ).cache()
    try:
        _write(counts, f"{output}/throughput", fmt, "overwrite")
        counted = tuple(sorted({row.topic for row in counts.select("topic").collect()}))
        return Report(len(snapshot), counts.count(), counted)
    finally:
        counts.unpersist()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lag-report", description="consumer-group lag and topic throughput → Parquet/CSV"
    )
    parser.add_argument("--url", required=True, help="rest-proxy URL(s), comma separated")
    parser.add_argument("--output", required=True, help="folder or Hadoop path")
    parser.add_argument("--groups", help="comma list of groups (default: all)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--topics", help="comma list (default: the groups' topics)")
    which.add_argument("--topic-pattern", help="regular expression of topics")
    parser.add_argument("--bucket", default="1 minute", help="throughput time bucket")
    parser.add_argument("--since", type=int, help="count records from this time (ms)")
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    args = parser.parse_args(argv)

    # No master here: spark-submit's --master wins, and without one (plain `python`) PySpark
    # starts its JVM through spark-submit, whose default is local[*]. A SparkConf made before
    # the JVM exists never sees --master, so testing one for it made every run local.
    builder = SparkSession.builder.appName("yak-lag-report")
    spark = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    register(spark)
    report = run(
        spark,
        url=args.url,
        output=args.output,
        groups=args.groups.split(",") if args.groups else None,
        topics=args.topics,
        topic_pattern=args.topic_pattern,
        bucket=args.bucket,
        since_ms=args.since,
        fmt=args.format,
    )
    print(
        f"{report.lag_rows} lag rows, {report.throughput_rows} throughput rows "
        f"({', '.join(report.topics) or 'no topics'}) under {args.output}"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
