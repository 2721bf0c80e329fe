"""``MemberStore.create`` and the Kafka classic groups: one kind of member per group. A group
whose marker (``groups/<g>/classic``) exists refuses REST members with
INCONSISTENT_GROUP_PROTOCOL (and leaves nothing behind); once the marker is gone, the group
takes REST members again."""

from __future__ import annotations

import pytest

from yak.clock import FakeClock
from yak.errors import ConsumerInstanceExistsError, InconsistentGroupProtocolError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import ClassicGroupMarker, GroupMember
from yak_rest_proxy.consume.holding.member_store import MemberStore

KS = Keyspace("test")


def member(member_id: str) -> GroupMember:
    return GroupMember(member_id=member_id, subscription=("t",), joined_at_ms=0)


async def test_a_classic_group_refuses_rest_members_until_its_marker_goes() -> None:
    store = MemoryMetadataStore(FakeClock())
    members = MemberStore(store, KS)
    await store.put(KS.group_classic("g"), ClassicGroupMarker(broker_id=2).encode())
    with pytest.raises(InconsistentGroupProtocolError) as refused:
        await members.create("g", member("m-1"), 10_000, "proxy-0")
    assert refused.value.details == {"group": "g", "coordinator": 2}
    assert (refused.value.http_status, refused.value.kafka_code) == (409, 23)
    assert (await store.range_prefix(KS.group_prefix("g"))).kvs[0].key == KS.group_classic(
        "g"
    ).encode()  # only the marker: no member, no positions
    await store.delete(KS.group_classic("g"))
    created = await members.create("g", member("m-1"), 10_000, "proxy-0")
    assert created.member_id == "m-1"
    with pytest.raises(ConsumerInstanceExistsError):
        await members.create("g", member("m-1"), 10_000, "proxy-0")
