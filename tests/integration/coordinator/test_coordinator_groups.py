"""Consumer-group assignment by a real coordinator process on a real etcd.

The test plays the rest-proxy's part (``docs/consumer-groups.md``, member side): it writes
member records on their own leases straight to etcd and acknowledges assignments exactly as a
proxy's reconcile does — ``owned := current_assignment[m]`` in one transaction comparing the
member record's and the state key's ``mod_revision``. Afterwards etcd's history, replayed by a
watch, must show that no state ever granted a partition to one member while another member's
record still listed it in ``owned``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from yak.clients.admin import AdminClient
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import KeyKind, Keyspace
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.models import GroupMember, GroupState, GroupStateName
from yak.metadata.store import Compare, EventKind, PutOp, WatchEvent

pytestmark = pytest.mark.integration

GROUP = "orders-app"
ALL = {("orders", p) for p in range(4)}


def partitions(state: GroupState, member: str, *, target: bool = False) -> set[tuple[str, int]]:
    assignment = (state.target_assignment if target else state.current_assignment)[member]
    return {(tp.topic, p) for tp in assignment for p in tp.partitions}


class Proxy:
    """The member side, on the test's own etcd client."""

    def __init__(self, store: EtcdMetadataStore, keyspace: Keyspace) -> None:
        self.store = store
        self.ks = keyspace

    async def join(self, member_id: str, lease: int) -> None:
        record = GroupMember(
            member_id=member_id,
            subscription=("orders",),
            joined_at_ms=int(time.time() * 1000),
            lease_id=lease,
        )
        key = self.ks.group_member(GROUP, member_id)
        result = await self.store.txn([Compare.absent(key)], [PutOp(key, record.encode(), lease)])
        assert result.succeeded

    async def reconcile(self, member_id: str) -> int:
        """owned := current_assignment[m], guarded by both mod_revisions; the write revision."""
        member_key = self.ks.group_member(GROUP, member_id)
        state_key = self.ks.group_state(GROUP)
        while True:
            member_kv = await self.store.get(member_key)
            state_kv = await self.store.get(state_key)
            assert member_kv is not None
            assert state_kv is not None
            state = GroupState.decode(state_kv.value)
            record = GroupMember.decode(member_kv.value).model_copy(
                update={
                    "owned": state.current_assignment[member_id],
                    "member_epoch": state.member_epochs[member_id],
                }
            )
            result = await self.store.txn(
                [
                    Compare.mod_revision(member_key, member_kv.mod_revision),
                    Compare.mod_revision(state_key, state_kv.mod_revision),
                ],
                [PutOp(member_key, record.encode(), member_kv.lease)],
            )
            if result.succeeded:
                return result.revision

    async def state_where(
        self, predicate: Callable[[GroupState], bool], timeout_s: float = 10.0
    ) -> GroupState:
        """The group state once ``predicate`` holds: a read, then a watch (nothing polls)."""
        key = self.ks.group_state(GROUP)
        async with asyncio.timeout(timeout_s):
            read = await self.store.range_prefix(key)
            if read.kvs and predicate(state := GroupState.decode(read.kvs[0].value)):
                return state
            async with self.store.watch_prefix(key, read.revision + 1) as watch:
                async for event in watch:
                    if event.value and predicate(state := GroupState.decode(event.value)):
                        return state
        raise AssertionError("the state watch ended")


async def history(
    store: EtcdMetadataStore, prefix: str, after: int, until: int
) -> list[WatchEvent]:
    events: list[WatchEvent] = []
    async with asyncio.timeout(10), store.watch_prefix(prefix, after + 1) as watch:
        async for event in watch:
            events.append(event)
            if event.mod_revision >= until:
                return events
    raise AssertionError("the watch ended")


