"""Batch reads and writes of the ``yak`` data source against a real cluster.

A read returns exactly what was produced (keys, values, headers, timestamps, per-partition
order) in the columns of Spark's Kafka source; offset options, the split options, timestamps
and patterns pick the right records; deleted offsets fail the read unless failOnDataLoss is
off; a written DataFrame lands where its partition, key and topic columns say.
"""

from __future__ import annotations

import asyncio
import base64

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812  # Spark's own convention

from loadtest.local_cluster import LocalCluster
from tests.integration.spark.conftest import Record, create_topic, produce, read_all, unique
from yak.clients.broker import BrokerClient
from yak.partitioner import partition_for_key
from yak.protocol.broker_models import DeleteRecordsPartition

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


def load(spark: SparkSession, url: str, **options: str) -> DataFrame:
    reader = spark.read.format("yak").option("url", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def records(partition: int, count: int) -> list[Record]:
    return [
        (
            None if i % 5 == 0 else f"k{partition}-{i}".encode(),
            f"value {partition}/{i}".encode() + bytes([0, 255]),
            [("h", f"{i}".encode()), ("h", None), ("trace", b"\x00\x01")],
            BASE_TS + partition * 1000 + i,
        )
        for i in range(count)
    ]


def offsets_of(df: DataFrame) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_a_read_equals_what_was_produced(spark, url):
    topic = unique("read")
    create_topic(url, topic, 3)
    produced = {p: records(p, 20) for p in range(3)}
    for p, batch in produced.items():
        assert produce(url, topic, p, batch) == list(range(20))

    df = load(spark, url, subscribe=topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = df.withColumn("ms", F.unix_millis("timestamp")).collect()
    assert len(rows) == 60
    for p in range(3):
        mine = [r for r in rows if r.partition == p]  # in the order Spark returned them
        assert [r.offset for r in mine] == list(range(20))
        got = [
            (
                None if r.key is None else bytes(r.key),
                bytes(r.value),
                [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
                r.ms,
            )
            for r in mine
        ]
        assert got == produced[p]
        assert {(r.topic, r.timestampType) for r in mine} == {(topic, 0)}


def test_offset_options_and_splits(spark, url):
    topic = unique("ranges")
    create_topic(url, topic, 2)
    for p in range(2):
        produce(url, topic, p, records(p, 30))
    ranged = load(
        spark,
        url,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 5, "1": -2}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 25, "1": -1}}}}',
        maxRecordsPerPartition="7",
    )
    assert ranged.rdd.getNumPartitions() == 3 + 5  # 20 offsets in 3 pieces, 30 in 5
    assert offsets_of(ranged) == [(0, o) for o in range(5, 25)] + [(1, o) for o in range(30)]
    assert load(spark, url, subscribe=topic, minPartitions="6").rdd.getNumPartitions() == 6

    # Records 10.. of partition 0 and every record of partition 1 are at or after it.
    since = load(spark, url, subscribe=topic, startingTimestamp=str(BASE_TS + 10))
    assert offsets_of(since) == [(0, o) for o in range(10, 30)] + [(1, o) for o in range(30)]
    assigned = load(spark, url, assign=f'{{"{topic}": [1]}}', endingOffsets="latest")
    assert offsets_of(assigned) == [(1, o) for o in range(30)]


def test_subscribe_pattern_reads_every_matching_topic(spark, url):
    prefix = unique("pattern")
    for name, partitions in ((f"{prefix}-a", 1), (f"{prefix}-b", 2), (unique("other"), 1)):
        create_topic(url, name, partitions)
        for p in range(partitions):
            produce(url, name, p, records(p, 3))
    df = load(spark, url, subscribePattern=f"{prefix}-.*")
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {f"{prefix}-a": 3, f"{prefix}-b": 6}


def test_bad_options_fail_naming_the_option(spark, url):
    with pytest.raises(PySparkException, match="startingOffsets"):
        load(spark, url, subscribe="t", startingOffsets="oldest").count()
    with pytest.raises(PySparkException, match="'subscribe': topic 'no-such-topic' does not exist"):
        load(spark, url, subscribe="no-such-topic").count()


def test_deleted_offsets_fail_the_read_unless_fail_on_data_loss_is_off(
    spark, url, cluster: LocalCluster
):
    topic = unique("loss")
    create_topic(url, topic, 1)
    produce(url, topic, 0, records(0, 20))

    async def delete_below(offset: int) -> None:
        broker = BrokerClient(cluster.broker_url(0))
        try:
            (result,) = await broker.delete_records(
                [DeleteRecordsPartition(topic=topic, partition=0, offset=offset)]
            )
            assert result.low_watermark == offset, result
        finally:
            await broker.aclose()

    asyncio.run(delete_below(10))
    from_zero = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(PySparkException, match=r"offsets 0 to 9 were deleted.*failOnDataLoss"):
        load(spark, url, subscribe=topic, startingOffsets=from_zero).count()
    skipped = load(spark, url, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert offsets_of(skipped) == [(0, o) for o in range(10, 20)]
    assert offsets_of(load(spark, url, subscribe=topic)) == [(0, o) for o in range(10, 20)]


def test_a_written_dataframe_reads_back(spark, url):
    topic = unique("write")
    create_topic(url, topic, 4)
    rows = [
        ("pinned", b"to partition 3", 3, [("a", b"1"), ("a", None)]),
        ("keyed-1", b"by key", None, []),
        ("keyed-2", b"by key too", None, [("b", b"\x00")]),
        (None, b"round robin", None, None),
    ]
    schema = (
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    spark.createDataFrame(rows, schema).coalesce(1).write.format("yak").option("url", url).option(
        "topic", topic
    ).mode("append").save()

    written = {}
    for p in range(4):
        for r in read_all(url, topic, p):
            key = None if r["key"] is None else base64.b64decode(r["key"]).decode()
            headers = [
                (h["key"], None if h["value"] is None else base64.b64decode(h["value"]))
                for h in r["headers"]
            ]
            written[key] = (p, base64.b64decode(r["value"]), headers)
    assert written["pinned"] == (3, b"to partition 3", [("a", b"1"), ("a", None)])
    assert written["keyed-1"] == (partition_for_key(b"keyed-1", 4), b"by key", [])
    assert written["keyed-2"][0] == partition_for_key(b"keyed-2", 4)
    assert written["keyed-2"][2] == [("b", b"\x00")]
    assert written[None][1:] == (b"round robin", [])
    assert len(written) == 4

    with pytest.raises(PySparkException, match=r"mode\('append'\)"):
        spark.createDataFrame([("x",)], "value string").write.format("yak").option(
            "url", url
        ).option("topic", topic).mode("overwrite").save()
    with pytest.raises(PySparkException, match="'value' column"):
        spark.createDataFrame([("x",)], "key string").write.format("yak").option("url", url).option(
            "topic", topic
        ).mode("append").save()
