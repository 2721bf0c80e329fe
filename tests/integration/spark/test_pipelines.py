"""The ``archive`` and ``lag_report`` pipelines against a real cluster.

``archive`` with availableNow writes every record of a topic into Parquet folders
``topic=…/date=…`` (UTC dates, here on both sides of a midnight) that pyarrow reads back
equal to the topic; a second run archives only the records produced since, and the archived
offsets per partition say how far retention may go; ``committed_files`` follows the file
sink's log across a compaction. ``lag_report`` writes the lag of a group that committed part
of a topic, appends a snapshot per run, and counts records per minute (summing to what was
produced), as Parquet or CSV.
"""

from __future__ import annotations

import csv
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines import archive, lag_report
from tests.integration.spark.conftest import Record, create_topic, produce, unique
from yak.sdk import Consumer, TopicPartition

pytestmark = pytest.mark.integration

#: 2024-05-01 23:58:00 UTC: records 10 s apart cross midnight after 12 of them.
BASE_TS = int(datetime(2024, 5, 1, 23, 58, tzinfo=UTC).timestamp() * 1000)


#: An archived record's columns: key, value, timestamp ms, headers, topic, date.
Row = tuple[bytes | None, bytes | None, int, list[dict[str, str | bytes | None]], str, str]


def records(partition: int, start: int, count: int, step_ms: int = 10_000) -> list[Record]:
    return [
        (
            None if i % 7 == 0 else f"k{partition}-{i}".encode(),
            f"value {partition}/{i}".encode() + b"\x00\xff",
            [("h", f"{i}".encode()), ("h", None), ("trace", b"\x01")],
            BASE_TS + i * step_ms,
        )
        for i in range(start, start + count)
    ]


def as_rows(topic: str, produced: dict[int, list[Record]]) -> dict[tuple[int, int], Row]:
    """(partition, offset) → the archived columns of each produced record."""
    rows = {}
    for partition, batch in produced.items():
        for offset, (key, value, headers, ts) in enumerate(batch):
            day = datetime.fromtimestamp(ts / 1000, UTC).date().isoformat()
            pairs = [{"key": k, "value": v} for k, v in headers]
            rows[partition, offset] = (key, value, ts, pairs, topic, day)
    return rows


def read_archive(output: Path) -> dict[tuple[int, int], Row]:
    """The committed files of the dataset read with pyarrow: (partition, offset) → columns."""
    files = [str(f) for f in archive.committed_files(output)]
    hive = ds.partitioning(flavor="hive")
    table = ds.dataset(files, format="parquet", partitioning=hive, partition_base_dir=str(output))
    assert table.to_table().num_rows == pq.read_table(output).num_rows  # nothing uncommitted
    rows: dict[tuple[int, int], Row] = {}
    for r in table.to_table().to_pylist():
        assert (r["partition"], r["offset"]) not in rows, "archived twice"
        ts = int(r["timestamp"].timestamp() * 1000)
        rows[r["partition"], r["offset"]] = (
            r["key"],
            r["value"],
            ts,
            r["headers"],
            r["topic"],
            str(r["date"]),
        )
    return rows


def run_archive(spark: SparkSession, url: str, topic: str, tmp_path: Path) -> int:
    query = archive.start(
        spark,
        url=url,
        topics=topic,
        output=str(tmp_path / "archive"),
        checkpoint=str(tmp_path / "ck"),
        available_now=True,
        max_offsets_per_trigger=30,
    )
    query.awaitTermination(90)
    assert query.exception() is None
    return sum(p["numInputRows"] for p in query.recentProgress)


def test_archive_writes_the_topic_once_into_parquet_by_topic_and_date(spark, url, tmp_path):
    topic = unique("arch")
    create_topic(url, topic, 2)
    produced = {p: records(p, 0, 20) for p in range(2)}
    for p, batch in produced.items():
        produce(url, topic, p, batch)
    assert run_archive(spark, url, topic, tmp_path) == 40

    output = tmp_path / "archive"
    folders = {f.relative_to(output).as_posix() for f in output.glob("topic=*/date=*")}
    assert folders == {f"topic={topic}/date=2024-05-01", f"topic={topic}/date=2024-05-02"}
    assert read_archive(output) == as_rows(topic, produced)

    for p in range(2):  # five more each: the next run archives only those
        produce(url, topic, p, records(p, 20, 5))
        produced[p] += records(p, 20, 5)
    assert run_archive(spark, url, topic, tmp_path) == 10
    assert read_archive(output) == as_rows(topic, produced)

    marks = archive.archived_offsets(spark, str(output)).collect()
    assert [tuple(m) for m in marks] == [(topic, 0, 25, 25), (topic, 1, 25, 25)]