def check_never_two_owners(events: list[WatchEvent], keyspace: Keyspace) -> int:
    """Replay the group's keys; return how many states were checked."""
    owned: dict[str, set[tuple[str, int]]] = {}
    checked = 0
    for event in events:
        parsed = keyspace.parse(event.key)
        assert parsed is not None
        if parsed.kind is KeyKind.GROUP_MEMBER and parsed.member is not None:
            if event.kind is EventKind.DELETE:
                owned.pop(parsed.member, None)
            else:
                record = GroupMember.decode(event.value)
                owned[parsed.member] = {(t.topic, p) for t in record.owned for p in t.partitions}
        elif parsed.kind is KeyKind.GROUP_STATE and event.kind is EventKind.PUT:
            state = GroupState.decode(event.value)
            for member in state.current_assignment:
                for other, held in owned.items():
                    if other != member:
                        assert not partitions(state, member) & held, (member, other, state)
            checked += 1
    return checked


def first_grant(events: list[WatchEvent], keyspace: Keyspace, member: str) -> int:
    """The revision of the first state granting ``member`` any partition."""
    for event in events:
        if event.key == keyspace.group_state(GROUP).encode() and event.kind is EventKind.PUT:
            state = GroupState.decode(event.value)
            if state.current_assignment.get(member):
                return event.mod_revision
    raise AssertionError(f"{member} was never granted anything")


async def test_cooperative_assignment_and_lease_expiry(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1)
    c0 = await coordinators("c0")
    await wait_for_controller([c0.url])
    proxy = Proxy(etcd_store, keyspace)
    lease_a = await etcd_store.grant_lease(60)
    lease_b = await etcd_store.grant_lease(2)
    keeper_b = LeaseKeeper(etcd_store, lease_b, 2)
    keeper_b.start()
    try:
        async with AdminClient(c0.url) as admin:
            await admin.create_topic("orders", partitions=4)
            start = (await etcd_store.range_prefix(keyspace.root)).revision

            await proxy.join("a", lease_a)
            state = await proxy.state_where(lambda s: "a" in s.current_assignment)
            assert partitions(state, "a") == ALL
            assert state.state is GroupStateName.COMPLETING_REBALANCE
            await proxy.reconcile("a")
            stable = await proxy.state_where(lambda s: s.state is GroupStateName.STABLE)
            assert stable.group_epoch == state.group_epoch

            # b joins: half of a's partitions are its target, but a still owns them.
            await proxy.join("b", lease_b)
            state = await proxy.state_where(lambda s: "b" in s.target_assignment)
            moving = partitions(state, "b", target=True)
            assert len(moving) == 2
            assert partitions(state, "b") == set()
            assert "a" in state.revoking_since_ms
            await proxy.reconcile("b")  # adopts nothing yet
            released = await proxy.reconcile("a")  # a releases them
            state = await proxy.state_where(lambda s: partitions(s, "b") == moving)
            await proxy.reconcile("b")
            state = await proxy.state_where(lambda s: s.state is GroupStateName.STABLE)
            assert partitions(state, "a") == ALL - moving

            described = await admin.describe_group(GROUP)
            assert described.state == "Stable"
            assert [m.member_id for m in described.members] == ["a", "b"]
            listed = await admin.list_groups()
            assert [(g.group_id, g.member_count) for g in listed.groups] == [(GROUP, 2)]

            # b goes idle: its lease expires and a gets everything back.
            await keeper_b.stop(revoke=False)
            state = await proxy.state_where(lambda s: "b" not in s.target_assignment, 20.0)
            assert partitions(state, "a") == ALL
            assert await etcd_store.get(keyspace.group_member(GROUP, "b")) is None

            end = (await etcd_store.range_prefix(keyspace.root)).revision
            events = await history(etcd_store, keyspace.group_prefix(GROUP), start, end)
            assert check_never_two_owners(events, keyspace) >= 5
            assert first_grant(events, keyspace, "b") > released, "only after a released them"
    finally:
        await keeper_b.stop(revoke=True)
        await etcd_store.revoke_lease(lease_a)
