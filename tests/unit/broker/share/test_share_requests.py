"""ShareFetch and ShareAcknowledge served by the share manager on fakes: acquire, accept,
release, reject, renew end to end; per-partition and request errors; long polls woken by an
append; filters; group-committed saves."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.unit.broker.share.share_support import (
    GROUP,
    LOCK_MS,
    TOPIC,
    ShareWorld,
    acquired_offsets,
    cluster,
    group_record,
    records_of,
)
from yak.errors import InvalidFilterError
from yak.protocol import kafka_share as ks
from yak_broker.share.share_requests import acknowledgement_batches, acquired_ranges
from yak_broker.share.state.records import AcknowledgementBatch, AcknowledgeType, AcquiredRecord
from yak_broker.share.state_store import SharePartitionKey

KEY = SharePartitionKey(GROUP, TOPIC, 0)


@pytest.fixture
def world() -> ShareWorld:
    w = ShareWorld()
    w.start()
    return w


async def test_acquire_then_accept_moves_the_start_offset(world: ShareWorld) -> None:
    world.append(0, "a", "b", "c")
    response = await world.fetch()
    (answer,) = response.partitions
    assert answer.error is None
    assert response.lock_timeout_ms == LOCK_MS
    assert acquired_offsets(answer) == [(0, 1), (1, 1), (2, 1)]
    assert [r.value for r in records_of(answer)] == [b"a", b"b", b"c"]
    result = await world.ack("m1", (0, 2, ks.AckType.ACCEPT))
    assert result.error is None
    assert world.manager is not None
    machine = world.manager.drivers()[KEY].machine
    assert machine.start_offset == 3
    assert machine.in_flight == 0


async def test_released_records_go_to_the_next_member_with_a_higher_count(
    world: ShareWorld,
) -> None:
    world.append(0, "a", "b")
    await world.fetch("m1")
    assert (await world.ack("m1", (1, 1, ks.AckType.RELEASE))).error is None
    (answer,) = (await world.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(1, 2)]
    # the batch is whole (offset 0 rides along) but only offset 1 is m2's
    assert [r.offset for r in records_of(answer)] == [0, 1]


async def test_acks_inside_share_fetch_apply_before_acquiring(world: ShareWorld) -> None:
    world.append(0, "a")
    await world.fetch("m1")
    release = ks.AckBatch(0, 0, (int(ks.AckType.RELEASE),))
    (answer,) = (await world.fetch("m1", acks=[release])).partitions
    assert answer.ack_error is None
    assert acquired_offsets(answer) == [(0, 2)]


async def test_an_ack_of_records_not_held_is_invalid_record_state_and_changes_nothing(
    world: ShareWorld,
) -> None:
    world.append(0, "a", "b")
    await world.fetch("m1")
    result = await world.ack("m2", (0, 1, ks.AckType.ACCEPT))
    assert result.error is not None
    assert result.error.code == "INVALID_RECORD_STATE"
    assert result.error.details.get("offset") == 0
    assert (await world.ack("m1", (0, 1, ks.AckType.ACCEPT))).error is None


async def test_many_batches_of_one_partition_each_apply_or_are_listed_refused(
    world: ShareWorld,
) -> None:
    world.append(0, "a", "b", "c", "d", "e")
    await world.fetch("m1")
    result = await world.ack(
        "m1",
        (0, 0, ks.AckType.ACCEPT),
        (9, 9, ks.AckType.ACCEPT),  # never in the log: refused
        (2, 2, ks.AckType.ACCEPT),
        (0, 0, ks.AckType.ACCEPT),  # accepted by the first batch: no longer held
        (4, 4, ks.AckType.RELEASE),
    )
    assert result.error is not None
    assert result.error.code == "INVALID_RECORD_STATE"
    assert result.refused == (1, 3)
    # 0, 2 accepted and 4 released: the next member gets 4 (and 1, 3, still m1's, stay held)
    (answer,) = (await world.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(4, 2)]
    assert (
        await world.ack("m1", (1, 1, ks.AckType.ACCEPT), (3, 3, ks.AckType.ACCEPT))
    ).refused == ()


async def test_refused_batches_riding_a_fetch_are_listed(world: ShareWorld) -> None:
    world.append(0, "a", "b")
    await world.fetch("m1", max_records=1)
    batches = [ks.AckBatch(o, o, (int(ks.AckType.ACCEPT),)) for o in (7, 0, 8)]
    (answer,) = (await world.fetch("m1", acks=batches)).partitions
    assert answer.ack_error is not None
    assert answer.ack_refused == (0, 2)
    assert acquired_offsets(answer) == [(1, 1)]


async def test_a_piggybacked_refused_ack_is_the_partitions_ack_error(world: ShareWorld) -> None:
    world.append(0, "a")
    wrong = ks.AckBatch(5, 6, (int(ks.AckType.ACCEPT),))
    (answer,) = (await world.fetch("m1", acks=[wrong])).partitions
    assert answer.ack_error is not None
    assert answer.ack_error.code == "INVALID_RECORD_STATE"
    assert acquired_offsets(answer) == [(0, 1)]


async def test_renew_keeps_the_lock_past_its_first_deadline(world: ShareWorld) -> None:
    world.append(0, "a")
    await world.fetch("m1")
    world.clock.advance(0.8)
    assert (await world.ack("m1", (0, 0, ks.AckType.RENEW))).error is None
    world.clock.advance(0.8)  # past the first deadline, inside the renewed one
    assert (await world.ack("m1", (0, 0, ks.AckType.ACCEPT))).error is None


async def test_an_ack_after_the_lock_expired_is_refused(world: ShareWorld) -> None:
    world.append(0, "a")
    await world.fetch("m1")
    world.clock.advance(LOCK_MS / 1000)
    result = await world.ack("m1", (0, 0, ks.AckType.ACCEPT))
    assert result.error is not None
    assert result.error.code == "INVALID_RECORD_STATE"


async def test_long_poll_is_woken_by_an_append(world: ShareWorld) -> None:
    poll = asyncio.create_task(world.fetch(max_wait_ms=20_000))
    await world.waiters.until_parked()  # the poll found nothing and waits
    assert not poll.done()
    world.append(0, "late")
    (answer,) = (await asyncio.wait_for(poll, 5)).partitions
    assert acquired_offsets(answer) == [(0, 1)]


async def test_nothing_to_acquire_answers_empty_after_max_wait(world: ShareWorld) -> None:
    (answer,) = (await world.fetch(max_wait_ms=10)).partitions
    assert answer.error is None
    assert answer.acquired == ()
    assert not bytes(answer.records)


async def test_a_filter_acquires_matching_records_and_accepts_the_others(
    world: ShareWorld,
) -> None:
    logs = world.logs[0]
    logs.values('{"kind": "a"}', '{"kind": "b"}', '{"kind": "a"}')
    (answer,) = (await world.fetch(filter='value.kind == "a"')).partitions
    assert acquired_offsets(answer) == [(0, 1), (2, 1)]
    result = await world.ack("m1", (0, 0, ks.AckType.ACCEPT), (2, 2, ks.AckType.ACCEPT))
    assert result.error is None
    assert world.manager is not None
    machine = world.manager.drivers()[KEY].machine
    assert machine.start_offset == 3
    assert machine.in_flight == 0


async def test_a_filter_accepts_a_released_record_it_rejects(world: ShareWorld) -> None:
    world.logs[0].values('{"kind": "b"}')
    await world.fetch("m1")
    await world.ack("m1", (0, 0, ks.AckType.RELEASE))
    (answer,) = (await world.fetch("m2", filter='value.kind == "a"')).partitions
    assert answer.acquired == ()
    assert world.manager is not None
    assert world.manager.drivers()[KEY].machine.start_offset == 1


async def test_a_bad_filter_fails_the_request_before_anything_applies(world: ShareWorld) -> None:
    world.append(0, "a")
    with pytest.raises(InvalidFilterError):
        await world.fetch(filter="value.kind ==")
    assert world.manager is not None
    assert world.manager.drivers() == {}


async def test_unknown_topic_id_and_unknown_group_are_partition_errors(world: ShareWorld) -> None:
    (answer,) = (await world.fetch(topic_id=uuid.uuid4())).partitions
    assert answer.error is not None
    assert answer.error.code == "UNKNOWN_TOPIC_OR_PARTITION"
    (answer,) = (await world.fetch(group="nobody")).partitions
    assert answer.error is not None
    assert answer.error.code == "GROUP_ID_NOT_FOUND"
    world.snapshot = cluster(group=group_record(deleting=True), revision=2)
    (answer,) = (await world.fetch()).partitions
    assert answer.error is not None
    assert answer.error.code == "GROUP_ID_NOT_FOUND"


async def test_a_partition_led_elsewhere_names_its_leader(world: ShareWorld) -> None:
    world.snapshot = cluster(leader=2, leader_epoch=7, group=group_record(), revision=2)
    (answer,) = (await world.fetch()).partitions
    assert answer.error is not None
    assert answer.error.code == "NOT_LEADER_OR_FOLLOWER"
    assert (answer.leader_id, answer.leader_epoch) == (2, 7)


async def test_two_partitions_in_one_request_share_one_save(world: ShareWorld) -> None:
    world.append(0, "a")
    world.append(1, "b")
    await world.fetch(partitions=(0, 1))  # loads both: their starting points saved
    saves = world.store.saves
    await world.ack("m1", (0, 0, ks.AckType.RELEASE))
    await world.ack("m1", (0, 0, ks.AckType.RELEASE), partition=1)
    saves = world.store.saves - saves
    assert saves == 2  # one per request: nothing to share
    before = world.store.saves
    response = await world.fetch(partitions=(0, 1))
    assert [acquired_offsets(p) for p in response.partitions] == [[(0, 2)], [(0, 2)]]
    assert world.store.saves - before == 1


def test_acknowledgement_batches_split_per_offset_types_and_drop_gaps() -> None:
    batch = ks.AckBatch(10, 14, (1, 1, 0, 2, 2))
    assert acknowledgement_batches([batch, ks.AckBatch(20, 21, (3,))]) == [
        AcknowledgementBatch(10, 11, AcknowledgeType.ACCEPT),
        AcknowledgementBatch(13, 14, AcknowledgeType.RELEASE),
        AcknowledgementBatch(20, 21, AcknowledgeType.REJECT),
    ]


def test_acquired_ranges_merge_consecutive_offsets_of_one_count() -> None:
    acquired = [AcquiredRecord(o, c) for o, c in ((3, 1), (4, 1), (5, 2), (7, 2), (8, 2))]
    assert acquired_ranges(acquired) == (
        ks.AcquiredRecords(3, 4, 1),
        ks.AcquiredRecords(5, 5, 2),
        ks.AcquiredRecords(7, 8, 2),
    )
