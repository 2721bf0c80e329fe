"""Spark benchmark: the ``yak`` data source reading a topic, beside the Python SDK, and the
``lowercase`` pipeline's throughput. Run with ``python -m loadtest.bench_spark``
(``make bench-spark``); ``--records N`` for a smaller run.

One real cluster (etcd, a coordinator, one broker and one rest-proxy, as processes;
``loadtest.local_cluster``) gets a topic of ``PARTITIONS`` (16) partitions, replication factor
1, filled with ``--records`` (1,000,000) records of ``VALUE_BYTES`` (1 KiB) ASCII text and a
short key, spread evenly over the partitions by one idempotent ``AsyncProducer`` (large
linger and batches: loading is not what is measured). Then, on one local SparkSession
(``local[2]``, as the tests configure it) in this process:

- **spark batch read**: ``spark.read.format("yak")…load().count()`` over the whole topic
  (one Spark partition per Yak partition, the source's default 4 MiB reads); records/s of the
  first run (which also starts the Python workers) and of a second, warm run, the figure used;
- **SDK read**: the same records with ``AsyncPartitionReader`` in this process, the 16
  partitions read concurrently on one event loop (4 MiB reads), counting records;
  ``spark_vs_sdk_ratio`` = warm Spark records/s ÷ SDK records/s;
- **lowercase**: ``pipelines.lowercase`` with availableNow from the topic into a second topic
  of 16 partitions, start to finish (planning, reading, lower-casing, idempotent writes, the
  checkpoint): ``lowercase_rps``; the target must then hold exactly the records.

Everything shares the machine's cores (2 on the build machine) with the broker and the proxy,
so these are figures of the whole path on one box, not of Spark on a cluster. Issue 8 sets no
goal: the figures are for comparison between runs and against the SDK. Results go to
``loadtest/results/spark.json``; every process is stopped at the end, also on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from loadtest.local_cluster import local_cluster
from pipelines import lowercase
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.sdk import AsyncAdmin, AsyncPartitionReader, AsyncProducer
from yak.spark import register

__all__ = ["main"]

RESULTS = Path(__file__).parent / "results" / "spark.json"
SOURCE, TARGET = "bench-spark", "bench-spark-lower"
PARTITIONS = 16
VALUE_BYTES = 1024
RECORDS = 1_000_000
SEND_CHUNK = 20_000
READ_MAX_BYTES = 4 * 1024 * 1024
LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def value(index: int) -> bytes:
    """``VALUE_BYTES`` of mixed-case ASCII text (something for lowercase to do)."""
    stem = f"Record {index:09d} "
    return (stem + "AbCdEfGh" * VALUE_BYTES)[:VALUE_BYTES].encode()


async def load(url: str, records: int) -> float:
    """Create both topics and write ``records`` to the source; seconds taken to write."""
    async with AsyncAdmin(url, request_timeout_ms=120_000) as admin:
        for name in (SOURCE, TARGET):
            await admin.create_topic(name, partitions=PARTITIONS, replication_factor=1)
    started = time.perf_counter()
    async with AsyncProducer(
        url,
        linger_ms=100,
        batch_max_records=4_000,
        batch_max_bytes=4 * 1024 * 1024,
        buffer_max_bytes=128 * 1024 * 1024,
    ) as producer:
        for first in range(0, records, SEND_CHUNK):
            sent = [
                await producer.send(SOURCE, value(i), key=f"k{i}", partition=i % PARTITIONS)
                for i in range(first, min(first + SEND_CHUNK, records))
            ]
            await asyncio.gather(*sent)
    return time.perf_counter() - started


async def sdk_read(url: str, topic: str) -> int:
    """Every record of ``topic``, its partitions read concurrently; how many there were."""
    async with AsyncPartitionReader(url) as reader:

        async def drain(partition: int) -> int:
            count, offset = 0, 0
            while True:
                read = await reader.read(topic, partition, offset, max_bytes=READ_MAX_BYTES)
                count += len(read.records)
                offset = read.next_offset
                if offset >= read.high_watermark:
                    return count

        counts = await asyncio.gather(*(drain(p) for p in range(PARTITIONS)))
    return sum(counts)


async def end_offsets(url: str, topic: str) -> int:
    async with AsyncPartitionReader(url) as reader:
        marks = [await reader.offsets(topic, p) for p in range(PARTITIONS)]
    return sum(end - start for start, end in marks)


@contextmanager
def spark_session(folder: Path) -> Iterator[SparkSession]:
    """``local[2]``, small and quiet, workers on this interpreter (docs/spark.md)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log4j2.properties").write_text(LOG4J)
    os.environ.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_CONF_DIR=str(folder),
    )
    session = (
        SparkSession.builder.master("local[2]")
        .appName("yak-bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def timed_count(spark: SparkSession, url: str) -> tuple[int, float]:
    started = time.perf_counter()
    count = spark.read.format("yak").option("url", url).option("subscribe", SOURCE).load().count()
    return count, time.perf_counter() - started


def run(folder: Path, url: str, records: int) -> dict[str, Any]:
    load_s = asyncio.run(load(url, records))
    with spark_session(folder / "spark-conf") as spark:
        cold_count, cold_s = timed_count(spark, url)
        warm_count, warm_s = timed_count(spark, url)
        started = time.perf_counter()
        sdk_count = asyncio.run(sdk_read(url, SOURCE))
        sdk_s = time.perf_counter() - started
        started = time.perf_counter()
        query = lowercase.start(
            spark,
            url=url,
            source=SOURCE,
            target=TARGET,
            checkpoint=str(folder / "ck"),
            available_now=True,
        )
        query.awaitTermination()
        lowercase_s = time.perf_counter() - started
        if query.exception() is not None:
            raise RuntimeError(f"lowercase failed: {query.exception()}")
    written = asyncio.run(end_offsets(url, TARGET))
    for name, got in (("spark", cold_count), ("spark", warm_count), ("sdk", sdk_count)):
        if got != records:
            raise RuntimeError(f"{name} read {got:,} records, not {records:,}")
    if written != records:
        raise RuntimeError(f"lowercase wrote {written:,} records, not {records:,}")
    spark_rps = records / warm_s
    sdk_rps = records / sdk_s
    return {
        "load_rps": records / load_s,
        "spark_read_first_s": cold_s,
        "spark_read_first_rps": records / cold_s,
        "spark_read_s": warm_s,
        "spark_read_rps": spark_rps,
        "spark_read_mib_s": records * VALUE_BYTES / warm_s / 2**20,
        "sdk_read_s": sdk_s,
        "sdk_read_rps": sdk_rps,
        "spark_vs_sdk_ratio": spark_rps / sdk_rps,
        "lowercase_s": lowercase_s,
        "lowercase_rps": records / lowercase_s,
        "lowercase_records_written": written,
    }


def machine() -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java.stderr.splitlines()[0] if java.stderr else "unknown",
        "platform": platform.platform(),
    }


def report(records: int, results: dict[str, Any]) -> None:
    document = {
        "benchmark": "spark",
        "records": records,
        "value_bytes": VALUE_BYTES,
        "partitions": PARTITIONS,
        "brokers": 1,
        "replication_factor": 1,
        "spark_master": "local[2]",
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()},
        "machine": machine(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    table = Table(title=f"yak on Spark: {records:,} records of 1 KiB, {PARTITIONS} partitions")
    for column in ("measure", "seconds", "records/s", "MiB/s"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for label, key in (
        ("spark read, first run", "spark_read_first"),
        ("spark read, warm", "spark_read"),
        ("SDK read, one process", "sdk_read"),
        ("lowercase, availableNow", "lowercase"),
    ):
        seconds = results[f"{key}_s"]
        rate = records / seconds
        table.add_row(label, f"{seconds:.1f}", f"{rate:,.0f}", f"{rate * VALUE_BYTES / 2**20:.1f}")
    Console().print(table)
    Console().print(
        f"spark_vs_sdk_ratio {results['spark_vs_sdk_ratio']:.2f}, loaded at "
        f"{results['load_rps']:,.0f} records/s; written to {RESULTS}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0] if __doc__ else "")
    parser.add_argument("--records", type=int, default=RECORDS, help="records to produce")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yak-bench-spark-") as tmp:
        folder = Path(tmp)
        client_port, peer_port = free_ports(2)
        etcd = EmbeddedEtcd(folder / "etcd", client_port, peer_port, unsafe_no_fsync=True)
        etcd.start()
        try:
            with local_cluster(folder, etcd, f"bench{uuid.uuid4().hex[:8]}", brokers=1) as cluster:
                cluster.start_proxy(0)
                results = run(folder, cluster.proxy_url(0), args.records)
        finally:
            etcd.stop()
    report(args.records, results)


if __name__ == "__main__":
    main()
