"""Metrics and logs on a real cluster: etcd, a coordinator, 3 brokers and a rest-proxy, as
processes, with ``YAK_LOG_FORMAT=json`` and ``YAK_ACCESS_LOG=true``.

- produce N records of known size and read them back: the leader's per-topic counters move by
  exactly the records and bytes appended and returned (a batch written straight to the broker
  has a known size; records through the proxy are counted exactly, their bytes at least);
- a consumer group's committed offset: its lag gauge is produced - committed;
- kill -9 a follower: the coordinator reports under-replicated partitions and the leader an ISR
  shrink; restarted, it rejoins and the leader reports an ISR expansion;
- a request id sent to the proxy comes back, and is in the proxy's and the broker's log lines.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadtest.local_cluster import LocalCluster, local_cluster, wait_for
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.etcd_server import EmbeddedEtcd
from yak.protocol.broker_wire import FetchPartition, FetchRequest
from yak.record import RecordInput, encode_batch

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("observability")
    with pytest.MonkeyPatch.context() as env:  # inherited by every process started here
        env.setenv("YAK_LOG_FORMAT", "json")
        env.setenv("YAK_ACCESS_LOG", "true")
        with local_cluster(folder, etcd, f"obs-{uuid.uuid4().hex[:8]}", brokers=3) as running:
            running.start_proxy(0)
            yield running


async def scrape(url: str) -> Samples:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(f"{url}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str | int) -> float:
    key = frozenset((k, str(v)) for k, v in labels.items())
    return samples.get((name, key), 0.0)


async def eventually(url: str, check: str, holds: object, timeout_s: float = DEADLINE_S) -> Samples:
    """Scrape ``url`` until ``holds(samples)`` is true (another process's state: nothing local
    to wait on)."""
    assert callable(holds)
    deadline = time.monotonic() + timeout_s
    while True:
        samples = await scrape(url)
        if holds(samples):
            return samples
        assert time.monotonic() < deadline, f"{check}: not within {timeout_s} s"
        await asyncio.sleep(0.2)


async def new_topic(cluster: LocalCluster, prefix: str) -> tuple[str, int, list[int]]:
    """A 1-partition topic with 3 replicas, fully in sync: its name, leader and replicas."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    async with AdminClient(cluster.coordinator_url) as admin:
        await admin.create_topic(name, partitions=1, replication_factor=3)
        described = await wait_for(admin, name, "full-isr")
    partition = described.partitions[0]
    await _proxy_knows(cluster, name)
    return name, partition.leader, list(partition.replicas)


async def _proxy_knows(cluster: LocalCluster, topic: str) -> None:
    async with httpx.AsyncClient(base_url=cluster.proxy_url(), timeout=10) as proxy:
        deadline = time.monotonic() + DEADLINE_S
        while (await proxy.get(f"/topics/{topic}")).status_code != 200:
            assert time.monotonic() < deadline, f"the proxy never saw {topic}"
            await asyncio.sleep(0.1)


async def produce_through_proxy(cluster: LocalCluster, topic: str, values: list[str]) -> None:
    body = {"records": [{"value": v, "partition": 0} for v in values]}
    async with httpx.AsyncClient(base_url=cluster.proxy_url(), timeout=30) as proxy:
        response = await proxy.post(f"/api/v1/topics/{topic}/records", json=body)
    assert response.status_code == 200, response.text
    assert all(r.get("error") is None for r in response.json()["results"])


