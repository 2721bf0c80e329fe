"""The group coordinator driver on a MemoryMetadataStore with a FakeClock: what it writes, its
fence, its compare-and-swap retry and its rebalance-timeout timer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import pytest

from yak.clock import FakeClock
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import (
    GroupMember,
    GroupPositions,
    GroupState,
    PartitionState,
    TopicRecord,
)
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import Compare, Op, TxnResult
from yak_coordinator.decisions.group_reconcile import partition_counts, partition_set
from yak_coordinator.election import Term
from yak_coordinator.groups import group_coordinator
from yak_coordinator.groups.group_coordinator import GroupCoordinator

KS = Keyspace("groups")
TIMEOUT_MS = 30_000


class RacingStore(MemoryMetadataStore):
    """Runs ``race`` (a concurrent writer) just before the next state transaction."""

    race: Callable[[], object] | None = None

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult:
        if self.race is not None and any(c.key == KS.group_state("g").encode() for c in compares):
            race, self.race = self.race, None
            await race()  # type: ignore[misc]
        return await super().txn(compares, on_success, on_failure)


@dataclass
class Env:
    store: RacingStore
    clock: FakeClock
    term: Term
    cache: MetadataCache

    async def topic(self, name: str, partitions: int) -> None:
        record = TopicRecord(
            name=name, topic_id=name, partitions=partitions, replication_factor=1, created_at_ms=1
        )
        await self.store.put(KS.topic(name), record.encode())

    async def member(self, member_id: str, *topics: str, **fields: object) -> None:
        record = GroupMember(
            member_id=member_id,
            subscription=topics,
            joined_at_ms=1,
            rebalance_timeout_ms=TIMEOUT_MS,
            **fields,  # type: ignore[arg-type]
        )
        await self.store.put(KS.group_member("g", member_id), record.encode())

    async def ack(self, member_id: str, state: GroupState) -> None:
        kv = await self.store.get(KS.group_member("g", member_id))
        assert kv is not None
        record = GroupMember.decode(kv.value).model_copy(
            update={
                "owned": state.current_assignment[member_id],
                "member_epoch": state.member_epochs[member_id],
            }
        )
        await self.store.put(KS.group_member("g", member_id), record.encode())

    async def state_where(self, predicate: Callable[[GroupState], bool]) -> GroupState:
        """The group's state once ``predicate`` holds (read, then watch: no polling)."""
        key = KS.group_state("g")
        async with asyncio.timeout(5):
            read = await self.store.range_prefix(key)
            if read.kvs and predicate(state := GroupState.decode(read.kvs[0].value)):
                return state
            async with self.store.watch_prefix(key, read.revision + 1) as watch:
                async for event in watch:
                    if event.value and predicate(state := GroupState.decode(event.value)):
                        return state
        raise AssertionError("the watch ended")


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    clock = FakeClock()
    store = RacingStore(clock)
    revision = await store.put(KS.controller, b"{}")
    term = Term(epoch=revision, lease_id=0, fence=Compare.create_revision(KS.controller, revision))
    cache = MetadataCache(store, KS, clock=clock)
    await cache.start()
    environment = Env(store, clock, term, cache)
    await environment.topic("t", 2)
    await cache.wait_for_revision(store.revision)
    task = asyncio.get_running_loop().create_task(
        GroupCoordinator(store, KS, cache, clock=clock).run(term)
    )
    try:
        yield environment
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await cache.stop()
        await store.aclose()


async def test_members_get_the_partitions_and_a_late_topic_change_is_seen(env: Env) -> None:
    await env.member("a", "t")
    state = await env.state_where(lambda s: "a" in s.target_assignment)
    assert partition_set(state.current_assignment["a"]) == {("t", 0), ("t", 1)}
    await env.topic("t", 3)
    state = await env.state_where(lambda s: s.topic_partitions == {"t": 3})
    assert len(partition_set(state.target_assignment["a"])) == 3
    assert state.group_epoch == 2


async def test_partition_state_changes_cost_the_groups_nothing(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    await env.member("a", "t")
    await env.state_where(lambda s: "a" in s.target_assignment)
    counted: list[int] = []

    def counting(snapshot: ClusterSnapshot) -> dict[str, int]:
        counted.append(snapshot.revision)
        return partition_counts(snapshot)

    monkeypatch.setattr(group_coordinator, "partition_counts", counting)
    for leader in range(20):  # leaders and ISRs moving: nothing a group's assignment reads
        moved = PartitionState(topic="t", partition=0, leader=leader, replicas=(0,), isr=(0,))
        await env.store.put(KS.partition("t", 0), moved.encode())
    await env.cache.wait_for_revision(env.store.revision)
    for _ in range(10):
        await asyncio.sleep(0)  # let the follower run, were it woken
    assert counted == []
    await env.topic("t", 3)
    await env.state_where(lambda s: s.topic_partitions == {"t": 3})
    assert len(counted) == 1


async def test_member_that_does_not_release_is_fenced_at_its_deadline(env: Env) -> None:
    await env.member("a", "t")
    state = await env.state_where(lambda s: "a" in s.current_assignment)
    await env.ack("a", state)
    await env.store.put(
        KS.group_positions("g", "a"), GroupPositions(member_id="a", member_epoch=1).encode()
    )
    await env.member("b", "t")
    state = await env.state_where(lambda s: "a" in s.revoking_since_ms)
    assert state.current_assignment["b"] == ()
    env.clock.advance(TIMEOUT_MS / 1000)
    state = await env.state_where(lambda s: "a" not in s.target_assignment)
    assert partition_set(state.current_assignment["b"]) == {("t", 0), ("t", 1)}
    assert await env.store.get(KS.group_member("g", "a")) is None
    assert await env.store.get(KS.group_positions("g", "a")) is None
    assert await env.store.get(KS.group_member("g", "b")) is not None


async def test_a_member_change_racing_the_write_is_recomputed(env: Env) -> None:
    async def race() -> None:  # a changes its record between the read and the write
        await env.member("a", "t", assignor="range")

    env.store.race = race
    await env.member("a", "t")
    state = await env.state_where(lambda s: "a" in s.target_assignment)
    assert state.assignor == "range", "the write computed from the old record failed"
    assert state.group_epoch == 1


async def test_a_deposed_controller_writes_nothing_and_ends_its_term(env: Env) -> None:
    await env.store.delete(KS.controller)
    await env.store.put(KS.controller, b"{}")  # another election: a new create revision
    await env.member("a", "t")
    async with asyncio.timeout(5):
        await env.term.wait_ended()
    assert await env.store.get(KS.group_state("g")) is None
