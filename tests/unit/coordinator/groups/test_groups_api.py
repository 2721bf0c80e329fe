"""``GET /admin/v1/groups[/{g}]`` in-process (MemoryMetadataStore, typed AdminClient), and the
state a reader reports."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest

from yak.clients.admin import AdminClient
from yak.errors import GroupIdNotFoundError, InvalidGroupIdError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import (
    BrokerRegistration,
    CommittedOffset,
    GroupMember,
    GroupState,
    GroupStateName,
    TopicPartitions,
)
from yak_coordinator.app import create_app
from yak_coordinator.decisions.group_reconcile import reconcile_group
from yak_coordinator.groups.group_admin import reported_state
from yak_coordinator.service import Coordinator
from yak_coordinator.settings import CoordinatorSettings

KS = Keyspace("unit")


@dataclass
class Harness:
    store: MemoryMetadataStore
    admin: AdminClient

    async def member(self, group: str, member_id: str, **fields: object) -> None:
        record = GroupMember(member_id=member_id, joined_at_ms=1, **fields)  # type: ignore[arg-type]
        await self.store.put(KS.group_member(group, member_id), record.encode())

    async def state_where(self, group: str, predicate: Callable[[GroupState], bool]) -> None:
        key = KS.group_state(group)
        async with asyncio.timeout(5):
            read = await self.store.range_prefix(key)
            if read.kvs and predicate(GroupState.decode(read.kvs[0].value)):
                return
            async with self.store.watch_prefix(key, read.revision + 1) as watch:
                async for event in watch:
                    if event.value and predicate(GroupState.decode(event.value)):
                        return


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    store = MemoryMetadataStore()
    app = create_app(CoordinatorSettings(cluster_id="unit", node_id="c0"), store=store)
    coordinator: Coordinator = app.state.coordinator
    transport = httpx.ASGITransport(app=app)
    try:
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(coordinator.wait_controller(), 5)
            async with AdminClient("http://test", transport=transport) as admin:
                broker = BrokerRegistration(broker_id=1, host="h", port=9001, started_at_ms=1)
                await store.put(KS.broker(1), broker.encode())
                await coordinator.cache.wait_for(lambda s: len(s.brokers) == 1, 5)
                await admin.create_topic("t", partitions=2)
                yield Harness(store, admin)
    finally:
        await store.aclose()


async def test_list_and_describe_groups(harness: Harness) -> None:
    assert (await harness.admin.list_groups()).groups == []
    with pytest.raises(GroupIdNotFoundError):
        await harness.admin.describe_group("g")
    with pytest.raises(InvalidGroupIdError):
        await harness.admin.describe_group("bad id!")

    await harness.member("g", "a", subscription=("t",), client_id="app")
    await harness.state_where("g", lambda s: "a" in s.current_assignment)
    described = await harness.admin.describe_group("g")
    assert (described.state, described.group_epoch, described.assignor) == (
        "CompletingRebalance",
        1,
        "uniform",
    )
    (member,) = described.members
    assert (member.member_id, member.client_id, member.subscription) == ("a", "app", ["t"])
    assert [(p.topic, p.partitions) for p in member.target] == [("t", [0, 1])]
    assert member.current == member.target
    assert (member.owned, member.member_epoch, member.acknowledged_epoch) == ([], 1, 0)

    await harness.member(
        "g",
        "a",
        subscription=("t",),
        owned=(TopicPartitions(topic="t", partitions=(0, 1)),),
        member_epoch=1,
    )
    await harness.state_where("g", lambda s: s.state is GroupStateName.STABLE)
    await harness.store.put(
        KS.committed_offset("h", "t", 0), CommittedOffset(offset=5, commit_time_ms=1).encode()
    )
    listed = await harness.admin.list_groups()
    assert [(g.group_id, g.state, g.member_count) for g in listed.groups] == [
        ("g", "Stable", 1),
        ("h", "Empty", 0),
    ]
    only_offsets = await harness.admin.describe_group("h")
    assert (only_offsets.state, only_offsets.members) == ("Empty", [])


def test_reported_state() -> None:
    a = GroupMember(member_id="a", subscription=("t",), joined_at_ms=1)
    b = GroupMember(member_id="b", subscription=("t",), joined_at_ms=1)
    counts = {"t": 2}
    state = reconcile_group("g", {"a": a}, None, counts, 0).state
    assert state is not None
    assert reported_state(state, {"a": a}, counts) is GroupStateName.COMPLETING_REBALANCE
    assert reported_state(state, {"a": a, "b": b}, counts) is GroupStateName.PREPARING_REBALANCE
    assert reported_state(state, {"a": a}, {"t": 3}) is GroupStateName.PREPARING_REBALANCE
    assert reported_state(state, {}, counts) is GroupStateName.EMPTY
    assert reported_state(None, {"a": a}, counts) is GroupStateName.PREPARING_REBALANCE
    manual = a.model_copy(
        update={"subscription": (), "manual_assignment": state.target_assignment["a"]}
    )
    assert reported_state(None, {"a": manual}, counts) is GroupStateName.EMPTY
