"""The SDK consumer's binary poll against real proxies and brokers: it hands out exactly the
records the JSON poll gives (offsets, keys, values, headers, timestamps; plain and compressed
batches, a seek into the middle of a batch), and it keeps consuming at-least-once when the
proxy serving it is killed and another takes the member over. Own module: it kills a proxy,
so it gets a cluster of its own."""

from __future__ import annotations

import time
from collections import Counter

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.api.groups import PollResponse
from yak.api.records import FETCH_MEDIA_TYPE
from yak.sdk import AsyncConsumer, AsyncProducer, ConsumerRecord, TopicPartition
from yak.sdk.records import consumer_record
from yak.sdk.sender import Compression

pytestmark = pytest.mark.integration


class Balancer(httpx.AsyncBaseTransport):
    """A load balancer in front of the proxies: sends each request to the proxy ``to`` names
    and notes the content type of each poll's answer."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self._transport = httpx.AsyncHTTPTransport()
        self.to = 0
        self.answered: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = httpx.URL(self._cluster.proxy_url(self.to))
        request.url = request.url.copy_with(host=target.host, port=target.port)
        response = await self._transport.handle_async_request(request)
        if request.url.path.endswith("/records"):
            self.answered[response.headers.get("content-type", "")] += 1
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


async def produce(url: str, topic: str, count: int, compression: Compression = "none") -> None:
    async with AsyncProducer(url, compression=compression, linger_ms=20) as producer:
        futures = [
            await producer.send(
                topic,
                None if i % 17 == 0 else f"v{i}".encode() + bytes(range(i % 7)),
                key=None if i % 5 == 0 else f"k{i}",
                headers=[("i", str(i)), ("empty", None), ("i", b"\xff")] if i % 3 else None,
                timestamp=1_700_000_000_000 + i,
            )
            for i in range(count)
        ]
        for future in futures:
            await future


async def json_poll_all(url: str, topic: str, group: str, count: int) -> list[ConsumerRecord]:
    """Every record through the native JSON poll (base64), as a plain HTTP client reads."""
    records: list[ConsumerRecord] = []
    async with httpx.AsyncClient(base_url=f"{url}/api/v1", timeout=30) as http:
        joined = await http.post(
            f"/groups/{group}/members",
            json={"member_id": "json", "topics": [topic], "auto_offset_reset": "earliest"},
        )
        assert joined.status_code == 201, joined.text
        started = time.monotonic()
        while len(records) < count:
            assert time.monotonic() - started < 60, f"{len(records)} of {count} in 60 s"
            answer = await http.get(
                f"/groups/{group}/members/json/records",
                params={
                    "timeout_ms": 500,
                    "key_encoding": "base64",
                    "value_encoding": "base64",
                    "header_encoding": "base64",
                },
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == "application/json"
            records += [
                consumer_record(r) for r in PollResponse.model_validate_json(answer.content).records
            ]
        await http.delete(f"/groups/{group}/members/json")
    return records


async def sdk_poll_all(consumer: AsyncConsumer, count: int) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    started = time.monotonic()
    while len(records) < count:
        assert time.monotonic() - started < 60, f"{len(records)} of {count} in 60 s"
        records += await consumer.poll(500)
    return records


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_the_binary_poll_hands_out_what_the_json_poll_does(
    cluster: LocalCluster, compression: Compression
) -> None:
    topic = unique("bin")
    await create_topic(cluster, topic, partitions=3)
    await produce(cluster.proxy_url(0), topic, 300, compression)
    expected = await json_poll_all(cluster.proxy_url(1), topic, unique("g"), 300)
    balancer = Balancer(cluster)
    async with AsyncConsumer(
        "http://balancer", unique("g"), topic, auto_offset_reset="earliest", transport=balancer
    ) as consumer:
        got = await sdk_poll_all(consumer, 300)
        assert await consumer.poll(200) == []
    assert balancer.answered[FETCH_MEDIA_TYPE] >= 1  # binary answers, no JSON at all
    assert set(balancer.answered) == {FETCH_MEDIA_TYPE}
    order = lambda r: (r.partition, r.offset)  # noqa: E731
    assert sorted(got, key=order) == sorted(expected, key=order)
    assert len({order(r) for r in got}) == 300


async def test_a_seek_into_a_batch_skips_the_records_below_it(cluster: LocalCluster) -> None:
    topic = unique("seek")
    await create_topic(cluster, topic, partitions=1)
    await produce(cluster.proxy_url(0), topic, 50)  # a few batches of many records
    async with AsyncConsumer(
        cluster.proxy_url(0), unique("g"), topic, auto_offset_reset="earliest"
    ) as consumer:
        await sdk_poll_all(consumer, 50)
        await consumer.seek(topic, 0, 23)
        again = await sdk_poll_all(consumer, 27)
        assert [r.offset for r in again] == list(range(23, 50))
        await consumer.commit()
        assert consumer.position(TopicPartition(topic, 0)) == 50


async def test_consuming_on_through_a_proxy_kill(cluster: LocalCluster) -> None:
    topic, group = unique("failover"), unique("g")
    await create_topic(cluster, topic, partitions=3)
    await produce(cluster.proxy_url(1), topic, 600)
    balancer = Balancer(cluster)
    consumer = AsyncConsumer(
        "http://balancer",
        group,
        topic,
        auto_offset_reset="earliest",
        max_bytes=4096,  # many polls: some before the kill, the rest after
        request_timeout_ms=10_000,
        transport=balancer,
    )
    read: list[ConsumerRecord] = []
    try:
        async with consumer:
            while len(read) < 150:
                read += await consumer.poll(500)
            await consumer.commit()
            committed = {tp: consumer.position(tp) for tp in consumer.assignment()}
            read += await consumer.poll(500)  # read, not committed: may come again
            cluster.kill_proxy(0)
            balancer.to = 1
            started = time.monotonic()
            while len({(r.partition, r.offset) for r in read}) < 600:
                assert time.monotonic() - started < 60, "not all records read within 60 s"
                read += await consumer.poll(500)
    finally:
        cluster.start_proxy(0, YAK_CONSUMER_INSTANCE_TIMEOUT_MS="5000")
    counts = Counter((r.partition, r.offset) for r in read)
    assert len(counts) == 600  # nothing lost
    for (partition, offset), seen in counts.items():
        if seen > 1:  # at-least-once: only what was not committed comes again
            position = committed.get(TopicPartition(topic, partition)) or 0
            assert offset >= position, (partition, offset, position)
    assert set(balancer.answered) == {FETCH_MEDIA_TYPE}
