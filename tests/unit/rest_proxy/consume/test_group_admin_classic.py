"""The rest-proxy's group administration and Kafka classic groups: a group whose marker
(``groups/<g>/classic``) exists has Kafka-protocol members, so deleting it is refused with
NON_EMPTY_GROUP (it would take the live group's marker away); once the marker is gone the
group and its offsets are deleted."""

from __future__ import annotations

from typing import Any, cast

import pytest

from yak.clock import FakeClock
from yak.errors import GroupNotEmptyError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import ClassicGroupMarker, CommittedOffset
from yak_rest_proxy.consume.group_admin import GroupAdmin

KS = Keyspace("test")


async def test_a_group_with_kafka_members_is_not_deleted() -> None:
    store = MemoryMetadataStore(FakeClock())
    # Deleting reads only the store: no cache, no reader.
    admin = GroupAdmin(store, KS, cast(Any, None), cast(Any, None), clock=FakeClock())
    await store.put(KS.group_classic("g"), ClassicGroupMarker(broker_id=1).encode())
    offset = CommittedOffset(offset=5, member_epoch=1, commit_time_ms=0)
    await store.put(KS.committed_offset("g", "t", 0), offset.encode())
    with pytest.raises(GroupNotEmptyError):
        await admin.delete("g")
    assert await store.get(KS.group_classic("g")) is not None
    await store.delete(KS.group_classic("g"))
    await admin.delete("g")
    assert await store.get(KS.committed_offset("g", "t", 0)) is None
