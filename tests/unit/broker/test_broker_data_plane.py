"""The broker app in-process: produce, fetch, long poll, errors, offsets (in-memory etcd).

Every test that goes through ``broker.client`` runs twice: with produce and fetch over HTTP
and over the internal listener (Kafka framing): both transports must behave the same.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import (
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from yak.metadata.models import TopicRecord
from yak.protocol.broker_models import DeleteRecordsPartition
from yak.protocol.broker_wire import (
    FRAME_CONTENT_TYPE,
    FetchPartition,
    FetchRequest,
    ProducePartition,
    ProduceRequest,
    encode_produce_request,
)
from yak.record import RecordInput, decode_batches, encode_batch, iter_records
from yak.record.batch_header import parse_header
from yak.types import TopicPartition


@pytest.fixture
def broker(broker_on_each_transport: BrokerHarness) -> BrokerHarness:
    return broker_on_each_transport


def batch(*values: bytes, timestamp: int = 1_700_000_000_000) -> bytes:
    return encode_batch([RecordInput(key=None, value=v, timestamp=timestamp) for v in values])


async def test_produce_then_fetch_returns_the_records_in_order(broker: BrokerHarness) -> None:
    await broker.create_topic("orders", leader_epoch=3)
    first = await broker.client.produce_one("orders", 0, batch(b"a", b"b"))
    second = await broker.client.produce_one("orders", 0, batch(b"c"))
    assert (first.base_offset, second.base_offset) == (0, 2)
    assert first.log_append_time == -1

    fetched = await broker.client.fetch_one("orders", 0, 0, max_wait_ms=0)
    records = list(iter_records(fetched.records))
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert (fetched.high_watermark, fetched.last_stable_offset, fetched.log_start_offset) == (
        3,
        3,
        0,
    )
    epochs = {b.header.partition_leader_epoch for b in decode_batches(fetched.records)}
    assert epochs == {3}


async def test_one_request_for_several_partitions_reports_each(broker: BrokerHarness) -> None:
    await broker.create_topic("multi", partitions=2)
    results = await broker.client.produce(
        [
            ProducePartition("multi", 0, batch(b"x")),
            ProducePartition("multi", 1, batch(b"y", b"z")),
            ProducePartition("multi", 7, batch(b"lost")),
        ]
    )
    assert [r.base_offset for r in results[:2]] == [0, 0]
    assert results[2].error is not None
    assert results[2].error.code == "UNKNOWN_TOPIC_OR_PARTITION"
    fetched = await broker.client.fetch(
        FetchRequest((FetchPartition("multi", 0, 0), FetchPartition("multi", 1, 0)), max_wait_ms=0)
    )
    assert [len(list(iter_records(p.records))) for p in fetched] == [1, 2]


async def test_a_bad_crc_is_refused_and_nothing_is_written(broker: BrokerHarness) -> None:
    await broker.create_topic("crc")
    good = batch(b"ok")
    bad = bytearray(batch(b"bad"))
    bad[-1] ^= 0xFF
    body = encode_produce_request(ProduceRequest((ProducePartition("crc", 0, good + bad),)))
    response = await broker.http.post(
        "/v1/produce", content=body, headers={"content-type": FRAME_CONTENT_TYPE}
    )
    assert response.status_code == 400
    assert response.json()["partitions"][0]["error"]["code"] == "CORRUPT_MESSAGE"
    log = broker.broker.replicas.replicas[TopicPartition("crc", 0)].log
    assert log.log_end_offset == 0


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "shorter than its 8-byte prefix"),
        (b"QQQQ\x00\x00\x00\x02{}", "bad frame magic"),
        (b"YKF1\x00\x00\x10\x00{}", "does not fit"),
        (b"YKF1\x00\x00\x00\x02[]", "must be a JSON object"),
        (b'YKF1\x00\x00\x00\x0b{"acks": 2}', "acks must be 0, 1 or -1"),
    ],
)
async def test_malformed_produce_frames_get_400(
    broker: BrokerHarness, body: bytes, fragment: str
) -> None:
    response = await broker.http.post("/v1/produce", content=body)
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID_REQUEST"
    assert fragment in response.json()["message"]


async def test_a_body_above_the_limit_gets_413(broker: BrokerHarness) -> None:
    await broker.create_topic("big")
    response = await broker.http.post("/v1/produce", content=b"x" * (4 * 1024 * 1024 + 1))
    assert response.status_code == 413
    assert response.json()["code"] == "MESSAGE_TOO_LARGE"


async def test_max_message_bytes_of_the_topic_applies(broker: BrokerHarness) -> None:
    await broker.create_topic("small", configs={"max.message.bytes": "200"})
    results = await broker.client.produce([ProducePartition("small", 0, batch(b"v" * 500))])
    assert results[0].error is not None
    assert results[0].error.code == "MESSAGE_TOO_LARGE"


async def test_not_leader_names_the_leader(broker: BrokerHarness) -> None:
    await broker.create_topic("elsewhere", leader=1, replicas=(1, 0), leader_epoch=4)
    with pytest.raises(NotLeaderOrFollowerError) as raised:
        await broker.client.produce_one("elsewhere", 0, batch(b"v"))
    assert raised.value.details["leader"] == 1
    assert raised.value.details["leader_epoch"] == 4
    response = await broker.http.post(
        "/v1/fetch", json={"partitions": [{"topic": "elsewhere", "partition": 0, "offset": 0}]}
    )
    assert response.status_code == 421


async def test_unknown_topic_is_404(broker: BrokerHarness) -> None:
    body = encode_produce_request(ProduceRequest((ProducePartition("nope", 0, batch(b"v")),)))
    response = await broker.http.post("/v1/produce", content=body)
    assert response.status_code == 404
    assert response.json()["partitions"][0]["error"]["code"] == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_a_long_poll_is_woken_by_an_append(broker: BrokerHarness) -> None:
    await broker.create_topic("poll")
    tp = TopicPartition("poll", 0)
    fetch = asyncio.create_task(broker.client.fetch_one("poll", 0, 0, max_wait_ms=30_000))
    for _ in range(100):  # let the fetch reach its wait (a few event-loop turns)
        if broker.broker.waiters.waiting(tp):
            break
        await asyncio.sleep(0)
    assert broker.broker.waiters.waiting(tp) == 1
    await broker.client.produce_one("poll", 0, batch(b"wake"))
    fetched = await asyncio.wait_for(fetch, 5)
    assert [r.value for r in iter_records(fetched.records)] == [b"wake"]


async def test_a_long_poll_answers_empty_at_max_wait(broker: BrokerHarness) -> None:
    await broker.create_topic("quiet")
    loop = asyncio.get_running_loop()
    started = loop.time()
    fetched = await broker.client.fetch_one("quiet", 0, 0, max_wait_ms=100)
    assert loop.time() - started >= 0.09
    assert len(fetched.records) == 0
    assert fetched.high_watermark == 0


async def test_fetch_beyond_the_log_end_is_out_of_range(broker: BrokerHarness) -> None:
    await broker.create_topic("range")
    with pytest.raises(OffsetOutOfRangeError):
        await broker.client.fetch_one("range", 0, 5, max_wait_ms=0)


async def test_acks_zero_gets_204_and_appends(broker: BrokerHarness) -> None:
    await broker.create_topic("fire")
    assert await broker.client.produce([ProducePartition("fire", 0, batch(b"f"))], acks=0) == ()
    fetched = await broker.client.fetch_one("fire", 0, 0, max_wait_ms=0)
    assert [r.value for r in iter_records(fetched.records)] == [b"f"]


async def test_acks_all(broker: BrokerHarness) -> None:
    await broker.create_topic("solo")
    assert (await broker.client.produce_one("solo", 0, batch(b"1"), acks=-1)).base_offset == 0
    await broker.create_topic("strict", configs={"min.insync.replicas": "2"})
    with pytest.raises(NotEnoughReplicasError):
        await broker.client.produce_one("strict", 0, batch(b"3"), acks=-1)


async def test_acks_all_waits_for_the_follower_and_the_high_watermark(
    broker: BrokerHarness,
) -> None:
    """A follower in the ISR: nothing is visible or acknowledged until it fetched past it."""
    await broker.create_topic("pair", replicas=(0, 1))
    (result,) = await broker.client.produce(
        [ProducePartition("pair", 0, batch(b"a", b"b"))], acks=-1, timeout_ms=200
    )
    assert result.error is not None
    assert result.error.code == "REQUEST_TIMED_OUT"
    consumer = await broker.client.fetch_one("pair", 0, 0, max_wait_ms=0)
    assert (consumer.high_watermark, len(consumer.records)) == (0, 0)

    waiting = asyncio.create_task(broker.client.produce_one("pair", 0, batch(b"c"), acks=-1))
    log = broker.broker.replicas.replicas[TopicPartition("pair", 0)].log
    for _ in range(500):  # until the request got through the in-process transport
        if log.log_end_offset == 3:
            break
        await asyncio.sleep(0.01)
    follower = FetchRequest((FetchPartition("pair", 0, 0, current_leader_epoch=0),), replica_id=1)
    (copied,) = await broker.client.fetch(follower)  # the follower reads up to the log end
    assert [r.value for r in iter_records(copied.records)] == [b"a", b"b", b"c"]
    assert not waiting.done()
    caught_up = FetchRequest(
        (FetchPartition("pair", 0, 3, current_leader_epoch=0),), replica_id=1, max_wait_ms=0
    )
    (answer,) = await broker.client.fetch(caught_up)  # its next fetch says it holds 0..2
    assert (await asyncio.wait_for(waiting, 5)).base_offset == 2
    assert answer.high_watermark in (0, 3)  # read before or after the leader moved it
    consumer = await broker.client.fetch_one("pair", 0, 0, max_wait_ms=0)
    assert consumer.high_watermark == 3
    assert [r.value for r in iter_records(consumer.records)] == [b"a", b"b", b"c"]

    unchecked = FetchRequest((FetchPartition("pair", 0, 3),), max_wait_ms=0)
    assert (await broker.client.fetch(unchecked))[0].error is None
    newer = FetchRequest((FetchPartition("pair", 0, 3, current_leader_epoch=5),), max_wait_ms=0)
    (refused,) = await broker.client.fetch(newer)
    assert refused.error is not None
    assert refused.error.code == "UNKNOWN_LEADER_EPOCH"


async def test_sync_flush_mode_acknowledges_after_fsync(broker: BrokerHarness) -> None:
    await broker.create_topic("durable", configs={"flush.mode": "sync"})
    result = await broker.client.produce_one("durable", 0, batch(b"d"))
    log = broker.broker.replicas.replicas[TopicPartition("durable", 0)].log
    assert log.recovery_point >= result.base_offset + 1
    assert log.high_watermark == 1


async def test_list_offsets_delete_records_and_partitions(broker: BrokerHarness) -> None:
    await broker.create_topic("offs")
    for i in range(3):
        await broker.client.produce_one("offs", 0, batch(b"v", timestamp=1_000 + i))
    client = broker.client
    (latest,) = await client.list_offsets([("offs", 0)], "latest")
    (earliest,) = await client.list_offsets([("offs", 0)], "earliest")
    (by_time,) = await client.list_offsets([("offs", 0)], 1_001)
    (missing,) = await client.list_offsets([("nope", 0)], "latest")
    assert (latest.offset, earliest.offset, by_time.offset) == (3, 0, 1)
    assert missing.error is not None
    assert missing.error.code == "UNKNOWN_TOPIC_OR_PARTITION"

    (deleted,) = await client.delete_records(
        [DeleteRecordsPartition(topic="offs", partition=0, offset=2)]
    )
    assert deleted.low_watermark == 2
    (too_far,) = await client.delete_records(
        [DeleteRecordsPartition(topic="offs", partition=0, offset=9)]
    )
    assert too_far.error is not None
    assert too_far.error.code == "OFFSET_OUT_OF_RANGE"

    listing = await client.partitions()
    (hosted,) = [p for p in listing.partitions if p.topic == "offs"]
    assert (hosted.is_leader, hosted.log_start_offset, hosted.high_watermark) == (True, 2, 3)
    assert hosted.log_end_offset == 3
    assert hosted.size_bytes > 0
    assert listing.log_dir
    assert 0 < listing.disk_free_bytes <= listing.disk_total_bytes
    only = await client.partitions(["offs"])
    assert [p.topic for p in only.partitions] == ["offs"]
    assert (await client.partitions(["absent"])).partitions == []

    summary = await client.log_dir()
    (offs,) = [t for t in summary.topics if t.topic == "offs"]
    assert (offs.replicas, offs.leaders, offs.records, offs.high_watermark_sum) == (1, 1, 1, 3)
    assert offs.size_bytes == offs.leader_size_bytes == hosted.size_bytes
    assert sum(t.replicas for t in summary.topics) == len(listing.partitions)
    assert (summary.log_dir, summary.broker_id) == (listing.log_dir, listing.broker_id)


async def test_offsets_request_validation(broker: BrokerHarness) -> None:
    response = await broker.http.get("/v1/offsets", params={"partition": "bad", "timestamp": "x"})
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID_REQUEST"


async def test_a_recreated_topic_never_serves_the_old_data(broker: BrokerHarness) -> None:
    old_id = await broker.create_topic("again")
    await broker.client.produce_one("again", 0, batch(b"old"))
    revision = await broker.store.delete(broker.keyspace.topic("again"))
    assert revision
    new_id = await broker.create_topic("again")
    assert new_id != old_id
    fetched = await broker.client.fetch_one("again", 0, 0, max_wait_ms=0)
    assert len(fetched.records) == 0
    assert fetched.high_watermark == 0
    folder = broker.broker.logs.data_dir / "again-0"
    assert new_id in (folder / "partition.metadata").read_text()


async def test_a_deleting_topic_loses_its_log(broker: BrokerHarness) -> None:
    await broker.create_topic("doomed")
    await broker.client.produce_one("doomed", 0, batch(b"x"))
    kv = await broker.store.get(broker.keyspace.topic("doomed"))
    assert kv is not None
    deleting = TopicRecord.decode(kv.value).model_copy(update={"deleting": True})
    await broker.sync(await broker.store.put(broker.keyspace.topic("doomed"), deleting.encode()))
    assert TopicPartition("doomed", 0) not in broker.broker.logs.logs
    assert not (broker.broker.logs.data_dir / "doomed-0").exists()


async def test_the_broker_is_registered_while_it_runs(broker: BrokerHarness) -> None:
    kv = await broker.store.get(broker.keyspace.broker(0))
    assert kv is not None
    assert kv.lease != 0
    ready = await broker.http.get("/readyz")
    assert ready.status_code == 200


async def test_fetched_batches_carry_assigned_offsets(broker: BrokerHarness) -> None:
    await broker.create_topic("hdr")
    await broker.client.produce_one("hdr", 0, batch(b"a"))
    await broker.client.produce_one("hdr", 0, batch(b"b", b"c"))
    fetched = await broker.client.fetch_one("hdr", 0, 1, max_wait_ms=0)
    assert parse_header(fetched.records).base_offset == 1
