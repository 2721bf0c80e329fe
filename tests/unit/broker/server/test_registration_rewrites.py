"""Rewrites of the broker's registration (its load sample, ``shutting_down``): a compare-and-
swap on what the process last wrote, on its lease, kept apart from the ISR writes that the
registration's bytes fence (``RewriteGate``)."""

from __future__ import annotations

import asyncio

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerLoad, BrokerRegistration
from yak.metadata.store import Compare, PutOp
from yak_broker.server.registration import BrokerRegistrar, announce_log_dir
from yak_broker.server.registration_gate import RewriteGate

KEYS = Keyspace("rewrites")
PROBE = b"/probe"


def registration(incarnation: str = "a") -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=1,
        host="127.0.0.1",
        port=9000,
        started_at_ms=0,
        incarnation=incarnation,
        log_dir_id="folder-a",
    )


def load(cpu: float) -> BrokerLoad:
    return BrokerLoad(
        cpu=cpu, memory_bytes=1, disk_used_ratio=0.5, records_per_second=0.0, sampled_at_ms=7
    )


async def stored(store: MemoryMetadataStore) -> tuple[BrokerRegistration, int]:
    kv = await store.get(KEYS.broker(1))
    assert kv is not None
    return BrokerRegistration.decode(kv.value), kv.lease


async def fenced_write(store: MemoryMetadataStore, fence: Compare | None) -> bool:
    assert fence is not None
    return (await store.txn([fence], [PutOp(PROBE, b"isr")])).succeeded


async def test_the_load_rides_in_the_registration_on_its_lease() -> None:
    store = MemoryMetadataStore()
    registrar = BrokerRegistrar(store, KEYS, registration(), ttl_s=6, wait_s=1)
    await registrar.register()
    marked = registrar.registration.model_copy(update={"shutting_down": True})
    assert await registrar.update(marked)
    assert await registrar.publish_load(load(0.5))
    written, lease = await stored(store)
    assert written.load == load(0.5)
    assert written.shutting_down  # the rest kept as it was
    assert lease == registrar.lease_id
    assert await fenced_write(store, registrar.fence())  # the fence follows the rewrite
    await registrar.deregister()
    assert not await registrar.publish_load(load(0.6))  # not registered: nothing written
    await store.aclose()


async def test_a_fenced_process_never_overwrites_the_newer_ones_registration() -> None:
    store = MemoryMetadataStore()
    old = BrokerRegistrar(store, KEYS, registration("old"), ttl_s=60, wait_s=1)
    await old.register()
    assert await announce_log_dir(store, KEYS, 1, "folder-b")  # a new process, a new disk
    assert not await old.publish_load(load(0.9))
    written, _ = await stored(store)
    assert written.log_dir_id == "folder-b"
    assert written.load is None
    await store.aclose()


async def test_a_rewrite_waits_for_the_fenced_writes_in_flight() -> None:
    """The ISR writer read the fence; the load publish comes meanwhile: it waits until the
    fenced write was answered, so that write's compare still holds."""
    store = MemoryMetadataStore()
    registrar = BrokerRegistrar(store, KEYS, registration(), ttl_s=6, wait_s=1)
    await registrar.register()
    async with registrar.fenced_writes():
        fence = registrar.fence()
        publishing = asyncio.create_task(registrar.publish_load(load(0.7)))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not publishing.done()
        assert await fenced_write(store, fence)
    assert await publishing
    assert (await stored(store))[0].load == load(0.7)
    assert not await fenced_write(store, fence)  # the old bytes are gone now
    await registrar.deregister()
    await store.aclose()


async def test_the_gate_holds_new_sharers_back_while_a_rewrite_waits() -> None:
    gate, order = RewriteGate(), []

    async def share(name: str, release: asyncio.Event) -> None:
        async with gate.shared():
            order.append(f"{name} in")
            await release.wait()
        order.append(f"{name} out")

    async def rewrite() -> None:
        async with gate.alone():
            order.append("rewrite")

    first_done, second_done = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(share("first", first_done))
    await asyncio.sleep(0)
    rewriting = asyncio.create_task(rewrite())
    await asyncio.sleep(0)
    second = asyncio.create_task(share("second", second_done))
    await asyncio.sleep(0)
    assert order == ["first in"]  # the rewrite waits for the first; the second waits for it
    assert gate.sharing == 1
    first_done.set()
    second_done.set()
    await asyncio.gather(first, rewriting, second)
    assert order == ["first in", "first out", "rewrite", "second in", "second out"]
    assert gate.sharing == 0
