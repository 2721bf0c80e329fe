"""``ClassicGroupStore`` on the in-memory store (and its one contested race on real etcd):
the marker claimed only when the group has no marker and no REST member, adopted when it is
ours, released only by its claimer; commits fenced by the marker, split above etcd's limit;
simple commits only on a group empty in both worlds; deletion only then."""

from __future__ import annotations

import uuid

import pytest

from yak.clock import FakeClock
from yak.metadata.classic_groups import MAX_TXN_OPS, ClassicGroupStore, GroupDeletion
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import ClassicGroupMarker, CommittedOffset
from yak.metadata.store import Compare, MetadataStore, PutOp
from yak.types import TopicPartition

KS = Keyspace("test")
MARKER = ClassicGroupMarker(broker_id=1, protocol_type="consumer", generation=0)


@pytest.fixture
def store() -> MemoryMetadataStore:
    return MemoryMetadataStore(FakeClock())


def offset(value: int, generation: int = 1) -> CommittedOffset:
    return CommittedOffset(offset=value, member_epoch=generation, commit_time_ms=5)


async def test_claim_puts_the_marker_on_the_lease_then_adopts_it(
    store: MemoryMetadataStore,
) -> None:
    groups = ClassicGroupStore(store, KS)
    lease = await store.grant_lease(10)
    claim = await groups.claim("g", MARKER, lease)
    stored = await store.get(KS.group_classic("g"))
    assert stored is not None
    assert (claim.revision, stored.lease) == (stored.mod_revision, lease)
    assert ClassicGroupMarker.decode(stored.value) == MARKER
    again = await groups.claim("g", MARKER, lease)
    assert (again.revision, again.holder) == (stored.mod_revision, MARKER)
    await store.revoke_lease(lease)  # the broker's lease goes: so does the marker
    assert await store.get(KS.group_classic("g")) is None


async def test_claim_refused_while_another_broker_or_rest_members_hold_the_group(
    store: MemoryMetadataStore,
) -> None:
    groups = ClassicGroupStore(store, KS)
    lease = await store.grant_lease(10)
    other = MARKER.model_copy(update={"broker_id": 2})
    assert (await groups.claim("g", other, lease)).revision > 0
    refused = await groups.claim("g", MARKER, await store.grant_lease(10))
    assert (refused.revision, refused.holder, refused.rest_members) == (0, other, 0)
    await store.put(KS.group_member("h", "rest-1"), b"{}")
    await store.put(KS.group_member("h", "rest-2"), b"{}")
    refused = await groups.claim("h", MARKER, lease)
    assert (refused.revision, refused.holder, refused.rest_members) == (0, None, 2)
    assert await store.get(KS.group_classic("h")) is None


async def test_release_deletes_only_the_marker_claimed(store: MemoryMetadataStore) -> None:
    groups = ClassicGroupStore(store, KS)
    lease = await store.grant_lease(10)
    first = await groups.claim("g", MARKER, lease)
    assert await groups.release("g", first.revision)
    second = await groups.claim("g", MARKER, lease)
    assert not await groups.release("g", first.revision)  # a stale release changes nothing
    assert await store.get(KS.group_classic("g")) is not None
    assert await groups.release("g", second.revision)


async def test_commit_is_fenced_by_the_marker_and_split_above_the_txn_limit(
    store: MemoryMetadataStore,
) -> None:
    groups = ClassicGroupStore(store, KS)
    lease = await store.grant_lease(10)
    claim = await groups.claim("g", MARKER, lease)
    many = {TopicPartition("t", p): offset(p) for p in range(MAX_TXN_OPS + 5)}
    assert await groups.commit("g", claim.revision, many)
    assert await groups.committed("g") == many
    await groups.release("g", claim.revision)
    await groups.claim("g", MARKER.model_copy(update={"broker_id": 2}), lease)
    assert not await groups.commit("g", claim.revision, {TopicPartition("t", 0): offset(99)})
    assert (await groups.committed("g"))[TopicPartition("t", 0)] == offset(0)


async def test_simple_commits_only_while_the_group_is_empty_in_both_worlds(
    store: MemoryMetadataStore,
) -> None:
    groups = ClassicGroupStore(store, KS)
    tp = TopicPartition("t", 0)
    assert await groups.commit("g", 0, {tp: offset(3, -1)})
    await store.put(KS.group_member("g", "rest-1"), b"{}")
    assert not await groups.commit("g", 0, {tp: offset(4, -1)})
    await store.delete(KS.group_member("g", "rest-1"))
    claim = await groups.claim("g", MARKER, await store.grant_lease(10))
    assert not await groups.commit("g", 0, {tp: offset(5, -1)})
    assert (await groups.committed("g"))[tp] == offset(3, -1)
    assert claim.revision > 0


async def test_delete_only_without_marker_or_members(store: MemoryMetadataStore) -> None:
    groups = ClassicGroupStore(store, KS)
    assert await groups.delete("g") is GroupDeletion.NOT_FOUND
    claim = await groups.claim("g", MARKER, await store.grant_lease(10))
    assert await groups.commit("g", claim.revision, {TopicPartition("t", 0): offset(1)})
    assert await groups.delete("g") is GroupDeletion.NOT_EMPTY
    await groups.release("g", claim.revision)
    await store.put(KS.committed_offset("other", "t", 0), offset(1).encode())
    assert await groups.delete("g") is GroupDeletion.DELETED
    assert await groups.committed("g") == {}
    assert await groups.committed("other") != {}


@pytest.mark.integration
async def test_on_etcd_a_rest_member_and_a_claim_never_both_win(
    etcd_store: EtcdMetadataStore,
) -> None:
    """The race the design rests on: the proxy's member creation (compare the marker absent)
    and the broker's claim (compare no member) — one of them wins, each time."""
    keys = Keyspace(f"c{uuid.uuid4().hex[:12]}")
    store: MetadataStore = etcd_store
    groups = ClassicGroupStore(store, keys)
    lease = await store.grant_lease(10)
    try:
        claimed = await groups.claim("g", MARKER, lease)
        member = keys.group_member("g", "rest-1")
        create = [Compare.absent(member), Compare.absent(keys.group_classic("g"))]
        assert claimed.revision > 0
        assert not (await store.txn(create, [PutOp(member, b"{}")])).succeeded
        assert await groups.release("g", claimed.revision)
        assert (await store.txn(create, [PutOp(member, b"{}")])).succeeded
        refused = await groups.claim("g", MARKER, lease)
        assert (refused.revision, refused.rest_members) == (0, 1)
    finally:
        await store.revoke_lease(lease)
        await store.delete_prefix(keys.root)
