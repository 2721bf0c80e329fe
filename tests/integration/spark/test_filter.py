"""The ``filter`` option against a real cluster: a batch read and an availableNow stream
return exactly the records a plain-Python filter keeps, and the stream's offsets still reach
the log end (the dropped records were read past, not left for the next run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from tests.integration.spark.conftest import Record, create_topic, produce, unique
from tests.integration.spark.test_streaming import run_available_now, stream

pytestmark = pytest.mark.integration

TEXT = 'value.n in [3, 17, 40, 41] or value.kind == "refund"'


def records(partition: int, count: int) -> list[Record]:
    """JSON values ``{"n", "kind"}``: n is partition * 100 + i, every 9th is a refund."""
    out: list[Record] = []
    for i in range(count):
        n = partition * 100 + i
        kind = "refund" if n % 9 == 0 else "order"
        out.append((None, json.dumps({"n": n, "kind": kind}).encode(), [], 1_700_000_000_000))
    return out


def kept(partition: int, count: int) -> list[tuple[int, int]]:
    return [
        (partition, i)
        for i, (_, value, _, _) in enumerate(records(partition, count))
        if (doc := json.loads(value or b"{}"))["n"] in (3, 17, 40, 41) or doc["kind"] == "refund"
    ]


def offsets_of(df: DataFrame) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_a_filtered_batch_read_and_stream(spark: SparkSession, url: str, tmp_path: Path) -> None:
    topic = unique("filter")
    create_topic(url, topic, 2)
    for p in range(2):
        produce(url, topic, p, records(p, 60))
    want = kept(0, 60) + kept(1, 60)

    batch = (
        spark.read.format("yak")
        .option("url", url)
        .option("subscribe", topic)
        .option("filter", TEXT)
        .option("fetchMaxBytes", "600")  # several reads per range, some of them empty
        .load()
    )
    assert offsets_of(batch) == want

    df = stream(
        spark, url, topic, startingOffsets="earliest", maxOffsetsPerTrigger="50", filter=TEXT
    )
    query, got = run_available_now(df, tmp_path / "ck")
    assert got == want
    progress = query.lastProgress
    assert progress is not None
    ends = progress["sources"][0]["endOffset"]
    ends = json.loads(ends) if isinstance(ends, str) else ends
    assert ends == {topic: {"0": 60, "1": 60}}  # past the dropped records

    bad = spark.read.format("yak").option("url", url).option("subscribe", topic)
    with pytest.raises(PySparkException, match="filter"):
        bad.option("filter", "value.n ==").load().collect()
