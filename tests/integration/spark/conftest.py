"""Fixtures of the PySpark tests: one local SparkSession per test run, and a small real cluster
(etcd, a coordinator, one broker, one rest-proxy) for the package: every test makes its own
topics and groups, and none stops or reconfigures a process, so the four modules share it
rather than start one each.

Spark's Python workers import ``yak.spark`` by name, so they run this interpreter (the venv
where the package is installed). The JVM is kept small and quiet (spark.md): ``local[2]``, no
UI, 2 shuffle partitions, 1 GB, loopback only, log4j at ERROR.
"""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyspark.sql import SparkSession

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd
from yak.spark import register

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""

#: (key, value, headers, timestamp ms) of a produced record.
Record = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    conf_dir: Path = tmp_path_factory.mktemp("spark-conf")
    (conf_dir / "log4j2.properties").write_text(_LOG4J)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        env.setenv("SPARK_CONF_DIR", str(conf_dir))
        session = (
            SparkSession.builder.master("local[2]")
            .appName("yak-spark-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "1g")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        try:
            yield session
        finally:
            session.stop()


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("cluster")
    with local_cluster(folder, etcd, f"spark-{uuid.uuid4().hex[:8]}", brokers=1) as running:
        running.start_proxy(0)
        yield running


@pytest.fixture(scope="package")
def url(cluster: LocalCluster) -> str:
    return cluster.proxy_url(0)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(url: str, name: str, partitions: int) -> None:
    answer = httpx.post(
        f"{url}/api/v1/topics",
        json={"name": name, "partitions": partitions, "replication_factor": 1},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def produce(url: str, topic: str, partition: int, records: Sequence[Record]) -> list[int]:
    """Write ``records`` to one partition in one request; their offsets."""
    body = {
        "key_encoding": "base64",
        "value_encoding": "base64",
        "header_encoding": "base64",
        "records": [
            {
                "key": _b64(key),
                "value": _b64(value),
                "headers": [{"key": k, "value": _b64(v)} for k, v in headers],
                "timestamp": timestamp,
                "partition": partition,
            }
            for key, value, headers, timestamp in records
        ],
    }
    answer = httpx.post(f"{url}/api/v1/topics/{topic}/records", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert all(r.get("error") is None for r in results), results
    return [r["offset"] for r in results]


def read_all(url: str, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every record of a partition, as the native API renders it with base64 encodings."""
    records: list[dict[str, Any]] = []
    offset = 0
    while True:
        answer = httpx.get(
            f"{url}/api/v1/topics/{topic}/partitions/{partition}/records",
            params={
                "offset": offset,
                "key_encoding": "base64",
                "value_encoding": "base64",
                "header_encoding": "base64",
            },
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        page = answer.json()
        records.extend(page["records"])
        if page["next_offset"] >= page["high_watermark"]:
            return records
        offset = page["next_offset"]