async def test_topic_bytes_and_records_in_and_out(cluster: LocalCluster) -> None:
    topic, leader, replicas = await new_topic(cluster, "obs-traffic")
    follower = next(r for r in replicas if r != leader)
    leader_url, follower_url = cluster.broker_url(leader), cluster.broker_url(follower)
    before, follower_before = await scrape(leader_url), await scrape(follower_url)

    batch = bytes(encode_batch([RecordInput(value=b"v" * 100) for _ in range(50)]))
    async with BrokerClient(leader_url) as broker:
        await broker.produce_one(topic, 0, batch, acks=-1)
    after = await scrape(leader_url)
    delta = {
        name: value(after, name, topic=topic) - value(before, name, topic=topic)
        for name in ("yak_broker_topic_records_in_total", "yak_broker_topic_bytes_in_total")
    }
    assert delta == {
        "yak_broker_topic_records_in_total": 50,
        "yak_broker_topic_bytes_in_total": len(batch),
    }
    produce = "yak_broker_requests_total"
    assert value(after, produce, request="produce") > value(before, produce, request="produce")
    # acks=all: both followers fetched the batch before the answer.
    replicated = "yak_broker_replication_bytes_out_total"
    assert value(after, replicated, topic=topic) >= 2 * len(batch)
    follower_after = await scrape(follower_url)
    fetched = value(follower_after, "yak_broker_replication_bytes_in_total", topic=topic)
    assert fetched - value(follower_before, "yak_broker_replication_bytes_in_total", topic=topic)
    assert fetched >= len(batch)

    await produce_through_proxy(cluster, topic, ["x" * 200] * 20)
    proxied = await scrape(leader_url)
    records_in = value(proxied, "yak_broker_topic_records_in_total", topic=topic)
    bytes_in = value(proxied, "yak_broker_topic_bytes_in_total", topic=topic)
    assert records_in - value(after, "yak_broker_topic_records_in_total", topic=topic) == 20
    assert bytes_in - value(after, "yak_broker_topic_bytes_in_total", topic=topic) >= 20 * 202

    async with BrokerClient(leader_url) as broker:
        (read,) = await broker.fetch(
            FetchRequest((FetchPartition(topic, 0, 0, 16 << 20),), max_wait_ms=0)
        )
    returned = len(memoryview(read.records))
    consumed = await scrape(leader_url)
    bytes_out = "yak_broker_topic_bytes_out_total"
    records_out = "yak_broker_topic_records_out_total"
    assert value(consumed, bytes_out, topic=topic) - value(proxied, bytes_out, topic=topic) == (
        returned
    )
    assert value(consumed, records_out, topic=topic) == 70
    assert value(consumed, "yak_broker_log_size_bytes", topic=topic, partition=0) == returned
    assert value(consumed, "yak_broker_high_watermark", topic=topic, partition=0) == 70
    assert value(consumed, "yak_broker_log_end_offset", topic=topic, partition=0) == 70
    assert value(consumed, "yak_broker_partitions") >= 1
    assert value(consumed, "yak_broker_leader_partitions") >= 1
    etcd_calls = "yak_etcd_request_duration_seconds_count"
    assert value(consumed, etcd_calls, service="broker", operation="range", result="ok") >= 1
    assert value(consumed, "process_resident_memory_bytes") > 0


async def test_the_latency_budget_is_on_metrics(cluster: LocalCluster) -> None:
    """A produce and a read through the proxy observe every stage of their hops: the proxy's
    own and, at the leader, the append and (acks=all) the replication; a fetch at the broker
    its wait and read."""
    topic, leader, _ = await new_topic(cluster, "obs-stages")
    await produce_through_proxy(cluster, topic, ["x"] * 3)
    async with httpx.AsyncClient(base_url=cluster.proxy_url(), timeout=30) as proxy:
        read = await proxy.get(f"/api/v1/topics/{topic}/partitions/0/records")
    assert read.status_code == 200, read.text
    assert len(read.json()["records"]) == 3
    at_proxy = await scrape(cluster.proxy_url())
    produce, poll = "yak_proxy_produce_stage_seconds_count", "yak_proxy_poll_stage_seconds_count"
    for stage in ("read", "parse", "queue", "sender", "broker", "render"):
        assert value(at_proxy, produce, stage=stage) >= 1, stage
    for stage in ("fetch", "decode", "render"):
        assert value(at_proxy, poll, stage=stage) >= 1, stage
    at_leader = await scrape(cluster.broker_url(leader))
    for stage in ("append", "replication"):
        assert value(at_leader, "yak_broker_produce_stage_seconds_count", stage=stage) >= 1
    async with BrokerClient(cluster.broker_url(leader)) as broker:  # the HTTP data plane
        await broker.fetch(FetchRequest((FetchPartition(topic, 0, 0, 1 << 20),), max_wait_ms=0))
    fetched = await scrape(cluster.broker_url(leader))
    for stage in ("wait", "read"):
        assert value(fetched, "yak_broker_fetch_stage_seconds_count", request="fetch", stage=stage)


async def test_consumer_lag_is_produced_minus_committed(cluster: LocalCluster) -> None:
    topic, leader, _ = await new_topic(cluster, "obs-lag")
    group = f"obs-group-{uuid.uuid4().hex[:8]}"
    await produce_through_proxy(cluster, topic, [f"r{i}" for i in range(25)])
    reset = {"to": "explicit", "offsets": [{"topic": topic, "partition": 0, "offset": 10}]}
    async with httpx.AsyncClient(base_url=cluster.proxy_url(), timeout=30) as proxy:
        response = await proxy.post(f"/api/v1/groups/{group}/offsets/reset", json=reset)
    assert response.status_code == 200, response.text
    lag = "yak_consumer_group_lag"
    samples = await scrape(cluster.broker_url(leader))
    assert value(samples, lag, group=group, topic=topic, partition=0) == 25 - 10
    for other in (b for b in cluster.brokers if b != leader):  # one series, on the leader
        assert (lag, frozenset({("group", group), ("topic", topic), ("partition", "0")})) not in (
            await scrape(cluster.broker_url(other))
        )
    await produce_through_proxy(cluster, topic, ["more"] * 5)
    samples = await scrape(cluster.broker_url(leader))
    assert value(samples, lag, group=group, topic=topic, partition=0) == 30 - 10


