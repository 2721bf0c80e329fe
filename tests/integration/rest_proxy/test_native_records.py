"""The native record API against a real cluster: headers and timestamps round-trip, the stateless
read long-polls and wakes on append, and an idempotent batch sent twice (through two proxies)
is written once; reads fired as a topic is created wait for its leaders instead of failing."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


async def test_records_with_headers_and_timestamps_round_trip(cluster: LocalCluster) -> None:
    topic = unique("native")
    await create_topic(cluster, topic, partitions=2)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        body = {
            "records": [
                {
                    "key": "k1",
                    "value": {"a": 1},
                    "headers": [{"key": "trace", "value": "abc"}, {"key": "null", "value": None}],
                    "timestamp": 1_700_000_000_000,
                    "partition": 1,
                },
                {"key": "aGVsbG8=", "value": "d29ybGQ=", "partition": 1},
            ],
        }
        answer = await proxy.post(f"/api/v1/topics/{topic}/records", json=body)
        assert answer.status_code == 200, answer.text
        first, second = answer.json()["results"]
        assert (first["partition"], first["offset"], first["timestamp"]) == (
            1,
            0,
            1_700_000_000_000,
        )
        assert first["error"] is None
        assert second["offset"] == 1

        read = await proxy.get(f"/api/v1/topics/{topic}/partitions/1/records", params={"offset": 0})
        assert read.status_code == 200, read.text
        records = read.json()["records"]
        assert records[0]["key"] == "k1"
        assert records[0]["value"] == {"a": 1}
        assert records[0]["timestamp"] == 1_700_000_000_000
        assert records[0]["headers"] == [
            {"key": "trace", "value": "abc"},
            {"key": "null", "value": None},
        ]
        assert read.json()["next_offset"] == 2
        assert read.json()["high_watermark"] == 2
        # The second record's key was a string "aGVsbG8=", not base64: it reads back the same.
        raw = await proxy.get(
            f"/api/v1/topics/{topic}/partitions/1/records",
            params={"offset": 1, "key_encoding": "base64", "value_encoding": "string"},
        )
        assert raw.json()["records"][0]["key"] == "YUdWc2JHOD0="
        assert raw.json()["records"][0]["value"] == '"d29ybGQ="'

        binary = await proxy.post(
            f"/api/v1/topics/{topic}/records",
            json={"records": [{"value": "not base64!"}], "value_encoding": "base64"},
        )
        assert (binary.status_code, binary.json()["code"]) == (400, "INVALID_REQUEST")
        for bad_record in ({"value": 1, "timestamp": 2**63}, {"value": 1, "partition": 2**31}):
            refused = await proxy.post(
                f"/api/v1/topics/{topic}/records", json={"records": [bad_record]}
            )
            assert (refused.status_code, refused.json()["code"]) == (400, "INVALID_REQUEST")
        still = await proxy.post(
            f"/api/v1/topics/{topic}/records", json={"records": [{"value": 2}]}
        )
        assert still.status_code == 200, still.text  # the proxy's producer is unharmed
        negative = await proxy.get(
            f"/api/v1/topics/{topic}/partitions/0/records", params={"offset": -1}
        )
        assert (negative.status_code, negative.json()["code"]) == (400, "INVALID_REQUEST")
        beyond = await proxy.get(
            f"/api/v1/topics/{topic}/partitions/0/records", params={"offset": 50}
        )
        assert (beyond.status_code, beyond.json()["code"]) == (416, "OFFSET_OUT_OF_RANGE")


async def test_stateless_read_wakes_on_append(cluster: LocalCluster) -> None:
    topic = unique("wake")
    await create_topic(cluster, topic, partitions=1)
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as reader,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as writer,
    ):
        started = time.monotonic()
        waiting = asyncio.ensure_future(
            reader.get(
                f"/api/v1/topics/{topic}/partitions/0/records",
                params={"offset": 0, "timeout_ms": 10_000},
            )
        )
        await asyncio.sleep(0.5)  # let the read park at the broker before the append
        assert not waiting.done()
        produced = await writer.post(
            f"/api/v1/topics/{topic}/records", json={"records": [{"value": "wake up"}]}
        )
        assert produced.status_code == 200, produced.text
        answer = await waiting
        elapsed = time.monotonic() - started
        assert [r["value"] for r in answer.json()["records"]] == ["wake up"]
        assert elapsed < 5, f"the read waited {elapsed:.1f} s for an append"


async def test_idempotent_batches_are_written_once(cluster: LocalCluster) -> None:
    topic = unique("idem")
    await create_topic(cluster, topic, partitions=1)
    async with (
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as first,
        httpx.AsyncClient(base_url=cluster.proxy_url(1), timeout=30) as second,
    ):
        session = (await first.post("/api/v1/producers")).json()
        other = (await second.post("/api/v1/producers")).json()
        assert session["producer_id"] != other["producer_id"]
        url = f"/api/v1/topics/{topic}/partitions/0/batches"

        def batch(sequence: int, values: list[str]) -> dict[str, object]:
            return {
                "producer_id": session["producer_id"],
                "producer_epoch": session["producer_epoch"],
                "base_sequence": sequence,
                "records": [{"value": v} for v in values],
            }

        one = await first.post(url, json=batch(0, ["a", "b"]))
        assert one.status_code == 200, one.text
        assert one.json()["offsets"] == [0, 1]
        retried = await second.post(url, json=batch(0, ["a", "b"]))  # the same batch again
        assert retried.json()["offsets"] == [0, 1]
        two = await second.post(url, json=batch(2, ["c"]))
        assert two.json()["offsets"] == [2]
        gap = await first.post(url, json=batch(7, ["d"]))
        assert (gap.status_code, gap.json()["code"]) == (409, "OUT_OF_ORDER_SEQUENCE_NUMBER")
        read = await first.get(f"/api/v1/topics/{topic}/partitions/0/records")
        assert [r["value"] for r in read.json()["records"]] == ["a", "b", "c"]


async def test_reads_right_after_a_topic_is_created_wait_for_its_leaders(
    cluster: LocalCluster,
) -> None:
    """Reads of every partition fired the moment a proxy knows a new topic's leaders, before
    the brokers may have installed them: each long poll waits out its leader's start-up and
    answers 200 with no records, never 421 NOT_LEADER_OR_FOLLOWER."""
    topic, partitions = unique("fresh"), 100
    async with (
        httpx.AsyncClient(base_url=cluster.coordinator_url, timeout=30) as admin,
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy,
    ):
        body = {"name": topic, "partitions": partitions, "replication_factor": 3, "configs": {}}
        created = await admin.post("/admin/v1/topics", json=body)
        assert created.status_code == 201, created.text
        deadline = time.monotonic() + 20
        while True:
            parts = (await proxy.get(f"/topics/{topic}")).json().get("partitions", [])
            if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                break
            assert time.monotonic() < deadline, f"{topic} never reached the proxy"
            await asyncio.sleep(0.01)  # another process's metadata: nothing to await here
        reads = await asyncio.gather(
            *(
                proxy.get(
                    f"/api/v1/topics/{topic}/partitions/{p}/records",
                    params={"offset": 0, "timeout_ms": 1_000},
                )
                for p in range(partitions)
            )
        )
    failed = [r.text for r in reads if r.status_code != 200]
    assert not failed, f"{len(failed)} of {partitions} reads failed, e.g. {failed[0]}"
    assert all(r.json()["records"] == [] for r in reads)
