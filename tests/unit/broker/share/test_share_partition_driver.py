"""The share-partition driver on fakes: its timer (lock expiry wakes a long poll and
redelivers), dead letters with their headers, persist-before-answer with a failing save, the
state a new leader restores, and the share metrics."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from tests.unit.broker.share.share_support import (
    DLQ,
    GROUP,
    LOCK_MS,
    TOPIC,
    GatedStore,
    ShareWorld,
    acquired_offsets,
    cluster,
    group_record,
)
from yak.delays import delay_header
from yak.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from yak.protocol import kafka_share as ks
from yak_broker.share.share_metrics import ShareCollector
from yak_broker.share.share_partition_driver import TIMER_GRANULARITY_MS
from yak_broker.share.state.records import (
    AcknowledgementBatch,
    AcknowledgeType,
    DueEntry,
    RecordState,
)
from yak_broker.share.state_store import SharePartitionKey

KEY = SharePartitionKey(GROUP, TOPIC, 0)


@pytest.fixture
def world() -> ShareWorld:
    w = ShareWorld()
    w.start()
    return w


async def test_an_expired_lock_wakes_a_long_poll_and_redelivers_with_a_higher_count(
    world: ShareWorld,
) -> None:
    world.append(0, "a")
    await world.fetch("m1")
    poll = asyncio.create_task(world.fetch("m2", max_wait_ms=20_000))
    await world.waiters.until_parked()
    world.clock.advance(LOCK_MS / 1000)  # the driver's timer fires: the lock expires
    (answer,) = (await asyncio.wait_for(poll, 5)).partitions
    assert acquired_offsets(answer) == [(0, 2)]
    assert 'yak_share_records_expired_total{group="workers",topic="jobs"} 1.0' in (
        generate_latest(world.registry).decode()
    )


async def test_the_delivery_limit_dead_letters_a_copy_with_its_headers(world: ShareWorld) -> None:
    world.logs[0].values("poison", headers=(("trace", b"t-1"),))
    for member in ("m1", "m2", "m3"):  # max_delivery_attempts = 3
        (answer,) = (await world.fetch(member)).partitions
        assert acquired_offsets(answer)
        await world.ack(member, (0, 0, ks.AckType.RELEASE))
    await asyncio.wait_for(world.sink.produced.wait(), 5)
    ((topic, source, copy),) = world.sink.copies
    assert (topic, source, copy.value) == (DLQ, 0, b"poison")
    assert dict(copy.headers) == {
        "trace": b"t-1",
        "yak-dlq-topic": b"jobs",
        "yak-dlq-partition": b"0",
        "yak-dlq-offset": b"0",
        "yak-dlq-delivery-count": b"3",
        "yak-dlq-reason": b"max delivery attempts",
        "yak-dlq-group": b"workers",
    }
    assert world.manager is not None
    driver = world.manager.drivers()[KEY]
    copying = driver._dead_letter_task
    if copying is not None:
        await asyncio.wait_for(copying, 5)  # the copy's hand-off was saved
    assert driver.machine.start_offset == 1  # the record is complete


async def test_a_rejected_record_is_dead_lettered_with_reason_rejected(world: ShareWorld) -> None:
    world.append(0, "bad")
    await world.fetch("m1")
    await world.ack("m1", (0, 0, ks.AckType.REJECT))
    await asyncio.wait_for(world.sink.produced.wait(), 5)
    ((_, _, copy),) = world.sink.copies
    assert dict(copy.headers)["yak-dlq-reason"] == b"rejected"


async def test_without_a_dead_letter_topic_a_rejected_record_is_archived_at_once() -> None:
    world = ShareWorld(snapshot=cluster(group=group_record(dead_letter_topic=None)))
    world.start()
    world.append(0, "bad", "good")
    await world.fetch("m1")
    await world.ack("m1", (0, 0, ks.AckType.REJECT))
    assert world.sink.copies == []
    assert world.manager is not None
    assert world.manager.drivers()[KEY].machine.start_offset == 1


async def test_a_failed_save_answers_an_error_and_the_next_request_sees_the_old_state(
    world: ShareWorld,
) -> None:
    world.append(0, "a", "b")
    await world.fetch("m0", max_records=0 + 1)  # loaded; offset 0 acquired and saved
    world.store.fail_next = NotEnoughReplicasError("the state topic lost its quorum")
    (failed,) = (await world.fetch("m1")).partitions
    assert failed.error is not None
    assert failed.error.code == "NOT_ENOUGH_REPLICAS"
    assert failed.acquired == ()
    (answer,) = (await world.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(1, 1)]  # m1's acquisition was never durable


async def test_a_new_leader_restores_the_saved_state(world: ShareWorld) -> None:
    world.append(0, "a", "b", "c")
    await world.fetch("m1", max_records=2)
    await world.ack("m1", (0, 0, ks.AckType.ACCEPT))
    assert world.manager is not None
    await world.manager.close()
    # leadership moves away and back (a new epoch): a new manager over the same store
    successor = ShareWorld(
        store=world.store,
        clock=world.clock,
        logs=world.logs,
        snapshot=cluster(leader_epoch=1, group=group_record(), revision=5),
    )
    manager = successor.start()
    assert (await successor.ack("m1", (1, 1, ks.AckType.ACCEPT))).error is None  # still m1's
    (answer,) = (await successor.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(2, 1)]
    machine = manager.drivers()[KEY].machine
    assert machine.leader_epoch == 1
    assert machine.start_offset == 2


async def test_losing_leadership_drops_the_driver_and_answers_not_leader(
    world: ShareWorld,
) -> None:
    from yak.metadata.keyspace import KeyKind, ParsedKey

    world.append(0, "a")
    await world.fetch("m1")
    poll = asyncio.create_task(world.fetch("m2", max_wait_ms=20_000))
    await world.waiters.until_parked()
    world.snapshot = cluster(leader=1, leader_epoch=1, group=group_record(), revision=9)
    assert world.manager is not None
    world.manager.on_metadata_change(ParsedKey(KeyKind.PARTITION, topic=TOPIC, partition=0))
    assert world.manager.drivers() == {}
    (answer,) = (await asyncio.wait_for(poll, 5)).partitions
    assert answer.error is not None
    assert answer.error.code == "NOT_LEADER_OR_FOLLOWER"
    assert answer.leader_id == 1


async def test_gauges_per_group(world: ShareWorld) -> None:
    world.append(0, "a", "b", "c")
    await world.fetch("m1", max_records=2)
    assert world.manager is not None
    collector = ShareCollector(world.manager.stats, lambda: world.clock.time_ms() + 5_000)
    families = {f.name: f.samples for f in collector.collect()}
    value = {name: samples[0].value for name, samples in families.items()}
    assert value["yak_share_records_held"] == 2
    assert value["yak_share_records_available"] == 1
    assert value["yak_share_records_in_flight"] == 3
    assert value["yak_share_oldest_unacked_age_seconds"] > 0
    views = world.manager.drivers()[KEY].machine.records()
    assert [v.state for v in views] == [RecordState.ACQUIRED] * 2 + [RecordState.AVAILABLE]


class ListedDelays:
    """A ``DelaySource`` over a fixed list of (offset, due time) entries."""

    def __init__(self, *entries: tuple[int, int]) -> None:
        self.entries = [DueEntry(o, t) for o, t in entries]

    def due(self, after_ms: int, through_ms: int, below_offset: int) -> list[DueEntry]:
        return [
            e
            for e in self.entries
            if after_ms <= e.deliver_at_ms <= through_ms and e.offset < below_offset
        ]

    def next_due_ms(self, after_ms: int) -> int | None:
        return min(
            (e.deliver_at_ms for e in self.entries if e.deliver_at_ms > after_ms), default=None
        )


async def test_a_delayed_record_is_held_back_until_its_timer_makes_it_available() -> None:
    world = ShareWorld()
    due = world.clock.time_ms() + 500
    delays = ListedDelays((0, due))
    world.start().delay_source = lambda _topic, _partition: delays
    world.logs[0].values("later", headers=(delay_header(due),))
    world.append(0, "now")
    (answer,) = (await world.fetch("m1")).partitions
    assert acquired_offsets(answer) == [(1, 1)]  # offset 0 waits for its time
    poll = asyncio.create_task(world.fetch("m2", max_wait_ms=20_000))
    await world.waiters.until_parked()
    world.clock.advance(0.5)  # the driver's timer: the delayed record came due
    (answer,) = (await asyncio.wait_for(poll, 5)).partitions
    assert acquired_offsets(answer) == [(0, 1)]


async def test_an_expiry_by_the_timer_saves_nothing_and_a_crash_after_it_loses_nothing(
    world: ShareWorld,
) -> None:
    world.append(0, "a")
    await world.fetch("m1")  # acquired and saved
    manager = world.manager
    assert manager is not None
    driver, saves = manager.drivers()[KEY], manager.saves
    timer = driver._timer
    assert timer is not None
    world.clock.advance(LOCK_MS / 1000)
    await asyncio.wait_for(timer, 5)  # the lock expired in memory, and nothing was saved
    view = driver.machine.record(0)
    assert view is not None
    assert view.state == RecordState.AVAILABLE
    assert manager.saves == saves
    await manager.close()  # the leader crashes: the store holds the lock as acquired
    successor = ShareWorld(
        store=world.store,
        clock=world.clock,
        logs=world.logs,
        snapshot=cluster(leader_epoch=1, group=group_record(), revision=5),
    )
    successor.start()
    (answer,) = (await successor.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(0, 2)]  # expired again: the same delivery count


async def test_a_delayed_record_taken_by_the_timer_is_not_saved_and_comes_back_after_a_crash() -> (
    None
):
    world = ShareWorld()
    due = world.clock.time_ms() + 500
    delays = ListedDelays((0, due))
    manager = world.start()
    manager.delay_source = lambda _topic, _partition: delays
    world.logs[0].values("later", headers=(delay_header(due),))
    await world.fetch("m1")  # loaded and saved; offset 0 waits for its time
    driver, saves = manager.drivers()[KEY], manager.saves
    timer = driver._timer
    assert timer is not None
    world.clock.advance(0.5)
    await asyncio.wait_for(timer, 5)
    view = driver.machine.record(0)
    assert view is not None
    assert view.state == RecordState.AVAILABLE
    assert manager.saves == saves
    await manager.close()
    successor = ShareWorld(
        store=world.store,
        clock=world.clock,
        logs=world.logs,
        snapshot=cluster(leader_epoch=1, group=group_record(), revision=5),
    )
    successor.start().delay_source = lambda _topic, _partition: delays
    (answer,) = (await successor.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(0, 1)]  # injected again from the saved watermark


async def test_due_times_within_the_timer_granularity_share_one_fire() -> None:
    world = ShareWorld()
    due = world.clock.time_ms() + 500
    delays = ListedDelays((0, due), (1, due + 1), (2, due + 3))
    manager = world.start()
    manager.delay_source = lambda _topic, _partition: delays
    for at in (due, due + 1, due + 3):
        world.logs[0].values("later", headers=(delay_header(at),))
    await world.fetch("m1")
    driver = manager.drivers()[KEY]
    first = driver._timer
    assert first is not None
    world.clock.advance(0.5)
    await asyncio.wait_for(first, 5)  # offset 0 came due
    second = driver._timer
    assert second is not None
    assert driver._timer_at == due + TIMER_GRANULARITY_MS
    world.clock.advance(TIMER_GRANULARITY_MS / 1000)  # not at due + 1, due + 3: once, here
    await asyncio.wait_for(second, 5)
    assert [v.offset for v in driver.machine.records()] == [0, 1, 2]  # one fire took both


async def test_an_acquisition_applies_while_an_acknowledgement_is_being_saved() -> None:
    store = GatedStore()
    world = ShareWorld(store=store)
    manager = world.start()
    world.append(0, "a", "b", "c")
    await world.fetch("m1", max_records=1)  # loaded; offset 0 is m1's, saved
    driver, saves = manager.drivers()[KEY], len(store.batches)
    store.gate.clear()
    store.saving.clear()
    acking = asyncio.create_task(
        driver.acknowledge("m1", [AcknowledgementBatch(0, 0, AcknowledgeType.ACCEPT)])
    )
    await store.saving.wait()  # the ack's save is in flight
    acquiring = asyncio.create_task(driver.acquire("m2", [], 1, None))
    await asyncio.sleep(0)  # one turn: the acquisition applies and queues its snapshot
    view = driver.machine.record(1)
    assert view is not None
    assert view.member_id == "m2"  # applied during the save, not after it
    assert not acking.done()
    assert not acquiring.done()  # neither answered before its snapshot is durable
    assert len(store.batches) == saves + 1
    store.gate.set()
    assert await acking == [None]
    assert [a.offset for a in (await acquiring).acquired] == [1]
    assert len(store.batches) == saves + 2  # the acquisition's own save, after the ack's


async def test_a_failed_save_fails_every_waiter_and_the_next_request_sees_the_durable_state() -> (
    None
):
    store = GatedStore()
    world = ShareWorld(store=store)
    manager = world.start()
    world.append(0, "a", "b", "c")
    await world.fetch("m0", max_records=1)  # offset 0 is m0's, saved
    driver, saves = manager.drivers()[KEY], len(store.batches)
    store.gate.clear()
    store.saving.clear()
    first = asyncio.create_task(driver.acquire("m1", [], 1, None))  # offset 1
    await store.saving.wait()
    second = asyncio.create_task(driver.acquire("m2", [], 1, None))  # offset 2, queued
    await asyncio.sleep(0)
    store.fail_next = NotEnoughReplicasError("the state topic lost its quorum")
    store.gate.set()
    for waiter in (first, second):
        with pytest.raises(NotEnoughReplicasError):
            await waiter
    assert driver.closed
    assert len(store.batches) == saves + 1  # the queued snapshot stood on the failed one
    (answer,) = (await world.fetch("m3")).partitions
    assert manager.drivers()[KEY] is not driver  # reloaded from the store
    assert acquired_offsets(answer) == [(1, 1), (2, 1)]  # neither acquisition was durable
    assert (await world.ack("m0", (0, 0, ks.AckType.ACCEPT))).error is None


async def test_an_acquisition_that_hands_out_nothing_saves_nothing_and_a_crash_loses_nothing() -> (
    None
):
    world = ShareWorld()
    due = world.clock.time_ms() + 500
    delays = ListedDelays((0, due), (1, due))
    manager = world.start()
    manager.delay_source = lambda _topic, _partition: delays
    world.logs[0].values("later", headers=(delay_header(due),))
    await world.fetch("m1")  # loaded and saved; offset 0 waits for its time
    driver, saves = manager.drivers()[KEY], manager.saves
    world.logs[0].values("later too", headers=(delay_header(due),))
    (answer,) = (await world.fetch("m1")).partitions
    assert acquired_offsets(answer) == []
    assert driver.machine.scan_offset == 2  # offset 1 was read and admitted, held back
    assert manager.saves == saves  # ... and nothing was saved for it
    await manager.close()  # the leader crashes: the store's scan offset is the older one
    successor = ShareWorld(
        store=world.store,
        clock=world.clock,
        logs=world.logs,
        snapshot=cluster(leader_epoch=1, group=group_record(), revision=5),
    )
    successor.start().delay_source = lambda _topic, _partition: delays
    world.clock.advance(0.5)
    (answer,) = (await successor.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(0, 1), (1, 1)]  # read again, delivered at their time


async def test_an_acquisition_that_carried_acknowledgements_saves_even_with_nothing_to_hand_out(
    world: ShareWorld,
) -> None:
    world.append(0, "a")
    (answer,) = (await world.fetch("m1")).partitions
    assert acquired_offsets(answer) == [(0, 1)]
    manager = world.manager
    assert manager is not None
    driver, saves = manager.drivers()[KEY], manager.saves
    accept = [AcknowledgementBatch(0, 0, AcknowledgeType.ACCEPT)]
    got = await driver.acquire("m1", accept, 10, None)
    assert got.acquired == []
    assert list(got.ack_results) == [None]
    assert manager.saves == saves + 1  # the acknowledgement is durable before the answer


async def test_a_save_that_completes_after_a_close_is_not_confirmed() -> None:
    """Leadership moved while an ack's save was in flight: the next leader may have loaded
    the state before it landed, so the ack is not answered as applied."""
    store = GatedStore()
    world = ShareWorld(store=store)
    manager = world.start()
    world.append(0, "a")
    await world.fetch("m1", max_records=1)
    driver = manager.drivers()[KEY]
    store.gate.clear()
    store.saving.clear()
    acking = asyncio.create_task(
        driver.acknowledge("m1", [AcknowledgementBatch(0, 0, AcknowledgeType.ACCEPT)])
    )
    await store.saving.wait()
    driver.close()
    store.gate.set()
    with pytest.raises(NotLeaderOrFollowerError):
        await acking
