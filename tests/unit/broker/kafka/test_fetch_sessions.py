"""Consumer fetch sessions (KIP-227) on the Kafka listener, spoken with kio's Fetch v12 and v11:
a full fetch opens a session, incremental ones answer only partitions with news, forgotten
partitions leave it, the long poll wakes on an append, epoch and id errors (71, 70), the final
epoch, a full cache answering sessionless, READ checked on every round (a denial answered at
once, a grant served at the next round), and the cache's size from the broker's setting."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.fetch.v11 import request as fetch11
from kio.schema.fetch.v12 import request as fetch12

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import KafkaTestConnection, kafka_port
from tests.unit.broker.kafka.secured_broker import secured_broker
from tests.unit.broker.kafka.test_kafka_listener import batch, make, produce_request
from yak.record import iter_records
from yak.security import AclBinding, AclFilter, Operation, ResourceType
from yak_broker.kafka import fetch as fetch_module
from yak_broker.kafka.consumer_fetch_sessions import ConsumerFetchSessions
from yak_broker.kafka.listener import KafkaListener
from yak_broker.replication.fetch_waiter import FetchWaiter
from yak_broker.server.broker import Broker
from yak_broker.settings import BrokerSettings

PRODUCE, FETCH = 0, 1
NOT_FOUND, BAD_EPOCH, DENIED = 70, 71, 29


@pytest.fixture
async def kafka(broker: BrokerHarness) -> AsyncIterator[KafkaTestConnection]:
    connection = await KafkaTestConnection.open(kafka_port(broker.broker))
    yield connection
    await connection.close()


def sessions_of(broker: Broker) -> ConsumerFetchSessions:
    listener = broker.kafka_listener
    assert isinstance(listener, KafkaListener)
    return listener._server_state.fetch_sessions


def fetch(
    positions: dict[tuple[str, int], int],
    *,
    session: tuple[int, int] = (0, 0),
    forgotten: dict[str, list[int]] | None = None,
    max_wait_ms: int = 0,
    version: int = 12,
) -> Any:
    """A Fetch naming ``positions`` ((topic, partition) -> offset) in ``session`` (id, epoch)."""
    module = fetch12 if version == 12 else fetch11
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in positions.items():
        by_topic.setdefault(topic, []).append(
            make(
                module.FetchPartition,
                partition=partition,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
            )
        )
    return make(
        module.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        session_id=session[0],
        session_epoch=session[1],
        topics=tuple(
            make(module.FetchTopic, topic=t, partitions=tuple(p)) for t, p in by_topic.items()
        ),
        forgotten_topics_data=tuple(
            make(module.ForgottenTopic, topic=t, partitions=tuple(p))
            for t, p in (forgotten or {}).items()
        ),
    )


def answered(response: Any) -> dict[tuple[str, int], list[bytes | None]]:
    """The partitions of a response and the values of their records."""
    return {
        (topic.topic, p.partition_index): [r.value for r in iter_records(p.records or b"")]
        for topic in response.responses
        for p in topic.partitions
    }


async def produce(
    kafka: KafkaTestConnection, topic: str, *values: bytes, partition: int = 0
) -> None:
    request = produce_request(topic, batch(*values))
    if partition:
        data = request.topic_data[0].partition_data[0]
        request = make(
            type(request),
            acks=request.acks,
            timeout=request.timeout,
            topic_data=(
                make(
                    type(request.topic_data[0]),
                    name=topic,
                    partition_data=(make(type(data), index=partition, records=data.records),),
                ),
            ),
        )
    answer = await kafka.call(PRODUCE, 7, request)
    assert answer.responses[0].partition_responses[0].error_code == 0


@pytest.mark.parametrize("version", [12, 11])
async def test_incremental_fetches_answer_only_partitions_with_news(
    broker: BrokerHarness, kafka: KafkaTestConnection, version: int
) -> None:
    await broker.create_topic("news", partitions=2)
    await produce(kafka, "news", b"a")
    full = await kafka.call(
        FETCH, version, fetch({("news", 0): 0, ("news", 1): 0}, version=version)
    )
    assert full.error_code == 0
    assert full.session_id > 0
    assert answered(full) == {("news", 0): [b"a"], ("news", 1): []}
    sid = full.session_id
    # The consumer moves on in partition 0; partition 1 is unchanged: only the move is named.
    idle = await kafka.call(
        FETCH, version, fetch({("news", 0): 1}, session=(sid, 1), max_wait_ms=50, version=version)
    )
    assert (idle.error_code, idle.session_id, answered(idle)) == (0, sid, {})
    await produce(kafka, "news", b"b", partition=1)
    news = await kafka.call(FETCH, version, fetch({}, session=(sid, 2), version=version))
    assert answered(news) == {("news", 1): [b"b"]}
    assert news.responses[0].partitions[0].high_watermark == 1
    counts = sessions_of(broker.broker).fetches
    assert (counts["full"], counts["incremental"]) == (1, 2)


async def test_an_idle_session_round_reads_no_log_and_builds_no_partition(
    broker: BrokerHarness, kafka: KafkaTestConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.create_topic("quiet", partitions=8)
    positions = {("quiet", p): 0 for p in range(8)}
    full = await kafka.call(FETCH, 12, fetch(positions))
    session = sessions_of(broker.broker).get(full.session_id)
    assert session is not None
    assert len(session.partitions) == 8
    reads: list[Any] = []

    def read_partitions(*args: Any) -> list[Any]:
        reads.append(args)
        return []

    monkeypatch.setattr(fetch_module, "read_partitions", read_partitions)
    idle = await kafka.call(FETCH, 12, fetch({}, session=(full.session_id, 1), max_wait_ms=20))
    assert answered(idle) == {}
    assert reads == []
    assert session.due(broker.broker.replicas.replicas) == []


async def test_the_long_poll_wakes_on_an_append_to_a_session_partition(
    broker: BrokerHarness, kafka: KafkaTestConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.create_topic("woken")
    full = await kafka.call(FETCH, 12, fetch({("woken", 0): 0}))
    session = sessions_of(broker.broker).get(full.session_id)
    assert session is not None
    parking = asyncio.Event()
    wait = FetchWaiter.wait

    async def parks(waiter: FetchWaiter, timeout_s: float) -> bool:
        if waiter is session.waiter:
            parking.set()
        return await wait(waiter, timeout_s)

    monkeypatch.setattr(FetchWaiter, "wait", parks)
    parked = kafka.send(FETCH, 12, fetch({}, session=(full.session_id, 1), max_wait_ms=10_000))
    await parking.wait()  # the idle round found nothing and waits on the session's waiter
    producer = await KafkaTestConnection.open(kafka_port(broker.broker))
    try:
        started = asyncio.get_running_loop().time()
        await produce(producer, "woken", b"now")
        correlation_id, answer = await kafka.receive(FETCH, 12)
    finally:
        await producer.close()
    assert correlation_id == parked
    assert answered(answer) == {("woken", 0): [b"now"]}
    assert asyncio.get_running_loop().time() - started < 5
    assert session.waiter is not None
    assert session.waiter.wakeups >= 1


async def test_forgotten_partitions_leave_the_session(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("left", partitions=2)
    full = await kafka.call(FETCH, 12, fetch({("left", 0): 0, ("left", 1): 0}))
    sid = full.session_id
    forget = await kafka.call(FETCH, 12, fetch({}, session=(sid, 1), forgotten={"left": [1]}))
    assert answered(forget) == {}
    await produce(kafka, "left", b"kept")
    await produce(kafka, "left", b"forgotten", partition=1)
    after = await kafka.call(FETCH, 12, fetch({}, session=(sid, 2)))
    assert answered(after) == {("left", 0): [b"kept"]}
    session = sessions_of(broker.broker).get(sid)
    assert session is not None
    assert list(session.partitions) == [("left", 0)]


async def test_epoch_and_id_errors_and_the_final_epoch(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("epochs")
    await produce(kafka, "epochs", b"x")
    sid = (await kafka.call(FETCH, 12, fetch({("epochs", 0): 0}))).session_id
    skipped = await kafka.call(FETCH, 12, fetch({}, session=(sid, 2)))
    assert (skipped.error_code, answered(skipped)) == (BAD_EPOCH, {})
    unknown = await kafka.call(FETCH, 12, fetch({}, session=(sid + 1, 1)))
    assert unknown.error_code == NOT_FOUND
    assert (await kafka.call(FETCH, 12, fetch({}, session=(sid, 1)))).error_code == 0
    final = await kafka.call(FETCH, 12, fetch({("epochs", 0): 0}, session=(sid, -1)))
    assert (final.error_code, final.session_id, answered(final)) == (0, 0, {("epochs", 0): [b"x"]})
    closed = await kafka.call(FETCH, 12, fetch({}, session=(sid, 2)))
    assert closed.error_code == NOT_FOUND
    assert len(sessions_of(broker.broker)) == 0


async def test_a_full_cache_answers_sessionless_until_a_bigger_fetch_evicts(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("slots", partitions=3)
    sessions = sessions_of(broker.broker)
    sessions.max_sessions = 1
    first = await kafka.call(FETCH, 12, fetch({("slots", 0): 0, ("slots", 1): 0}))
    same_size = await kafka.call(FETCH, 12, fetch({("slots", 1): 0, ("slots", 2): 0}))
    assert first.session_id > 0
    assert same_size.session_id == 0
    bigger = await kafka.call(FETCH, 12, fetch({("slots", p): 0 for p in range(3)}))
    assert bigger.session_id > 0
    evicted = await kafka.call(FETCH, 12, fetch({}, session=(first.session_id, 1)))
    assert evicted.error_code == NOT_FOUND
    assert (sessions.evictions, len(sessions)) == (1, 1)


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.topic, p.partition_index): p.error_code for t in response.responses for p in t.partitions
    }


async def test_read_is_checked_every_round_for_every_partition_of_the_session(
    tmp_path: Path,
) -> None:
    async with secured_broker(tmp_path) as secured:
        for topic in ("mine", "theirs"):
            await secured.harness.create_topic(topic)
        read_mine = AclBinding("User:alice", ResourceType.TOPIC, "mine", Operation.READ)
        await secured.allow(read_mine)
        kafka, admin = await secured.connect("alice"), await secured.connect("admin")
        try:
            # v11: a v12 partition error carries Yak's tagged field, which kio refuses
            full = await kafka.call(FETCH, 11, fetch({("mine", 0): 0}, version=11))
            sid = full.session_id
            assert (errors(full), sid > 0) == ({("mine", 0): 0}, True)
            theirs = fetch({("theirs", 0): 0}, session=(sid, 1), version=11)
            assert errors(await kafka.call(FETCH, 11, theirs)) == {("theirs", 0): DENIED}
            started = asyncio.get_running_loop().time()
            idle = fetch({}, session=(sid, 2), max_wait_ms=10_000, version=11)
            assert errors(await kafka.call(FETCH, 11, idle)) == {("theirs", 0): DENIED}
            assert asyncio.get_running_loop().time() - started < 5  # a denial answers at once
            _, revision = await secured.users.remove_acls(
                AclFilter(principal="User:alice", resource_name="mine")
            )
            await secured.sync(revision)
            revoked = await kafka.call(FETCH, 11, fetch({}, session=(sid, 3), version=11))
            assert errors(revoked) == {("mine", 0): DENIED, ("theirs", 0): DENIED}
            await secured.allow(
                AclBinding("User:alice", ResourceType.TOPIC, "theirs", Operation.READ)
            )
            await produce(admin, "theirs", b"granted")
            granted = await kafka.call(FETCH, 11, fetch({}, session=(sid, 4), version=11))
            assert errors(granted) == {("mine", 0): DENIED, ("theirs", 0): 0}
            assert answered(granted)[("theirs", 0)] == [b"granted"]
        finally:
            await kafka.close()
            await admin.close()


async def test_the_cache_size_is_the_brokers_setting(broker: BrokerHarness) -> None:
    assert sessions_of(broker.broker).max_sessions == 1000  # Kafka's default
    env = {"YAK_KAFKA_FETCH_SESSION_CACHE_SLOTS": "0"}
    assert BrokerSettings.from_env(env).kafka_fetch_session_cache_slots == 0
    with pytest.raises(ValueError, match="fetch session cache slots"):
        BrokerSettings(kafka_fetch_session_cache_slots=-1)
