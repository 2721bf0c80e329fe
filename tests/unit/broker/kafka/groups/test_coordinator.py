"""The classic groups' driver on fakes (a FakeClock, the in-memory metadata store): rounds
answered from the machine's outbox, the timer at the machine's deadlines, the marker written
once per group life (no write per heartbeat), offsets in the REST groups' keys under the
marker, one kind per group, groups unloaded when the hash moves them or the broker stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

from yak.clock import FakeClock
from yak.metadata.classic_groups import ClassicGroupStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration, ClassicGroupMarker, CommittedOffset
from yak.metadata.store import PutOp
from yak.protocol.kafka_errors import GroupErrorCode
from yak.types import TopicPartition
from yak_broker.kafka.groups.coordinator import GroupCoordinator, OffsetToCommit
from yak_broker.kafka.groups.rendezvous import coordinator_of
from yak_broker.kafka.groups.state.records import (
    GroupSettings,
    GroupStateName,
    Heartbeat,
    JoinGroup,
    LeaveMember,
    Protocol,
    SyncGroup,
)
from yak_broker.settings import BrokerSettings

if TYPE_CHECKING:
    from yak_broker.server.broker import Broker

E = GroupErrorCode
KS = Keyspace("test")
ME, OTHER = 1, 2
T = TypeVar("T")


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, host="h", port=1000 + broker_id, started_at_ms=0, kafka_port=9000
    )


def group_won_by(broker_id: int, among: dict[int, BrokerRegistration], tag: str = "g") -> str:
    return next(g for i in range(1000) if coordinator_of(g := f"{tag}{i}", among) == broker_id)


@dataclass
class World:
    clock: FakeClock
    store: MemoryMetadataStore
    brokers: dict[int, BrokerRegistration]
    groups: GroupCoordinator
    lease: int
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    def start(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self.tasks.append(task)
        return task

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        for _ in range(10):
            self.clock.advance(seconds / 10)
            await self.settle()

    async def marker(self, group: str) -> ClassicGroupMarker | None:
        kv = await self.store.get(KS.group_classic(group))
        return None if kv is None else ClassicGroupMarker.decode(kv.value)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    lease = await store.grant_lease(3600)
    await store.put(KS.broker(ME), registration(ME).encode(), lease=lease)
    brokers = {ME: registration(ME)}
    settings = GroupSettings(initial_rebalance_delay_ms=0)
    groups = GroupCoordinator(ME, lambda: brokers, lambda: store, KS, clock, settings)
    w = World(clock, store, brokers, groups, lease)
    yield w
    await groups.close()
    for task in w.tasks:
        task.cancel()
    await asyncio.gather(*w.tasks, return_exceptions=True)


def join(member_id: str = "", client: str = "c", session_ms: int = 10_000) -> JoinGroup:
    return JoinGroup(
        0,
        member_id,
        "consumer",
        (Protocol("range", b"sub"),),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=30_000,
        client_id=client,
    )


async def new_member(w: World, group: str, client: str = "c") -> str:
    """A v4+ newcomer: MEMBER_ID_REQUIRED first, then the id it was given."""
    first = await w.groups.join(group, join(client=client))
    assert first.error is E.MEMBER_ID_REQUIRED
    return first.member_id


async def test_a_round_of_two_members_and_the_marker_written_once(world: World) -> None:
    w = world
    group = "orders"
    a_id = await new_member(w, group, "a")
    assert await w.marker(group) is None  # reserving an id writes nothing
    a = w.start(w.groups.join(group, join(a_id)))
    await w.settle()
    assert a.done()  # the only member: the round completes at once
    marker_kv = await w.store.get(KS.group_classic(group))
    assert marker_kv is not None
    assert marker_kv.lease == w.lease
    assert a.result().generation_id == 1
    b_id = await new_member(w, group, "b")
    b = w.start(w.groups.join(group, join(b_id)))
    await w.settle()
    assert not b.done()  # a new member: a's next heartbeat says rebalance
    assert w.groups.heartbeat(group, Heartbeat(a_id, 1)) is E.REBALANCE_IN_PROGRESS
    a2 = w.start(w.groups.join(group, join(a_id)))
    await w.settle()
    leader, follower = a2.result(), b.result()
    assert (leader.error, follower.error, leader.generation_id) == (E.NONE, E.NONE, 2)
    assert {m.member_id for m in leader.members} == {a_id, b_id}
    assert follower.members == ()
    f_sync = w.start(w.groups.sync(group, SyncGroup(0, b_id, 2)))
    await w.settle()
    assert not f_sync.done()
    l_sync = await w.groups.sync(group, SyncGroup(0, a_id, 2, assignments=((b_id, b"B"),)))
    await w.settle()
    assert (l_sync.assignment, f_sync.result().assignment) == (b"", b"B")
    revision = (await w.store.range_prefix(KS.root)).revision  # the store's revision
    for _ in range(5):
        await w.advance(3)
        assert w.groups.heartbeat(group, Heartbeat(a_id, 2)) is E.NONE
        assert w.groups.heartbeat(group, Heartbeat(b_id, 2)) is E.NONE
    assert (await w.store.range_prefix(KS.root)).revision == revision  # no write at all
    assert await w.store.get(KS.group_classic(group)) == marker_kv


async def test_the_timer_expires_sessions_and_an_empty_group_drops_its_marker(
    world: World,
) -> None:
    w = world
    group = "expiring"
    member = await new_member(w, group)
    assert (await w.groups.join(group, join(member))).error is E.NONE
    assert await w.groups.sync(group, SyncGroup(0, member, 1))
    assert await w.marker(group) is not None
    await w.advance(9)
    assert w.groups.heartbeat(group, Heartbeat(member, 1)) is E.NONE
    await w.advance(9)  # renewed: still in
    assert await w.marker(group) is not None
    await w.advance(11)  # no heartbeat for a whole session
    assert w.groups.heartbeat(group, Heartbeat(member, 1)) is E.UNKNOWN_MEMBER_ID
    assert await w.marker(group) is None


async def test_commits_under_the_marker_and_what_offset_fetch_reads(world: World) -> None:
    w = world
    group = "committing"
    tp = TopicPartition("t", 0)
    assert await w.groups.commit(group, Heartbeat("x", 3), {tp: OffsetToCommit(5)}) is (
        E.ILLEGAL_GENERATION
    )
    assert await w.groups.commit(group, Heartbeat("", -1), {tp: OffsetToCommit(4)}) is E.NONE
    member = await new_member(w, group)
    await w.groups.join(group, join(member))
    await w.groups.sync(group, SyncGroup(0, member, 1))
    assert await w.groups.commit(group, Heartbeat("", -1), {tp: OffsetToCommit(1)}) is (
        E.UNKNOWN_MEMBER_ID
    )
    offsets = {tp: OffsetToCommit(7, 2, "m")}
    assert await w.groups.commit(group, Heartbeat(member, 1), offsets) is E.NONE
    error, committed = await w.groups.committed(group)
    assert error is E.NONE
    assert committed == {
        tp: CommittedOffset(
            offset=7, metadata="m", leader_epoch=2, member_epoch=1, commit_time_ms=w.clock.time_ms()
        )
    }
    # Another broker took the marker over (a watch behind): this one is deposed.
    kv = await w.store.get(KS.group_classic(group))
    assert kv is not None
    await w.store.put(KS.group_classic(group), ClassicGroupMarker(broker_id=OTHER).encode())
    assert await w.groups.commit(group, Heartbeat(member, 1), offsets) is E.NOT_COORDINATOR
    assert w.groups.heartbeat(group, Heartbeat(member, 1)) is E.UNKNOWN_MEMBER_ID


async def test_one_kind_per_group(world: World) -> None:
    w = world
    await w.store.put(KS.group_member("rest", "m-1"), b"{}")
    old_style = replace(join(), require_known_member_id=False)  # JoinGroup v0-v3
    answer = await w.groups.join("rest", old_style)
    assert answer.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert await w.marker("rest") is None
    held = "held"
    await w.store.txn(
        [], [PutOp(KS.group_classic(held), ClassicGroupMarker(broker_id=OTHER).encode())]
    )
    member = await new_member(w, held)
    assert (await w.groups.join(held, join(member))).error is E.COORDINATOR_LOAD_IN_PROGRESS


async def test_a_moved_group_is_unloaded_and_its_parked_join_answered(world: World) -> None:
    w = world
    w.brokers[OTHER] = registration(OTHER)
    group = group_won_by(ME, w.brokers)
    moving = group_won_by(OTHER, w.brokers, "m")
    del w.brokers[OTHER]
    a = await new_member(w, moving, "a")
    assert (await w.groups.join(moving, join(a))).error is E.NONE
    b = await new_member(w, moving, "b")
    parked = w.start(w.groups.join(moving, join(b)))
    await w.settle()
    assert not parked.done()
    assert await w.marker(moving) is not None
    w.brokers[OTHER] = registration(OTHER)
    assert w.groups.heartbeat(moving, Heartbeat(a, 1)) is E.NOT_COORDINATOR
    await w.settle()
    assert parked.result().error is E.NOT_COORDINATOR
    assert await w.marker(moving) is None  # the new coordinator can claim it
    assert w.groups.route(group) is None


async def test_close_answers_parked_requests_and_stops_the_timers(world: World) -> None:
    w = world
    a = await new_member(w, "g", "a")
    await w.groups.join("g", join(a))
    b = await new_member(w, "g", "b")
    parked = w.start(w.groups.join("g", join(b)))
    await w.settle()
    await w.groups.close()
    await w.settle()
    assert parked.result().error is E.NOT_COORDINATOR
    assert (await w.groups.join("g", join(a))).error is E.COORDINATOR_NOT_AVAILABLE


async def test_leave_delete_list_and_describe(world: World) -> None:
    w = world
    member = await new_member(w, "g")
    await w.groups.join("g", join(member))
    await w.groups.sync(group := "g", SyncGroup(0, member, 1))
    await w.store.put(KS.group_member("rest", "m-1"), b"{}")
    listed = {g.group_id: g.state for g in await w.groups.list_groups()}
    assert listed == {"g": GroupStateName.STABLE, "rest": GroupStateName.STABLE}
    error, description = await w.groups.describe(group)
    assert (error, description.state, len(description.members)) == (E.NONE, "Stable", 1)
    assert await w.groups.delete(group) is E.NON_EMPTY_GROUP
    left = w.groups.leave(group, [LeaveMember(member)])
    assert [m.error for m in left.members] == [E.NONE]
    await w.settle()
    assert await w.marker(group) is None
    await w.groups.commit(group, Heartbeat("", -1), {TopicPartition("t", 0): OffsetToCommit(1)})
    assert await w.groups.delete(group) is E.NONE
    assert await ClassicGroupStore(w.store, KS).committed(group) == {}
    assert await w.groups.delete(group) is E.GROUP_ID_NOT_FOUND
    assert await w.groups.delete("rest") is E.NON_EMPTY_GROUP
    assert (await w.groups.describe("none"))[1].state is GroupStateName.DEAD


async def test_a_moved_group_without_requests_is_unloaded_at_its_next_deadline(
    world: World,
) -> None:
    w = world
    first = await new_member(w, "quiet", "a")
    await w.groups.join("quiet", join(first))
    second = await new_member(w, "quiet", "b")
    parked = w.start(w.groups.join("quiet", join(second, session_ms=60_000)))
    await w.settle()
    w.brokers.clear()  # the broker stopped, or another one wins: no request comes here
    await w.advance(11)  # a's session ends: the timer asks whether the group is still here
    assert parked.result().error is E.NOT_COORDINATOR  # not the round's answer
    assert await w.marker("quiet") is None


@pytest.mark.parametrize(("delay_ms", "completes_at_once"), [(0, True), (3_000, False)])
async def test_a_brokers_coordinator_waits_its_initial_rebalance_delay(
    world: World, delay_ms: int, completes_at_once: bool
) -> None:
    """``of_broker`` takes ``group_initial_rebalance_delay_ms`` from the broker's settings:
    with 0 an empty group's only member is answered at once, with Kafka's 3 s it waits."""
    broker = SimpleNamespace(
        settings=BrokerSettings(broker_id=ME, group_initial_rebalance_delay_ms=delay_ms),
        snapshot=lambda: SimpleNamespace(brokers=world.brokers),
        metadata_store=world.store,
        keyspace=KS,
    )
    groups = GroupCoordinator.of_broker(cast("Broker", broker))
    try:
        first = await groups.join("g", join())
        joined = world.start(groups.join("g", join(first.member_id)))
        await world.settle()
        assert joined.done() is completes_at_once
    finally:
        await groups.close()
