"""The share manager's group lifecycle: a group created again under its name starts fresh
(its incarnation is in every key), and a group deleted has every state key of the partitions
led here tombstoned, held in memory or not; an alter keeps the state."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.broker.share.share_support import (
    GROUP,
    TOPIC,
    GatedStore,
    ShareWorld,
    acquired_offsets,
    cluster,
    group_record,
)
from yak.errors import GroupIdNotFoundError
from yak.metadata.keyspace import KeyKind, ParsedKey
from yak.protocol import kafka_share as ks
from yak.types import TopicPartition
from yak_broker.share.share_manager import ShareManager
from yak_broker.share.state_store import SharePartitionKey

GROUP_EVENT = ParsedKey(KeyKind.SHARE_GROUP, group=GROUP)


@pytest.fixture
def world() -> ShareWorld:
    w = ShareWorld()
    w.start()
    return w


def manager_of(world: ShareWorld) -> ShareManager:
    assert world.manager is not None
    return world.manager


async def change_group(world: ShareWorld, revision: int, **changes: object) -> None:
    """Apply a share-group event (``gone=True``: the record removed) and let the sweep end."""
    gone = changes.pop("gone", False)
    record = None if gone else group_record(**changes)
    world.snapshot = cluster(group=record, revision=revision)
    manager = manager_of(world)
    manager.on_metadata_change(GROUP_EVENT)
    await manager.sweeper.idle()


async def test_a_group_created_again_loads_nothing_of_its_predecessor(world: ShareWorld) -> None:
    world.append(0, "a", "b", "c")
    (first,) = (await world.fetch()).partitions
    assert acquired_offsets(first) == [(0, 1), (1, 1), (2, 1)]
    await world.ack("m1", (0, 0, ks.AckType.ACCEPT))
    assert set(world.store.snapshots) == {SharePartitionKey(GROUP, TOPIC, 0, 0)}

    await change_group(world, 2, created_at_ms=5_000)  # deleted and created again

    (again,) = (await world.fetch("m2")).partitions
    assert acquired_offsets(again) == [(0, 1), (1, 1), (2, 1)]  # fresh: nothing held, count 1
    assert set(world.store.snapshots) == {SharePartitionKey(GROUP, TOPIC, 0, 5_000)}


async def test_a_key_of_an_ended_incarnation_is_group_id_not_found(world: ShareWorld) -> None:
    with pytest.raises(GroupIdNotFoundError):
        await manager_of(world).driver(SharePartitionKey(GROUP, TOPIC, 0, incarnation=99))
    assert manager_of(world).drivers() == {}


async def test_deleting_tombstones_every_key_led_here_held_or_not(world: ShareWorld) -> None:
    world.append(0, "a")
    await world.fetch()  # partition 0 held in memory
    held = SharePartitionKey(GROUP, TOPIC, 0, 0)
    not_held = SharePartitionKey(GROUP, TOPIC, 1, 0)  # written by a previous leader
    elsewhere = SharePartitionKey(GROUP, "not-led-here", 0, 0)
    other_group = SharePartitionKey("other", TOPIC, 0, 0)
    await world.store.save({not_held: b"state", elsewhere: b"state", other_group: b"state"})
    assert held in world.store.snapshots

    await change_group(world, 2, deleting=True)

    assert manager_of(world).drivers() == {}
    assert set(world.store.snapshots) == {elsewhere, other_group}
    assert manager_of(world).sweeper.tombstones == 2
    (answer,) = (await world.fetch()).partitions
    assert answer.error is not None
    assert answer.error.code == "GROUP_ID_NOT_FOUND"
    assert held not in world.store.snapshots  # the refused request wrote nothing

    await change_group(world, 3, gone=True)  # the key removed: swept again, nothing left
    assert manager_of(world).sweeper.tombstones == 2


async def test_an_alter_keeps_the_state_and_a_group_seen_first_is_not_swept(
    world: ShareWorld,
) -> None:
    world.append(0, "a", "b")
    await world.fetch(max_records=1)
    before = dict(world.store.snapshots)
    await change_group(world, 2, max_delivery_attempts=5)
    assert world.store.snapshots == before
    assert manager_of(world).sweeper.tombstones == 0
    (answer,) = (await world.fetch("m2")).partitions
    assert acquired_offsets(answer) == [(1, 1)]  # the restored window: offset 0 still held


async def test_a_new_incarnation_seen_without_the_deletion_sweeps_the_old(
    world: ShareWorld,
) -> None:
    world.append(0, "a")
    await world.fetch()
    old = SharePartitionKey(GROUP, TOPIC, 0, 0)
    assert old in world.store.snapshots
    await change_group(world, 2, created_at_ms=7)  # a put of another incarnation only
    assert old not in world.store.snapshots
    assert manager_of(world).sweeper.tombstones == 1


async def test_a_new_leader_loads_the_state_once_the_previous_one_follows_it() -> None:
    """The previous leader may still answer until it follows the new one: an ack it confirmed
    meanwhile is in the state the new leader loads, not lost under a load that came first."""
    old = ShareWorld()
    old.start()
    old.append(0, "a", "b")
    await old.fetch("m1", max_records=1)  # offset 0 is m1's, saved
    asked: list[tuple[TopicPartition, int]] = []
    waiting, followed = asyncio.Event(), asyncio.Event()

    async def handover(tp: TopicPartition, epoch: int) -> None:
        asked.append((tp, epoch))
        waiting.set()
        await followed.wait()

    new = ShareWorld(
        store=old.store,
        clock=old.clock,
        logs=old.logs,
        snapshot=cluster(leader_epoch=1, group=group_record(), revision=5),
        handover=handover,
    )
    manager = new.start()
    polling = asyncio.create_task(new.fetch("m2", max_records=1))
    await waiting.wait()
    assert asked == [(TopicPartition(TOPIC, 0), 1)]
    assert (await old.ack("m1", (0, 0, ks.AckType.ACCEPT))).error is None  # not yet fenced
    followed.set()
    (answer,) = (await polling).partitions
    assert acquired_offsets(answer) == [(1, 1)]
    assert manager.drivers()[SharePartitionKey(GROUP, TOPIC, 0, 0)].machine.start_offset == 1


PARTITION_EVENT = ParsedKey(KeyKind.PARTITION, topic=TOPIC, partition=0)


async def test_a_leadership_lost_during_the_handover_wait_serves_nothing() -> None:
    """The metadata event that ends a leadership closes the drivers it finds; one still
    loading is not among them. Loaded after the leadership moved, it must not serve (nor save
    a snapshot) beside the next leader: the request answers NOT_LEADER_OR_FOLLOWER."""
    waiting, followed = asyncio.Event(), asyncio.Event()

    async def handover(tp: TopicPartition, epoch: int) -> None:
        waiting.set()
        await followed.wait()

    world = ShareWorld(handover=handover)
    manager = world.start()
    world.append(0, "a", "b")
    polling = asyncio.create_task(world.fetch("m1", max_records=1))
    await waiting.wait()
    world.snapshot = cluster(leader=1, leader_epoch=1, group=group_record(), revision=2)
    manager.on_metadata_change(PARTITION_EVENT)
    followed.set()
    (answer,) = (await polling).partitions
    assert answer.error is not None
    assert answer.error.code == "NOT_LEADER_OR_FOLLOWER"
    assert acquired_offsets(answer) == []
    assert manager.drivers() == {}
    assert world.store.snapshots == {}  # no starting point saved for a leadership gone


async def test_a_leadership_lost_during_the_first_save_closes_the_driver() -> None:
    """A new share-partition saves its starting point before it serves; a leadership that
    ends during that save closes the driver (it is registered by then) and the request
    answers NOT_LEADER_OR_FOLLOWER, even though the save lands."""
    store = GatedStore()
    store.gate.clear()
    world = ShareWorld(store=store)
    manager = world.start()
    world.append(0, "a")
    polling = asyncio.create_task(world.fetch("m1", max_records=1))
    await store.saving.wait()
    world.snapshot = cluster(leader=1, leader_epoch=1, group=group_record(), revision=2)
    manager.on_metadata_change(PARTITION_EVENT)
    store.gate.set()
    (answer,) = (await polling).partitions
    assert answer.error is not None
    assert answer.error.code == "NOT_LEADER_OR_FOLLOWER"
    assert acquired_offsets(answer) == []
    assert manager.drivers() == {}


async def test_a_load_that_outlived_its_epoch_is_loaded_again_for_the_new_one() -> None:
    """Leadership lost and won again (a later epoch) while a load waited: the request is
    served by a driver of the new epoch, not by the one loaded for the old."""
    waiting, followed = asyncio.Event(), asyncio.Event()
    epochs: list[int] = []

    async def handover(tp: TopicPartition, epoch: int) -> None:
        epochs.append(epoch)
        if len(epochs) == 1:
            waiting.set()
            await followed.wait()

    world = ShareWorld(handover=handover)
    manager = world.start()
    world.append(0, "a")
    polling = asyncio.create_task(world.fetch("m1", max_records=1))
    await waiting.wait()
    world.snapshot = cluster(leader_epoch=2, group=group_record(), revision=3)
    manager.on_metadata_change(PARTITION_EVENT)
    followed.set()
    (answer,) = (await polling).partitions
    assert answer.error is None
    assert acquired_offsets(answer) == [(0, 1)]  # offset 0, its first delivery
    assert epochs == [0, 2]
    (driver,) = manager.drivers().values()
    assert driver.leader_epoch == 2
