"""The share-partition key's encoding in the state topic, and the in-memory store's contract."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yak_broker.share.state_store import MemoryShareStateStore, SharePartitionKey

names = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True)


@given(names, names, st.integers(0, 100_000), st.integers(0, 2**62))
def test_a_key_round_trips_through_its_record_key(
    group: str, topic: str, partition: int, incarnation: int
) -> None:
    key = SharePartitionKey(group, topic, partition, incarnation)
    assert SharePartitionKey.decode(key.encode()) == key


def test_the_record_key_names_the_incarnation_so_two_incarnations_never_share_a_key() -> None:
    old = SharePartitionKey("jobs", "orders", 3, 1_700_000_000_000)
    new = old._replace(incarnation=1_700_000_000_001)
    assert old.encode() == b"jobs\0orders\x003\x001700000000000"
    assert old.encode() != new.encode()


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"g\0t",
        b"g\0t\0x\x000",
        b"\0t\x000\x000",
        b"g\0t\0-1\x000",
        b"\xff\0t\x000\x000",
        b"g\0t\x000",  # no incarnation: a key of before incarnations, loaded by nobody
        b"g\0t\x000\0x",
        b"g\0t\x000\0-5",
        b"g\0t\x000\x000\x000",
    ],
)
def test_bytes_that_are_no_key_decode_to_none(raw: bytes) -> None:
    assert SharePartitionKey.decode(raw) is None


async def test_the_memory_store_keeps_the_last_snapshot_and_can_fail_a_save() -> None:
    store = MemoryShareStateStore()
    key = SharePartitionKey("jobs", "orders", 3)
    assert await store.load(key) is None
    await store.save({key: b"one"})
    await store.save({key: b"two"})
    assert await store.load(key) == b"two"
    store.fail_next = OSError("no quorum")
    with pytest.raises(OSError, match="quorum"):
        await store.save({key: b"three"})
    assert await store.load(key) == b"two"  # a failed save changes nothing
    await store.delete(key)
    assert await store.load(key) is None
    assert store.saves == 3


async def test_the_memory_store_lists_a_groups_keys_and_saves_tombstones() -> None:
    store = MemoryShareStateStore()
    a, b = SharePartitionKey("jobs", "orders", 0, 1), SharePartitionKey("jobs", "orders", 1, 2)
    other = SharePartitionKey("other", "orders", 0, 1)
    await store.save({a: b"a", b: b"b", other: b"o"})
    assert sorted(await store.keys("jobs")) == [a, b]
    await store.save({a: None})
    assert await store.keys("jobs") == [b]
    await store.delete(b, other)
    assert await store.keys("jobs") == []
    assert store.snapshots == {}
