"""A rolling restart costs producers nothing: real etcd, a coordinator, three ``yak-broker``s and
a rest-proxy, as processes.

RF 3, ``min.insync.replicas`` 2, acks=all, idempotent. Producers write without a pause while
each broker in turn gets SIGTERM, is started again on its folder, id and port, and rejoins
every ISR before the next one goes:

- HTTP clients through the rest-proxy's produce API (Confluent v2; the proxy's idempotent
  producer behind it) and the SDK's ``AsyncProducer`` (idempotent batches through the native
  API): not one failed request or record;
- one idempotent client per partition on the brokers' own HTTP data plane (``/v1/produce``,
  ``IdempotentProducer``), which follows the leader itself: every attempt that failed was
  answered ``NOT_LEADER_OR_FOLLOWER`` — none met a closed port — because a broker moves its
  leaderships away before its listeners stop.

Afterwards every partition is read from offset 0: each acknowledged record is there exactly
once, at the offset it was acknowledged with, and each producer's records of a partition are
in the order it sent them. The figures (requests, records, errors, the slowest answer, each
restart's phases) are printed.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from loadtest.local_cluster import IdempotentProducer, LocalCluster, local_cluster, wait_for
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd
from yak.sdk import AsyncProducer, RecordMetadata

pytestmark = pytest.mark.integration

TOPIC = "rolling"
PARTITIONS = 6
V2_JSON = "application/vnd.kafka.json.v2+json"


@dataclass
class Tally:
    """What one producer sent and what came back: ``acked`` maps each value to (partition,
    offset) in the order the records were sent; ``slowest``: the longest wait for an answer."""

    requests: int = 0
    records: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    acked: dict[str, tuple[int, int]] = field(default_factory=dict)
    slowest: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.requests} requests, {self.records} records, {len(self.acked)} acknowledged, "
            f"errors {dict(self.errors)}, slowest answer {self.slowest:.2f} s"
        )


async def _proxy_loop(
    http: httpx.AsyncClient, name: str, stop: asyncio.Event, tally: Tally
) -> None:
    """Confluent v2 produce requests of 10 keyed JSON records, one after the other."""
    headers = {"content-type": V2_JSON}
    while not stop.is_set():
        values = [f"{name}-{tally.records + i}" for i in range(10)]
        body = orjson.dumps({"records": [{"key": v, "value": v} for v in values]})
        tally.requests += 1
        tally.records += len(values)
        started = time.monotonic()
        try:
            answer = await http.post(f"/topics/{TOPIC}", content=body, headers=headers)
        except httpx.HTTPError as exc:
            tally.errors[type(exc).__name__] += 1
            continue
        tally.slowest = max(tally.slowest, time.monotonic() - started)
        if answer.status_code != 200:
            tally.errors[f"HTTP {answer.status_code}"] += 1
            continue
        for value, result in zip(values, answer.json()["offsets"], strict=True):
            if result["error_code"] is not None:
                tally.errors[str(result["error_code"])] += 1
            else:
                tally.acked[value] = (result["partition"], result["offset"])


async def _sdk_loop(url: str, stop: asyncio.Event, tally: Tally) -> None:
    """The SDK's idempotent producer, 50 keyed records at a time (counted as one request; the
    SDK batches them per partition)."""
    async with AsyncProducer(url, linger_ms=5, delivery_timeout_ms=60_000) as producer:
        while not stop.is_set():
            values = [f"sdk-{tally.records + i}" for i in range(50)]
            tally.requests += 1
            tally.records += len(values)
            started = time.monotonic()
            futures = [await producer.send(TOPIC, orjson.dumps(v), key=v.encode()) for v in values]
            outcomes = await asyncio.gather(*futures, return_exceptions=True)
            tally.slowest = max(tally.slowest, time.monotonic() - started)
            for value, outcome in zip(values, outcomes, strict=True):
                if isinstance(outcome, RecordMetadata):
                    tally.acked[value] = (outcome.partition, outcome.offset)
                else:
                    tally.errors[type(outcome).__name__] += 1


def _slowest(producer: IdempotentProducer) -> float:
    """The longest gap between two acknowledgements of a direct producer."""
    times = [ack.acked_at for ack in producer.acks]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


async def _read_partition(http: httpx.AsyncClient, partition: int) -> list[Any]:
    """Every record of the partition from offset 0; values as their UTF-8 text (the proxy's
    and the SDK's are JSON strings, the direct producers' are plain)."""
    records: list[Any] = []
    offset = 0
    while True:
        answer = await http.get(
            f"/api/v1/topics/{TOPIC}/partitions/{partition}/records",
            params={"offset": offset, "max_bytes": 1_000_000, "value_encoding": "string"},
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        records += body["records"]
        if body["next_offset"] >= body["high_watermark"]:
            return records
        offset = body["next_offset"]


async def _restart(cluster: LocalCluster, admin: AdminClient, broker_id: int) -> dict[str, float]:
    """SIGTERM ``broker_id``, start it again, wait until it is back in every ISR: the seconds
    each phase took."""
    process = cluster.brokers[broker_id]
    signalled = time.monotonic()
    process.popen.send_signal(signal.SIGTERM)
    exit_code = await asyncio.to_thread(process.popen.wait, 30)
    exited = time.monotonic()
    assert exit_code in (0, -signal.SIGTERM), exit_code  # uvicorn re-raises the signal
    await asyncio.to_thread(cluster.start_broker, broker_id)
    ready = time.monotonic()
    await wait_for(admin, TOPIC, "full-isr")
    in_sync = time.monotonic()
    return {
        "stop": exited - signalled,
        "start": ready - exited,
        "rejoin": in_sync - ready,
        "total": in_sync - signalled,
    }


async def test_rolling_restart_of_every_broker_costs_producers_no_error(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    with local_cluster(tmp_path, etcd, f"roll-{uuid.uuid4().hex[:8]}") as cluster:
        cluster.start_proxy(0)
        async with (
            AdminClient(cluster.coordinator_url) as admin,
            httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=60) as http,
        ):
            await admin.create_topic(
                TOPIC,
                partitions=PARTITIONS,
                replication_factor=3,
                configs={"min.insync.replicas": "2"},
            )
            await wait_for(admin, TOPIC, "full-isr")
            tallies = {f"proxy-{i}": Tally() for i in range(3)}
            sdk = Tally()
            direct = [
                IdempotentProducer(cluster, admin, TOPIC, p, producer_id=7_000 + p)
                for p in range(PARTITIONS)
            ]
            stop = asyncio.Event()
            loops = [
                *(asyncio.create_task(_proxy_loop(http, n, stop, t)) for n, t in tallies.items()),
                asyncio.create_task(_sdk_loop(cluster.proxy_url(0), stop, sdk)),
                *(asyncio.create_task(d.run(stop, 0.01)) for d in direct),
            ]
            phases: dict[int, dict[str, float]] = {}
            try:
                await asyncio.sleep(1.0)
                for broker_id in sorted(cluster.brokers):
                    phases[broker_id] = await _restart(cluster, admin, broker_id)
                await asyncio.sleep(1.0)
            finally:
                stop.set()
                await asyncio.gather(*loops, return_exceptions=True)
                for producer in direct:
                    await producer.aclose()
            tallies["sdk"] = sdk
            stored = {p: await _read_partition(http, p) for p in range(PARTITIONS)}

    for broker_id, took in phases.items():
        print(f"broker {broker_id}: " + ", ".join(f"{k} {v:.2f} s" for k, v in took.items()))
    for name, tally in tallies.items():
        print(f"{name}: {tally}")
    for producer in direct:
        print(
            f"direct-{producer.partition}: {len(producer.acks)} acknowledged, failed attempts "
            f"{producer.errors}, slowest answer {_slowest(producer):.2f} s"
        )
    errors = {name: dict(t.errors) for name, t in tallies.items() if t.errors}
    assert not errors, f"produce errors during the rolling restart: {errors}"
    refused = {p.partition: p.errors for p in direct if set(p.errors) - {"NOT_LEADER_OR_FOLLOWER"}}
    assert not refused, f"attempts that met no listener (or another error): {refused}"

    counts = Counter(r["value"] for records in stored.values() for r in records)
    doubled = [value for value, count in counts.items() if count > 1]
    assert not doubled, f"written twice: {doubled[:10]}"
    where = {(p, r["offset"]): r["value"] for p, records in stored.items() for r in records}
    for tally in tallies.values():
        last: dict[int, int] = {}
        for value, (partition, offset) in tally.acked.items():  # in the order sent
            stored_value = orjson.dumps(value).decode()
            assert where.get((partition, offset)) == stored_value, f"{value} not at {offset}"
            assert offset > last.get(partition, -1), f"{value} out of order in {partition}"
            last[partition] = offset
        assert len(tally.acked) > 100, f"only {len(tally.acked)} records acknowledged"
    for producer in direct:
        found = [where.get((producer.partition, ack.offset)) for ack in producer.acks]
        assert found == [ack.value.decode() for ack in producer.acks]
