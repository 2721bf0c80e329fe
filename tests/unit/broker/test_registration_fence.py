"""``BrokerRegistrar.fence``: the compare a broker's ISR changes carry. It holds while the
registration is what this process wrote, follows its own updates, and fails once a newer
process of the same id registered or announced a new data folder on the old registration."""

from __future__ import annotations

from yak.clock import FakeClock
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak.metadata.store import Compare, PutOp
from yak_broker.server.registration import BrokerRegistrar, announce_log_dir

KEYS = Keyspace("fence")
PROBE = b"/probe"


def registration(incarnation: str, log_dir_id: str = "folder-a") -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=1,
        host="127.0.0.1",
        port=9000,
        started_at_ms=0,
        incarnation=incarnation,
        log_dir_id=log_dir_id,
    )


async def holds(store: MemoryMetadataStore, fence: Compare | None) -> bool:
    """Whether a write fenced by ``fence`` goes through (as the ISR writer's would)."""
    assert fence is not None
    result = await store.txn([fence], [PutOp(PROBE, b"written")])
    return result.succeeded


async def test_the_fence_holds_for_the_process_and_follows_its_updates() -> None:
    store = MemoryMetadataStore()
    registrar = BrokerRegistrar(store, KEYS, registration("a"), ttl_s=6, wait_s=1)
    assert registrar.fence() is None  # not registered yet: the ISR writer writes nothing
    await registrar.register()
    before = registrar.fence()
    assert await holds(store, before)
    marked = registrar.registration.model_copy(update={"shutting_down": True})
    assert await registrar.update(marked)
    assert not await holds(store, before)  # the value it compared is gone
    assert await holds(store, registrar.fence())
    await registrar.deregister()
    assert registrar.fence() is None
    await store.aclose()


async def test_a_new_data_folder_announced_fences_the_old_process() -> None:
    """A process restarted on an empty disk announces its folder on the registration the old
    one still holds: the old process's ISR changes fail from then on."""
    store = MemoryMetadataStore()
    old = BrokerRegistrar(store, KEYS, registration("old"), ttl_s=60, wait_s=1)
    await old.register()
    fence = old.fence()
    assert await holds(store, fence)
    assert await announce_log_dir(store, KEYS, 1, "folder-b")
    assert not await holds(store, fence)
    assert not await holds(store, old.fence())
    await old.deregister()
    await store.aclose()


async def test_a_newer_process_of_the_id_fences_the_old_one() -> None:
    """The old process's lease expired (it was paused) and a new one registered: the old
    process, running again, cannot change an ISR even before it learns it lost its lease."""
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    old = BrokerRegistrar(store, KEYS, registration("old"), ttl_s=3, wait_s=1, clock=clock)
    await old.register()
    fence = old.fence()
    lease = old.lease_id
    assert lease is not None
    await store.revoke_lease(lease)  # the lease ends while the old process is paused
    new = BrokerRegistrar(store, KEYS, registration("new"), ttl_s=3, wait_s=1, clock=clock)
    await new.register()
    assert not await holds(store, fence)
    assert await holds(store, new.fence())
    await new.deregister()
    await old.deregister()
    await store.aclose()
