"""Tests for registration: create-if-absent on a lease, waiting out an older holder, re-register."""

from __future__ import annotations

import asyncio

import pytest

from yak.clock import FakeClock
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak_broker.server.registration import BrokerRegistrar, DuplicateBrokerRegistrationError

KEYS = Keyspace("test")


def registration(incarnation: str, broker_id: int = 1) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, host="127.0.0.1", port=9000, started_at_ms=0, incarnation=incarnation
    )


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def holder_of(store: MemoryMetadataStore, broker_id: int = 1) -> str | None:
    kv = await store.get(KEYS.broker(broker_id))
    return BrokerRegistration.decode(kv.value).incarnation if kv else None


async def test_registers_on_a_lease_and_deregistering_removes_the_key() -> None:
    store = MemoryMetadataStore()
    registrar = BrokerRegistrar(store, KEYS, registration("a"), ttl_s=6, wait_s=1)
    await registrar.register()
    kv = await store.get(KEYS.broker(1))
    assert kv is not None
    assert kv.lease == registrar.lease_id
    assert registrar.registered
    await registrar.deregister()
    assert await store.get(KEYS.broker(1)) is None
    await store.aclose()


async def test_waits_for_an_older_registration_to_expire() -> None:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    lease = await store.grant_lease(6)
    await store.put(KEYS.broker(1), registration("dead").encode(), lease=lease)
    registrar = BrokerRegistrar(store, KEYS, registration("new"), ttl_s=6, wait_s=30, clock=clock)
    task = asyncio.create_task(registrar.register())
    await settle()
    assert not task.done()
    assert await holder_of(store) == "dead"
    clock.advance(7)  # the dead process's lease expires; the watch sees the DELETE
    await asyncio.wait_for(task, 5)
    assert await holder_of(store) == "new"
    await registrar.deregister()
    await store.aclose()


async def test_a_live_duplicate_is_refused_after_the_wait() -> None:
    store = MemoryMetadataStore()
    first = BrokerRegistrar(store, KEYS, registration("first"), ttl_s=60, wait_s=1)
    await first.register()
    second = BrokerRegistrar(store, KEYS, registration("second"), ttl_s=60, wait_s=0.05)
    with pytest.raises(DuplicateBrokerRegistrationError, match="another live process"):
        await second.register()
    assert await holder_of(store) == "first"
    await first.deregister()
    await store.aclose()


async def test_registers_again_after_losing_the_lease() -> None:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    registrar = BrokerRegistrar(store, KEYS, registration("me"), ttl_s=3, wait_s=5, clock=clock)
    await registrar.register()
    old_lease = registrar.lease_id
    assert old_lease is not None
    await store.revoke_lease(old_lease)  # as if etcd expired it
    clock.advance(1)  # the keeper's next refresh (ttl / 3) finds the lease gone
    await settle()
    assert registrar.registered
    assert registrar.lease_id != old_lease
    kv = await store.get(KEYS.broker(1))
    assert kv is not None
    assert kv.lease == registrar.lease_id
    await registrar.deregister()
    await store.aclose()


async def test_update_re_puts_the_registration_on_the_same_lease() -> None:
    """Controlled shutdown marks the registration ``shutting_down`` without a new lease."""
    store = MemoryMetadataStore()
    registrar = BrokerRegistrar(store, KEYS, registration("me"), ttl_s=3, wait_s=5)
    await registrar.register()
    lease = registrar.lease_id
    marked = registrar.registration.model_copy(update={"shutting_down": True})
    assert await registrar.update(marked)
    kv = await store.get(KEYS.broker(1))
    assert kv is not None
    assert kv.lease == lease
    assert BrokerRegistration.decode(kv.value).shutting_down
    assert registrar.registration.shutting_down
    await registrar.deregister()
    assert await store.get(KEYS.broker(1)) is None
    await store.aclose()


async def test_update_without_a_registration_writes_nothing() -> None:
    store = MemoryMetadataStore()
    registrar = BrokerRegistrar(store, KEYS, registration("me"), ttl_s=3, wait_s=5)
    marked = registrar.registration.model_copy(update={"shutting_down": True})
    assert not await registrar.update(marked)
    assert await store.get(KEYS.broker(1)) is None
    assert not registrar.registration.shutting_down
    await store.aclose()


async def test_waits_for_an_older_registration_whose_revision_is_compacted() -> None:
    """A kill -9 restart in a busy cluster: the dead process registered long ago, etcd has
    compacted past that revision since, and its lease has not expired yet. The wait watches
    from the revision of the read that found the holder, not from the holder's own revision
    (a watch from there failed with RevisionCompactedError and the broker exited)."""
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    lease = await store.grant_lease(6)
    await store.put(KEYS.broker(1), registration("dead").encode(), lease=lease)
    for i in range(5):  # the cluster's later writes (consumer positions, ISR changes ...)
        await store.put(f"elsewhere/{i}", b"x")
    await store.compact(await store.put("elsewhere/last", b"x"))
    registrar = BrokerRegistrar(store, KEYS, registration("new"), ttl_s=6, wait_s=30, clock=clock)
    task = asyncio.create_task(registrar.register())
    await settle()
    assert not task.done()
    clock.advance(7)  # the dead process's lease expires; the watch sees the DELETE
    await asyncio.wait_for(task, 5)
    assert await holder_of(store) == "new"
    await registrar.deregister()
    await store.aclose()
