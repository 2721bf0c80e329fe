"""The client SDK (``yak.sdk``) and the ``yak`` CLI on it, against a real cluster.

Keyed records land where Kafka's partitioner puts them; an acknowledged batch sent again (its
answer lost on the way back) is written once; two members of a group split the partitions and
read every record once between them; a new member resumes from the committed offset; the
blocking twins work from plain threads; ``yak produce`` → ``yak consume`` round-trips.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.errors import (
    FencedMemberEpochError,
    IllegalStateError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from yak.partitioner import partition_for_key
from yak.sdk import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncPartitionReader,
    AsyncProducer,
    Consumer,
    ConsumerRecord,
    Producer,
    TopicPartition,
)

pytestmark = pytest.mark.integration

#: Makes only its own topics and groups: the package's shared cluster (conftest.py).
SHARED_CLUSTER = True


async def read_all(url: str, topic: str, partitions: int) -> list[ConsumerRecord]:
    """Every record of the topic, partition by partition, read statelessly."""
    found: list[ConsumerRecord] = []
    async with AsyncPartitionReader(url) as reader:
        for partition in range(partitions):
            offset = 0
            while True:
                read = await reader.read(topic, partition, offset)
                found += read.records
                offset = read.next_offset
                if offset >= read.high_watermark:
                    break
    return found


class LoseAnswers(httpx.AsyncBaseTransport):
    """Delivers requests to the real proxy but loses the first ``count`` batch answers, as a
    connection dropped after the proxy wrote the batch would."""

    def __init__(self, count: int) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self.to_lose = count
        self.lost: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # Decide before awaiting: concurrent requests must not both take the last loss.
        lose = request.url.path.endswith(("/batches", "/records")) and self.to_lose > 0
        if lose:
            self.to_lose -= 1
        response = await self._real.handle_async_request(request)
        if lose:
            await response.aread()
            assert response.status_code == 200, response.content
            self.lost.append(request.content)
            raise httpx.ReadError("connection reset after the request was written")
        return response

    async def aclose(self) -> None:
        await self._real.aclose()


async def test_keyed_records_land_on_kafkas_partition(cluster: LocalCluster) -> None:
    topic = unique("sdk-keys")
    await create_topic(cluster, topic, partitions=6)
    keys = [f"key-{i % 40}".encode() for i in range(300)]
    async with AsyncProducer(cluster.proxy_url(0), linger_ms=2) as producer:
        futures = [
            await producer.send(topic, f"value-{i}", key=key, headers={"n": str(i)})
            for i, key in enumerate(keys)
        ]
        delivered = await asyncio.gather(*futures)
    for key, metadata in zip(keys, delivered, strict=True):
        assert metadata.partition == partition_for_key(key, 6)
    records = await read_all(cluster.proxy_url(1), topic, 6)
    assert len(records) == 300
    for record in records:
        assert record.key is not None
        assert record.partition == partition_for_key(record.key, 6)
    # Per key, the records are in the order they were sent, each once.
    by_key: dict[bytes, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None
        assert record.value is not None
        by_key.setdefault(record.key, []).append(int(record.value.split(b"-")[1]))
        assert record.headers == (("n", record.value.split(b"-")[1]),)
    for key, numbers in by_key.items():
        assert numbers == [i for i, k in enumerate(keys) if k == key]


async def test_a_resent_acknowledged_batch_is_written_once(cluster: LocalCluster) -> None:
    topic = unique("sdk-idem")
    await create_topic(cluster, topic, partitions=2)
    transport = LoseAnswers(count=3)
    async with AsyncProducer(
        cluster.proxy_url(0), linger_ms=20, retry_backoff_ms=10, transport=transport
    ) as producer:
        futures = [await producer.send(topic, f"v{i}", partition=i % 2) for i in range(40)]
        delivered = await asyncio.gather(*futures)
    assert transport.lost, "no answer was lost: the test did not exercise a resend"
    assert len(transport.lost) == 3
    records = await read_all(cluster.proxy_url(1), topic, 2)
    values = Counter(r.value for r in records)
    assert values == Counter(f"v{i}".encode() for i in range(40)), "a record was duplicated"
    # The offsets the retries reported are where the records are.
    where = {(r.partition, r.offset): r.value for r in records}
    for i, metadata in enumerate(delivered):
        assert where[(metadata.partition, metadata.offset)] == f"v{i}".encode()


async def test_without_idempotence_the_same_fault_duplicates(cluster: LocalCluster) -> None:
    """The contrast that shows the test above exercises the resend: plain records are
    written again when their answer is lost."""
    topic = unique("sdk-dup")
    await create_topic(cluster, topic, partitions=1)
    transport = LoseAnswers(count=1)
    async with AsyncProducer(
        cluster.proxy_url(0),
        idempotent=False,
        acks="all",
        retry_backoff_ms=10,
        transport=transport,
    ) as producer:
        await producer.send_and_wait(topic, "once")
    records = await read_all(cluster.proxy_url(0), topic, 1)
    assert [r.value for r in records] == [b"once", b"once"]


async def test_unknown_topic_and_partition_raise_at_send(cluster: LocalCluster) -> None:
    topic = unique("sdk-unknown")
    await create_topic(cluster, topic, partitions=1)
    async with AsyncProducer(cluster.proxy_url(0)) as producer:
        with pytest.raises(UnknownTopicOrPartitionError):
            await producer.send(unique("missing"), "x")
        with pytest.raises(UnknownTopicOrPartitionError):
            await producer.send(topic, "x", partition=5)


ASSIGNMENT_WAIT_S = 15
NO_ASSIGNMENT = f"the coordinator gave no member of the group a partition in {ASSIGNMENT_WAIT_S} s"


async def produce_values(url: str, topic: str, count: int, *, keyed: bool = True) -> None:
    async with AsyncProducer(url) as producer:
        for i in range(count):
            await producer.send(topic, f"r{i}", key=f"k{i}" if keyed else None)


async def test_two_members_split_the_partitions_and_read_each_record_once(
    cluster: LocalCluster,
) -> None:
    topic, group = unique("sdk-group"), unique("g")
    await create_topic(cluster, topic, partitions=4)
    await produce_values(cluster.proxy_url(0), topic, 200)
    # auto_commit: a partition moved between members is committed where its last owner
    # stopped, in the same step that releases it, so no record is read twice across a move.

    def member(proxy: int) -> AsyncConsumer:
        return AsyncConsumer(
            cluster.proxy_url(proxy),
            group,
            [topic],
            auto_offset_reset="earliest",
            auto_commit=True,
        )

    async with member(0) as first, member(1) as second:
        read: list[ConsumerRecord] = []
        started = time.monotonic()
        while len(read) < 200:
            elapsed = time.monotonic() - started
            assert first.assignment() or second.assignment() or elapsed < ASSIGNMENT_WAIT_S, (
                NO_ASSIGNMENT
            )
            assert elapsed < 60, f"read {len(read)} of 200 records in 60 s"
            polled = await asyncio.gather(first.poll(200), second.poll(200))
            read += polled[0] + polled[1]
        while not (first.assignment() and second.assignment()):  # the split settles
            assert time.monotonic() - started < 60, "the partitions were never split"
            await asyncio.gather(first.poll(200), second.poll(200))
        assert not first.assignment() & second.assignment()
        assert first.assignment() | second.assignment() == {
            TopicPartition(topic, p) for p in range(4)
        }
    where = Counter((r.partition, r.offset) for r in read)
    assert [k for k, n in where.items() if n > 1] == [], "records read twice"
    assert sorted(r.value or b"" for r in read) == sorted(f"r{i}".encode() for i in range(200))


async def poll_until(
    consumer: AsyncConsumer, count: int, limit_s: float = 30
) -> list[ConsumerRecord]:
    """Poll until ``count`` records came back; fail when no partition is ever assigned."""
    records: list[ConsumerRecord] = []
    started = time.monotonic()
    while len(records) < count:
        elapsed = time.monotonic() - started
        assert consumer.assignment() or elapsed < ASSIGNMENT_WAIT_S, NO_ASSIGNMENT
        assert elapsed < limit_s, f"{len(records)} of {count} records in {limit_s} s"
        records += await consumer.poll(500)
    return records


async def test_a_new_member_resumes_from_the_committed_offset(cluster: LocalCluster) -> None:
    topic, group = unique("sdk-commit"), unique("g")
    await create_topic(cluster, topic, partitions=1)
    await produce_values(cluster.proxy_url(0), topic, 10, keyed=False)
    tp = TopicPartition(topic, 0)
    async with AsyncConsumer(
        cluster.proxy_url(0), group, [topic], auto_offset_reset="earliest"
    ) as consumer:
        records = await poll_until(consumer, 1)
        assert records[0].offset == 0
        await consumer.commit({tp: 6})
        with pytest.raises(FencedMemberEpochError):
            await consumer.commit({TopicPartition(topic, 7): 1})
        assert consumer.member_epoch > 0
    async with AsyncConsumer(
        cluster.proxy_url(1), group, topic, auto_offset_reset="earliest"
    ) as resumed:
        records = await poll_until(resumed, 4)
        assert [r.offset for r in records] == [6, 7, 8, 9]
        assert [r.value for r in records] == [b"r6", b"r7", b"r8", b"r9"]
        # commit() without offsets: the position after the last record handed out.
        await resumed.commit()
    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        described = await admin.describe_group(group)
    assert [(p.partition, p.committed_offset) for p in described.partitions] == [(0, 10)]


async def test_seek_pause_and_resume(cluster: LocalCluster) -> None:
    topic, group = unique("sdk-seek"), unique("g")
    await create_topic(cluster, topic, partitions=2)
    async with AsyncProducer(cluster.proxy_url(0)) as producer:
        for i in range(6):
            await producer.send(topic, f"p{i % 2}-{i // 2}", partition=i % 2)
    async with AsyncConsumer(
        cluster.proxy_url(0), group, [topic], auto_offset_reset="earliest"
    ) as consumer:
        records = await poll_until(consumer, 6)
        assert consumer.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert sorted(r.value or b"" for r in records)[0] == b"p0-0"
        zero = TopicPartition(topic, 0)
        assert consumer.position(zero) == 3
        await consumer.seek(topic, 1, 1)
        await consumer.seek_to_beginning(zero)
        consumer.pause(zero)
        assert consumer.paused() == {zero}
        again = await poll_until(consumer, 2)
        assert {(r.partition, r.offset) for r in again} == {(1, 1), (1, 2)}
        assert await consumer.poll(300) == []  # partition 1 is at its end, 0 is paused
        consumer.resume(zero)
        again = await poll_until(consumer, 3)
        assert [(r.partition, r.offset) for r in again] == [(0, 0), (0, 1), (0, 2)]
        await consumer.seek_to_end()
        assert await consumer.poll(300) == []
        with pytest.raises(IllegalStateError):
            consumer.pause(TopicPartition(topic, 9))


def test_blocking_twins_from_a_plain_thread(cluster: LocalCluster) -> None:
    topic, group = unique("sdk-sync"), unique("g")
    with Admin(cluster.proxy_url(0)) as admin:
        created = admin.create_topic(topic, partitions=2, replication_factor=3)
        assert created.partition_count == 2
        assert topic in [t.name for t in admin.list_topics().topics]
        assert admin.cluster().controller is not None
        grown = admin.create_partitions(topic, 3)
        assert grown.partition_count == 3
        altered = admin.alter_topic_configs(topic, set_configs={"retention.ms": "600000"})
        assert altered.configs["retention.ms"] == "600000"
        (described,) = admin.describe_topics([topic, unique("absent")])
        assert (described.name, described.partition_count) == (topic, 3)
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topic(topic)
    asyncio.run(wait_until_served(cluster, topic, 3))
    with Producer(cluster.proxy_url(1), linger_ms=1) as producer:
        futures = [producer.send(topic, f"s{i}", key=f"k{i}") for i in range(30)]
        producer.flush()
        placed = [f.result(timeout=30) for f in futures]
        assert all(
            m.partition == partition_for_key(f"k{i}".encode(), 3) for i, m in enumerate(placed)
        )
        assert producer.send_and_wait(topic, b"last", partition=0).partition == 0
    with Consumer(cluster.proxy_url(0), group, [topic], auto_offset_reset="earliest") as consumer:
        seen: list[ConsumerRecord] = []
        started = time.monotonic()
        for record in consumer:
            seen.append(record)
            if len(seen) == 31:
                break
            waited = time.monotonic() - started
            assert consumer.assignment() or waited < ASSIGNMENT_WAIT_S, NO_ASSIGNMENT
        assert sorted(r.value or b"" for r in seen) == sorted(
            [b"last", *(f"s{i}".encode() for i in range(30))]
        )
        consumer.commit()
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(3)}
    with Admin(cluster.proxy_url(0)) as admin:
        assert admin.delete_topic(topic).name == topic


async def wait_until_served(cluster: LocalCluster, topic: str, partitions: int) -> None:
    """Until every proxy can produce to every partition of a topic created elsewhere."""
    deadline = time.monotonic() + 20
    for index in cluster.proxies:
        async with httpx.AsyncClient(base_url=cluster.proxy_url(index)) as proxy:
            while True:
                parts = (await proxy.get(f"/topics/{topic}")).json().get("partitions", [])
                if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
                    break
                assert time.monotonic() < deadline, f"{topic} not served by proxy {index}"
                await asyncio.sleep(0.05)  # another process's metadata: nothing to await here


async def yak(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run the ``yak`` CLI (off the event loop)."""
    argv = [str(Path(sys.executable).with_name("yak")), *args]
    return await asyncio.to_thread(
        subprocess.run, argv, input=stdin, capture_output=True, text=True, timeout=60
    )


