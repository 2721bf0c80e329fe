"""A broker named leader in a state whose ISR entry records another data folder than its own
does not lead (empty-disk restarts, issue 21 item 2): leading its empty log would make the
followers truncate to it. It answers NOT_LEADER_OR_FOLLOWER until another leader is elected,
and leads again once its entry names its folder (it rejoined the ISR after catching up)."""

from __future__ import annotations

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import NotLeaderOrFollowerError
from yak.metadata.models import PartitionState
from yak.types import TopicPartition

TP = TopicPartition("e", 0)


async def put_state(broker: BrokerHarness, dirs: dict[int, str], epoch: int) -> None:
    state = PartitionState(
        topic="e",
        partition=0,
        leader=0,
        leader_epoch=epoch,
        partition_epoch=epoch,
        replicas=(0, 1),
        isr=(0, 1),
        isr_log_dirs=dirs,
    )
    revision = await broker.store.put(broker.keyspace.partition("e", 0), state.encode())
    await broker.sync(revision)


async def test_a_lost_log_is_not_led_and_its_own_is(broker: BrokerHarness) -> None:
    mine = broker.broker.log_dir_id
    assert len(mine) == 16  # from meta.properties
    assert broker.broker.replicas.fetchers.log_dir_id == mine
    await broker.create_topic("e", 1, replicas=(0, 1))
    await put_state(broker, {0: "lost-folder", 1: "f1"}, 1)
    replica = broker.broker.replicas.replicas[TP]
    assert (replica.leader, replica.follower) == (None, None)
    with pytest.raises(NotLeaderOrFollowerError, match="lost its log"):
        broker.broker.replicas.leader(TP)
    await put_state(broker, {0: mine, 1: "f1"}, 2)
    assert replica.leader is not None
    assert replica.leader.log_dir_id == mine
    await put_state(broker, {}, 3)  # no entries (an older writer): led as before
    assert replica.leader is not None
    assert replica.leader.leader_epoch == 3
