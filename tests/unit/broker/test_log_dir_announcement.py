"""``announce_log_dir``: a broker restarted on an empty data folder writes the new folder id into
the registration its previous process left (on that process's lease), so the controller stops
counting the lost logs at once instead of after the lease (issue 21 item 2)."""

from __future__ import annotations

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak_broker.server.registration import announce_log_dir

KEYSPACE = Keyspace("c")


def registration(log_dir_id: str) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=1,
        host="127.0.0.1",
        port=9001,
        started_at_ms=5,
        incarnation="old",
        log_dir_id=log_dir_id,
    )


async def left_behind(store: MemoryMetadataStore, log_dir_id: str) -> int:
    lease = await store.grant_lease(6)
    await store.put(KEYSPACE.broker(1), registration(log_dir_id).encode(), lease=lease)
    return lease


async def test_a_new_folder_is_announced_on_the_old_registration_and_lease() -> None:
    store = MemoryMetadataStore()
    lease = await left_behind(store, "old-folder")
    assert await announce_log_dir(store, KEYSPACE, 1, "new-folder")
    kv = await store.get(KEYSPACE.broker(1))
    assert kv is not None
    assert kv.lease == lease  # it still expires with the old process's lease
    announced = BrokerRegistration.decode(kv.value)
    assert announced == registration("new-folder")


async def test_nothing_is_written_for_the_same_folder_an_older_broker_or_no_registration() -> None:
    store = MemoryMetadataStore()
    assert not await announce_log_dir(store, KEYSPACE, 1, "f")  # nobody registered
    await left_behind(store, "f")
    before = await store.get(KEYSPACE.broker(1))
    assert not await announce_log_dir(store, KEYSPACE, 1, "f")  # a restart with its disk
    assert await store.get(KEYSPACE.broker(1)) == before
    other = MemoryMetadataStore()
    await left_behind(other, "")  # a broker from before the folder ids: nothing to compare
    assert not await announce_log_dir(other, KEYSPACE, 1, "f")