async def test_cli_produce_then_consume_round_trip(cluster: LocalCluster, tmp_path: Path) -> None:
    topic, group = unique("cli"), unique("cli-g")
    await create_topic(cluster, topic, partitions=3)
    url = ("--url", cluster.proxy_url(0))
    produced = await yak(
        "produce", topic, "-K", ":", "-H", "source=cli", "-v", *url,
        stdin="a:one\nb:two\nc:three\nd:four\n",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    placed = produced.stdout.splitlines()
    assert len(placed) == 4
    for key, line in zip("abcd", placed, strict=True):
        assert line.startswith(f"{topic}-{partition_for_key(key.encode(), 3)}@")

    # Stateless, every partition, kcat-like format; then one partition with the classic flags.
    consumed = await yak("consume", topic, "-f", "%k=%v %h %t\\n", *url)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == [
        f"{k}={v} source=cli {topic}"
        for k, v in zip("abcd", ("one", "two", "three", "four"), strict=True)
    ]
    # --filter: the proxy keeps only what the expression accepts (stateless and as a member).
    kept = await yak("consume", topic, "--filter", 'key == "b" or key == "d"', "-f", "%v\\n", *url)
    assert kept.returncode == 0, kept.stderr
    assert sorted(kept.stdout.splitlines()) == ["four", "two"]
    bad = await yak("consume", topic, "--filter", "key ==", *url)
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: INVALID_FILTER"), bad.stderr
    filtered_group = unique("cli-f")
    member = await yak(
        "consume", topic, "--group", filtered_group, "--from-beginning",
        "--filter", 'key startswith "c"', *url,
    )  # fmt: skip
    assert member.returncode == 0, member.stderr
    assert member.stdout.splitlines() == ["three"]
    a_partition = partition_for_key(b"a", 3)
    one = await yak(
        "consume", topic, "--partition", str(a_partition), "--print-offset", "--print-key", *url
    )
    assert one.returncode == 0, one.stderr
    assert "0\ta\tone" in one.stdout.splitlines()

    # As a group member: from the beginning, committed, so a second run finds nothing new.
    grouped = await yak(
        "consume", topic, "--group", group, "--from-beginning", "--max-messages", "3",
        "--print-headers", *url,
    )  # fmt: skip
    assert grouped.returncode == 0, grouped.stderr
    assert len(grouped.stdout.splitlines()) == 3
    rest = await yak("consume", topic, "--group", group, "--from-beginning", *url)
    assert rest.returncode == 0, rest.stderr
    values = [
        line.split("\t")[-1] for line in grouped.stdout.splitlines()
    ] + rest.stdout.splitlines()
    assert sorted(values) == ["four", "one", "three", "two"]

    # yak groups: list, describe (lag 0 now), reset to earliest (dry run, then for real).
    listed = await yak("groups", "list", *url)
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout
    described = await yak("groups", "describe", group, *url)
    assert described.returncode == 0, described.stderr
    assert "total lag 0" in described.stdout
    preview = await yak("groups", "reset-offsets", group, "--to-earliest", "--dry-run", *url)
    assert preview.returncode == 0, preview.stderr
    assert "dry run: nothing changed" in preview.stdout
    reset = await yak("groups", "reset-offsets", group, "--to-earliest", "--topic", topic, *url)
    assert reset.returncode == 0, reset.stderr
    again = await yak("consume", topic, "--group", group, *url)
    assert sorted(again.stdout.splitlines()) == ["four", "one", "three", "two"]

    # Errors: one line, status 1; the proxy found through cluster.json of `yak up`.
    missing = await yak("consume", "nope", *url)
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: UNKNOWN_TOPIC_OR_PARTITION")
    (tmp_path / "cluster.json").write_text(
        json.dumps({"processes": [{"name": "rest-proxy", "url": cluster.proxy_url(1)}]})
    )
    found = await yak("consume", topic, "--max", "1", "--data-dir", str(tmp_path))
    assert found.returncode == 0, found.stderr
    assert len(found.stdout.splitlines()) == 1
