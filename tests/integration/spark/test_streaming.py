"""Streaming reads and writes of the ``yak`` data source against a real cluster.

An availableNow query reads exactly the records there were when it started, in several
micro-batches under maxOffsetsPerTrigger, and a rerun from its checkpoint reads only what came
since, including partitions added meanwhile. A topic → lowercase → topic query stopped in the
middle, then "crashed" after writing a micro-batch but before Spark logged its commit, and
restarted from its checkpoint leaves every input record exactly once in the output topic. A
query whose position was deleted fails unless failOnDataLoss is off. The ``lowercase``
pipeline with availableNow processes exactly the N records there are.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812  # Spark's own convention
from pyspark.sql.streaming.query import StreamingQuery

from loadtest.local_cluster import LocalCluster
from pipelines import lowercase
from tests.integration.spark.conftest import Record, create_topic, produce, read_all, unique
from yak.clients.broker import BrokerClient
from yak.protocol.broker_models import DeleteRecordsPartition

pytestmark = pytest.mark.integration


def stream(spark: SparkSession, url: str, topic: str, **options: str) -> DataFrame:
    reader = spark.readStream.format("yak").option("url", url).option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def values(count: int, start: int = 0) -> list[Record]:
    return [
        (f"k{i}".encode(), f"Value-{i}".encode(), [], 1_700_000_000_000 + i)
        for i in range(start, start + count)
    ]


def run_available_now(
    df: DataFrame, checkpoint: Path
) -> tuple[StreamingQuery, list[tuple[int, int]]]:
    """Run ``df`` with Trigger.AvailableNow; the query and the (partition, offset) it read."""
    seen: list[tuple[int, int]] = []

    def collect(batch: DataFrame, _batch_id: int) -> None:
        seen.extend((r.partition, r.offset) for r in batch.select("partition", "offset").collect())

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(90)
    assert query.exception() is None
    return query, sorted(seen)


def test_available_now_reads_exactly_what_there_was(spark, url, tmp_path):
    topic = unique("now")
    create_topic(url, topic, 2)
    for p in range(2):
        produce(url, topic, p, values(25, p * 100))
    df = stream(spark, url, topic, startingOffsets="earliest", maxOffsetsPerTrigger="20")
    first, got = run_available_now(df, tmp_path / "ck")
    assert got == [(p, o) for p in range(2) for o in range(25)]
    assert len([p for p in first.recentProgress if p["numInputRows"]]) == 3  # 20 + 20 + 10

    # More records and a new partition: the next run reads only those.
    answer = httpx.post(f"{url}/api/v1/topics/{topic}/partitions", json={"count": 3}, timeout=30)
    assert answer.status_code == 200, answer.text
    produce(url, topic, 0, values(4, 500))
    produce(url, topic, 2, values(3, 600))
    _, got = run_available_now(df, tmp_path / "ck")
    assert got == [(0, o) for o in range(25, 29)] + [(2, o) for o in range(3)]


def test_a_restarted_query_writes_every_record_exactly_once(spark, url, tmp_path):
    source, sink = unique("upper"), unique("lower")
    create_topic(url, source, 2)
    create_topic(url, sink, 3)
    for p in range(2):
        produce(url, source, p, values(100, p * 1000))
    checkpoint = tmp_path / "ck"

    def start(*, available_now: bool) -> StreamingQuery:
        lowered = stream(spark, url, source, startingOffsets="earliest", maxOffsetsPerTrigger="40")
        writer = (
            lowered.select("key", F.lower(F.col("value").cast("string")).alias("value"))
            .writeStream.format("yak")
            .option("url", url)
            .option("topic", sink)
            # Many batches a partition, so a replay also meets batches older than the 5 the
            # broker remembers per producer.
            .option("maxRecordsPerBatch", "1")
            .option("checkpointLocation", str(checkpoint))
        )
        if available_now:
            return writer.trigger(availableNow=True).start()
        return writer.trigger(processingTime="0 seconds").start()

    running = start(available_now=False)
    deadline = time.monotonic() + 60
    while len(list((checkpoint / "commits").glob("[0-9]*"))) < 2:
        assert running.exception() is None
        assert time.monotonic() < deadline, "two micro-batches did not finish in time"
        time.sleep(0.1)  # Spark's progress lives in another thread: poll the checkpoint
    running.stop()

    # A crash after the last committed micro-batch was written but before Spark logged its
    # commit: drop that commit, and the plan of a batch that was still running when the query
    # stopped (its partial output stays; re-planned from the same start and limit, it gets the
    # same offsets again). The restart replays the batch, and then the next one.
    replayed = _drop_commit_and_later_plans(checkpoint)
    finish = start(available_now=True)
    finish.awaitTermination(90)
    assert finish.exception() is None
    progress = [(p["batchId"], p["numInputRows"]) for p in finish.recentProgress]
    assert progress[0] == (replayed, 40)

    written = Counter(
        base64.b64decode(r["value"]).decode() for p in range(3) for r in read_all(url, sink, p)
    )
    expected = Counter(f"value-{i}" for p in range(2) for i in range(p * 1000, p * 1000 + 100))
    assert written == expected


def test_a_query_whose_position_was_deleted_fails_unless_told_to_skip(
    spark, url, tmp_path, cluster: LocalCluster
):
    topic = unique("gone")
    create_topic(url, topic, 1)
    produce(url, topic, 0, values(5))
    df = stream(spark, url, topic, startingOffsets="earliest")
    run_available_now(df, tmp_path / "ck")
    produce(url, topic, 0, values(10, 5))

    async def delete_below(offset: int) -> None:
        broker = BrokerClient(cluster.broker_url(0))
        try:
            await broker.delete_records(
                [DeleteRecordsPartition(topic=topic, partition=0, offset=offset)]
            )
        finally:
            await broker.aclose()

    asyncio.run(delete_below(8))  # the query is at 5
    with pytest.raises(PySparkException, match=r"offsets 5 to 7 were deleted"):
        run_available_now(df, tmp_path / "ck")
    skipping = stream(spark, url, topic, startingOffsets="earliest", failOnDataLoss="false")
    _, got = run_available_now(skipping, tmp_path / "ck")
    assert got == [(0, o) for o in range(8, 15)]


def _drop_commit_and_later_plans(checkpoint: Path) -> int:
    """Delete the last commit of ``checkpoint`` and every offsets entry after it; its id."""
    commits = sorted(int(f.name) for f in (checkpoint / "commits").glob("[0-9]*"))
    last = commits[-1]
    for log, first in (("commits", last), ("offsets", last + 1)):
        for entry in (checkpoint / log).glob("[0-9]*"):
            if int(entry.name) >= first:
                entry.unlink()
                (checkpoint / log / f".{entry.name}.crc").unlink(missing_ok=True)
    return last


def test_the_lowercase_pipeline_processes_exactly_n_records(spark, url, tmp_path):
    source, target = unique("Words"), unique("words")
    create_topic(url, source, 2)
    create_topic(url, target, 2)
    sent = {
        p: [
            (f"k{p}-{i}".encode(), f"MiXeD Case {p}/{i}".encode(), [("h", b"1")], 1)
            for i in range(25)
        ]
        for p in range(2)
    }
    for p, records in sent.items():
        produce(url, source, p, records)
    query = lowercase.start(
        spark,
        url=url,
        source=source,
        target=target,
        checkpoint=str(tmp_path / "ck"),
        available_now=True,
        max_offsets_per_trigger=20,
    )
    query.awaitTermination(90)
    assert query.exception() is None
    assert sum(p["numInputRows"] for p in query.recentProgress) == 50

    out = [r for p in range(2) for r in read_all(url, target, p)]
    assert len(out) == 50
    written = {
        base64.b64decode(r["key"]): (base64.b64decode(r["value"]), r["headers"]) for r in out
    }
    header = [{"key": "h", "value": base64.b64encode(b"1").decode()}]
    expected = {k: (v.lower(), header) for records in sent.values() for k, v, _, _ in records}
    assert written == expected
