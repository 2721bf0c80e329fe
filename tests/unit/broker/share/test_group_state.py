"""The live state of a share group on its leader (``ShareManager.live_state``,
``share.group_state``) and its wire model (``api.share_group_state``): loaded share-partitions
with their offsets, counts, delivery-count histogram and lag; led partitions nobody read yet
reported not loaded (and not loaded by asking); the counters per topic; an unknown group."""

from __future__ import annotations

import pytest

from tests.unit.broker.share.share_support import GROUP, TOPIC, ShareWorld, cluster, group_record
from yak.errors import GroupIdNotFoundError
from yak.protocol import kafka_share as ks
from yak_broker.api.share_group_state import leader_state

ACCEPT, RELEASE, REJECT = ks.AckType.ACCEPT, ks.AckType.RELEASE, ks.AckType.REJECT


@pytest.fixture
def world() -> ShareWorld:
    w = ShareWorld()
    w.start()
    return w


async def test_a_loaded_share_partition_shows_its_window_and_counters(world: ShareWorld) -> None:
    assert world.manager is not None
    world.append(0, "a", "b", "c", "d", "e")
    await world.fetch("m1", max_records=4)
    assert (await world.ack("m1", (0, 0, ACCEPT), (2, 2, ACCEPT), (3, 3, RELEASE))).error is None
    live = world.manager.live_state(GROUP)
    (part,) = live.partitions
    assert (part.topic, part.partition, part.loaded) == (TOPIC, 0, True)
    assert (part.start_offset, part.scan_offset, part.high_watermark) == (1, 5, 5)
    assert part.stats is not None
    assert (part.stats.acquired, part.stats.available, part.stats.acknowledged) == (1, 2, 1)
    assert part.stats.acquired_by_member == {"m1": 1}
    assert part.delivery_counts == {0: 1, 1: 2}  # 4 never delivered; 1 held, 3 released
    assert part.lag == 3  # offsets 1, 3, 4: not done
    (totals,) = live.topics
    assert totals.topic == TOPIC
    assert totals.acquired == 4
    assert totals.acknowledged == {"accept": 2, "release": 1, "reject": 0, "renew": 0}


async def test_the_wire_model_carries_the_figures(world: ShareWorld) -> None:
    assert world.manager is not None
    world.append(0, "a", "b")
    await world.fetch("m1")
    assert (await world.ack("m1", (0, 1, REJECT))).error is None
    answer = leader_state(7, GROUP, world.manager.live_state(GROUP, [TOPIC]))
    assert answer.broker_id == 7
    loaded, idle = answer.partitions
    assert (loaded.leader_id, loaded.loaded, loaded.acquired) == (7, True, 0)
    assert (loaded.high_watermark, loaded.lag) == (2, 0)  # rejected records are done with
    assert (idle.partition, idle.loaded, idle.start_offset, idle.lag) == (1, False, None, None)
    (counters,) = answer.topics
    assert (counters.acquired, counters.rejected, counters.accepted) == (2, 2, 0)


async def test_led_partitions_of_named_topics_are_reported_but_not_loaded(
    world: ShareWorld,
) -> None:
    assert world.manager is not None
    world.append(1, "x", "y")
    live = world.manager.live_state(GROUP, [TOPIC, "no-such-topic"])
    assert [(p.partition, p.loaded, p.high_watermark) for p in live.partitions] == [
        (0, False, 0),
        (1, False, 2),
    ]
    assert world.manager.drivers() == {}  # asking loaded nothing
    assert live.topics == []
    assert world.manager.live_state(GROUP).partitions == []


async def test_partitions_led_elsewhere_are_left_to_their_leader(world: ShareWorld) -> None:
    assert world.manager is not None
    world.snapshot = cluster(leader=2, group=group_record())
    assert world.manager.live_state(GROUP, [TOPIC]).partitions == []


async def test_an_unknown_group_is_group_id_not_found(world: ShareWorld) -> None:
    assert world.manager is not None
    with pytest.raises(GroupIdNotFoundError):
        world.manager.live_state("nobody")
