"""The share-partition key's encoding in the state topic, and the in-memory store's contract."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yak_broker.share.state_store import MemoryShareStateStore, SharePartitionKey

names = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True)


@given(names, names, st.integers(0, 100_000))
def test_a_key_round_trips_through_its_record_key(group: str, topic: str, partition: int) -> None:
    key = SharePartitionKey(group, topic, partition)
    assert SharePartitionKey.decode(key.encode()) == key


@pytest.mark.parametrize(
    "raw", [b"", b"g\0t", b"g\0t\0x", b"\0t\x000", b"g\0t\0-1", b"\xff\0t\x000"]
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