def commit_part(url: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Join ``group``, poll until assigned records come, commit ``offsets``, leave."""
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        deadline = time.monotonic() + 30
        while not consumer.poll(timeout_ms=1_000):
            assert time.monotonic() < deadline, "the consumer got no records"
        consumer.commit({TopicPartition(topic, p): o for p, o in offsets.items()})


def test_lag_report_writes_lag_snapshots_and_records_per_minute(spark, url, tmp_path):
    topic, group = unique("lag"), unique("group")
    create_topic(url, topic, 2)
    for p in range(2):  # 30 records 5 s apart from 23:58:00: 12, 12 and 6 a minute
        produce(url, topic, p, records(p, 0, 30, step_ms=5_000))
    commit_part(url, group, topic, {0: 10, 1: 25})
    output = tmp_path / "report"

    for _ in range(2):
        report = lag_report.run(spark, url=url, output=str(output), groups=[group])
        assert report == lag_report.Report(2, 3, (topic,))

    lag = pq.read_table(output / "lag").to_pylist()
    assert len({r["sampled_at"] for r in lag}) == 2  # one snapshot a run, appended
    got = sorted(
        (r["group"], r["topic"], r["partition"], r["committed_offset"], r["end_offset"], r["lag"])
        for r in lag
    )
    once = [(group, topic, 0, 10, 30, 20), (group, topic, 1, 25, 30, 5)]
    assert got == sorted(once * 2)

    counts = pq.read_table(output / "throughput").to_pylist()
    start = datetime(2024, 5, 1, 23, 58, tzinfo=UTC)
    per_minute = [(r["topic"], r["bucket_start"], r["records"]) for r in counts]
    assert [(t, int((s - start).total_seconds()), n) for t, s, n in per_minute] == [
        (topic, 0, 24),
        (topic, 60, 24),
        (topic, 120, 12),
    ]
    assert sum(r["records"] for r in counts) == 60


def test_lag_report_writes_csv(spark, url, tmp_path):
    topic, group = unique("csv"), unique("group")
    create_topic(url, topic, 1)
    produce(url, topic, 0, records(0, 0, 6))
    commit_part(url, group, topic, {0: 4})
    output = tmp_path / "report"
    lag_report.run(spark, url=url, output=str(output), groups=[group], fmt="csv", bucket="1 hour")

    def rows(folder: str) -> list[dict[str, str]]:
        (part,) = (output / folder).glob("part-*.csv")
        with part.open(newline="") as f:
            return list(csv.DictReader(f))

    (lag,) = rows("lag")
    assert (lag["group"], lag["partition"], lag["committed_offset"], lag["lag"]) == (
        group,
        "0",
        "4",
        "2",
    )
    assert [(r["topic"], r["records"]) for r in rows("throughput")] == [(topic, "6")]


def test_committed_files_reads_the_sink_log_from_its_last_compaction(tmp_path):
    log = tmp_path / "_spark_metadata"
    log.mkdir()

    def entries(*actions: tuple[str, str]) -> str:
        lines = [
            f'{{"path":"file://{tmp_path}/{name}","size":1,"isDir":false,'
            f'"modificationTime":1,"blockReplication":1,"blockSize":1,"action":"{action}"}}'
            for name, action in actions
        ]
        return "\n".join(["v1", *lines])

    (log / "8").write_text(entries(("stale.parquet", "add")))  # superseded by 9.compact
    (log / "9.compact").write_text(entries(("a.parquet", "add"), ("b%20c.parquet", "add")))
    (log / "10").write_text(entries(("d.parquet", "add"), ("a.parquet", "delete")))
    (log / ".10.crc").write_text("")
    (log / ".11.tmp").write_text(entries(("uncommitted.parquet", "add")))
    assert archive.committed_files(tmp_path) == [tmp_path / "b c.parquet", tmp_path / "d.parquet"]