async def test_a_killed_follower_shrinks_the_isr_and_its_return_expands_it(
    cluster: LocalCluster,
) -> None:
    topic, leader, replicas = await new_topic(cluster, "obs-isr")
    follower = next(r for r in replicas if r != leader)
    leader_url, coordinator = cluster.broker_url(leader), cluster.coordinator_url
    healthy = await eventually(
        coordinator,
        "no under-replicated partition",
        lambda s: value(s, "yak_coordinator_under_replicated_partitions") == 0,
    )
    assert value(healthy, "yak_coordinator_active_controller") == 1
    assert value(healthy, "yak_coordinator_offline_partitions") == 0
    assert value(healthy, "yak_coordinator_brokers") == 3
    assert ("yak_coordinator_leader_elections_total", frozenset({("kind", "unclean")})) in healthy
    before = await scrape(leader_url)
    shrinks, expands = "yak_broker_isr_shrinks_total", "yak_broker_isr_expands_total"

    cluster.kill(follower)
    await eventually(
        coordinator,
        "under-replicated partitions on the coordinator",
        lambda s: value(s, "yak_coordinator_under_replicated_partitions") > 0,
    )
    shrunk = await eventually(
        leader_url,
        "an ISR shrink on the leader",
        lambda s: (
            value(s, shrinks) > value(before, shrinks)
            and value(s, "yak_broker_under_replicated_partitions") > 0
        ),
    )

    await asyncio.to_thread(cluster.start_broker, follower)  # rejoins and catches up
    async with AdminClient(coordinator) as admin:
        await wait_for(admin, topic, "full-isr")
    await eventually(
        leader_url,
        "an ISR expansion on the leader",
        lambda s: (
            value(s, expands) > value(shrunk, expands)
            and value(s, "yak_broker_under_replicated_partitions") == 0
        ),
    )
    await eventually(
        coordinator,
        "no under-replicated partition after the return",
        lambda s: value(s, "yak_coordinator_under_replicated_partitions") == 0,
    )


def _json_lines(path: Path) -> list[dict[str, object]]:
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            lines.append(orjson.loads(line))
    return lines


async def _logged(path: Path, request_id: str) -> list[dict[str, object]]:
    """The JSON lines of ``path`` carrying ``request_id`` (waits for the process to write)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = [line for line in _json_lines(path) if line.get("request_id") == request_id]
        if found:
            return found
        assert time.monotonic() < deadline, f"{request_id} never logged in {path.name}"
        await asyncio.sleep(0.1)


async def test_a_request_id_travels_from_the_proxy_to_the_broker(cluster: LocalCluster) -> None:
    topic, leader, _ = await new_topic(cluster, "obs-rid")
    await produce_through_proxy(cluster, topic, ["a", "b", "c"])
    request_id = f"obs-{uuid.uuid4().hex}"
    async with httpx.AsyncClient(base_url=cluster.proxy_url(), timeout=30) as proxy:
        response = await proxy.get(
            f"/api/v1/topics/{topic}/partitions/0/records",
            params={"offset": 0},
            headers={"X-Request-Id": request_id},
        )
    assert response.status_code == 200, response.text
    assert [r["value"] for r in response.json()["records"]] == ["a", "b", "c"]
    assert response.headers["x-request-id"] == request_id

    logs = cluster.folder / "logs"
    (proxy_line,) = await _logged(logs / "rest-proxy-0.log", request_id)
    assert proxy_line["logger"] == "yak.access"
    assert proxy_line["service"] == "rest-proxy"
    assert proxy_line["route"] == "/api/v1/topics/{topic}/partitions/{partition}/records"
    assert proxy_line["status"] == 200
    broker_lines = await _logged(logs / f"broker-{leader}.log", request_id)
    # The proxy fetches over the broker's internal listener: Kafka's Fetch, same request id.
    assert {line["route"] for line in broker_lines} == {"Fetch"}
    assert all(line["service"] == "broker" for line in broker_lines)

    samples = await scrape(cluster.proxy_url())
    route = "/api/v1/topics/{topic}/partitions/{partition}/records"
    labels = {"service": "rest-proxy", "route": route, "method": "GET", "status": "200"}
    assert value(samples, "yak_http_request_duration_seconds_count", **labels) >= 1
    assert not any(name.startswith("yak_http") and topic in str(key) for name, key in samples)


async def test_leader_elections_are_counted_by_kind(cluster: LocalCluster) -> None:
    topic, leader, replicas = await new_topic(cluster, "obs-elect")
    coordinator = cluster.coordinator_url
    elections = "yak_coordinator_leader_elections_total"
    before = await scrape(coordinator)

    cluster.kill(leader)  # an in-sync follower takes over: a clean election
    elected = await eventually(
        coordinator,
        "a clean leader election",
        lambda s: value(s, elections, kind="clean") > value(before, elections, kind="clean"),
    )
    assert value(elected, elections, kind="unclean") == value(before, elections, kind="unclean")
    await asyncio.to_thread(cluster.start_broker, leader)
    if replicas[0] == leader:  # its preferred replica is back in sync: leadership moves back
        await eventually(
            coordinator,
            "a preferred leader election",
            lambda s: (
                value(s, elections, kind="preferred") > value(elected, elections, kind="preferred")
            ),
        )
    async with AdminClient(coordinator) as admin:
        await wait_for(admin, topic, "full-isr")
