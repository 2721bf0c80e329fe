"""The broker record driver on the in-memory store: a write per broker event, fenced by the
controller's term, and a standby that takes over closes the record at the moment it saw the
broker vanish, not at the moment it took over."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from yak.clock import FakeClock
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRecord, BrokerRegistration
from yak.metadata.store import Compare
from yak_coordinator.broker_recorder import BrokerRecorder
from yak_coordinator.election import Term

KS = Keyspace("rec")
T0 = 1_700_000_000_000


def registration(broker_id: int = 1, incarnation: str = "a", **kw: object) -> BrokerRegistration:
    values: dict[str, object] = {
        "broker_id": broker_id,
        "host": "127.0.0.1",
        "port": 9000 + broker_id,
        "started_at_ms": T0,
        "incarnation": incarnation,
        **kw,
    }
    return BrokerRegistration.model_validate(values)


@dataclass
class Coordinator:
    """One coordinator's cache and recorder; ``elect`` runs the recorder for a new term."""

    store: MemoryMetadataStore
    cache: MetadataCache
    recorder: BrokerRecorder
    clock: FakeClock
    task: asyncio.Task[None] | None = None

    async def elect(self) -> Term:
        await self.store.delete(KS.controller)
        revision = await self.store.put(KS.controller, b"{}")
        term = Term(revision, 0, Compare.create_revision(KS.controller, revision))
        self.task = asyncio.get_running_loop().create_task(self.recorder.run(term))
        return term

    async def fail(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


@dataclass
class Setup:
    store: MemoryMetadataStore
    start: Callable[[], Coordinator]


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    store = MemoryMetadataStore(FakeClock())
    started: list[Coordinator] = []

    def start() -> Coordinator:
        clock = FakeClock(T0)
        cache = MetadataCache(store, KS)
        coordinator = Coordinator(store, cache, BrokerRecorder(store, KS, cache, clock), clock)
        started.append(coordinator)
        return coordinator

    try:
        yield Setup(store, start)
    finally:
        for coordinator in started:
            await coordinator.fail()
            await coordinator.cache.stop()
        await store.aclose()


async def follow(coordinator: Coordinator) -> Coordinator:
    await coordinator.cache.start()
    coordinator.recorder.follow()
    return coordinator


async def record(store: MemoryMetadataStore, broker_id: int = 1) -> BrokerRecord | None:
    kv = await store.get(KS.broker_record(broker_id))
    return None if kv is None else BrokerRecord.decode(kv.value)


async def settle(coordinators: list[Coordinator], store: MemoryMetadataStore) -> None:
    """Until every cache shows the store's revision and the recorders ran their rounds (the
    store, the caches and the recorders all run in this loop)."""
    for _ in range(10_000):
        if all(c.cache.revision == store.revision for c in coordinators):
            break
        await asyncio.sleep(0)
    else:
        raise AssertionError("the caches never caught up")
    for _ in range(100):  # the rounds those events woke, and the events of their writes
        await asyncio.sleep(0)
    if any(c.cache.revision != store.revision for c in coordinators):
        await settle(coordinators, store)


async def register(store: MemoryMetadataStore, value: BrokerRegistration) -> int:
    lease = await store.grant_lease(60)
    await store.put(KS.broker(value.broker_id), value.encode(), lease=lease)
    return lease


async def test_one_write_per_broker_event_and_none_while_it_stays(setup: Setup) -> None:
    active = await follow(setup.start())
    await active.elect()
    lease = await register(setup.store, registration())
    await settle([active], setup.store)
    written = await record(setup.store)
    assert written is not None
    assert (written.registered, written.last_seen_ms, written.first_registered_ms) == (
        True,
        T0,
        T0,
    )
    assert active.recorder.written == 1
    # Controlled shutdown, a lease renewed, time passing, unrelated keys: no write.
    stopping = registration(shutting_down=True)
    await setup.store.put(KS.broker(1), stopping.encode(), lease=lease)
    await setup.store.keep_alive_once(lease)
    await setup.store.put(KS.topic("t"), b"{}")
    active.clock.advance(3_600)
    await settle([active], setup.store)
    assert active.recorder.written == 1
    # It leaves: one more write, closed at the moment the cache saw the key go.
    active.clock.advance(10)
    await setup.store.revoke_lease(lease)
    await settle([active], setup.store)
    closed = await record(setup.store)
    assert closed == written.model_copy(
        update={"registered": False, "last_seen_ms": T0 + 3_610_000}
    )
    assert active.recorder.written == 2


async def test_a_standby_taking_over_closes_the_record_at_the_moment_it_saw_the_broker_go(
    setup: Setup,
) -> None:
    first, standby = await follow(setup.start()), await follow(setup.start())
    await first.elect()
    lease = await register(setup.store, registration())
    await settle([first, standby], setup.store)
    assert (await record(setup.store)) is not None
    # The controller dies; while nobody is elected the broker vanishes, seen by the standby.
    await first.fail()
    standby.clock.advance(30)
    await setup.store.revoke_lease(lease)
    await settle([first, standby], setup.store)
    still = await record(setup.store)
    assert still is not None
    assert still.registered
    # It takes over a minute later: the record says when the broker went, not when it took over.
    standby.clock.advance(60)
    await standby.elect()
    await settle([first, standby], setup.store)
    closed = await record(setup.store)
    assert closed is not None
    assert (closed.registered, closed.last_seen_ms) == (False, T0 + 30_000)
    # A third coordinator started afterwards knows nothing of that moment and moves nothing.
    await standby.fail()
    late = await follow(setup.start())
    late.clock.advance(3_600)
    await late.elect()
    await settle([late], setup.store)
    assert await record(setup.store) == closed
    assert late.recorder.written == 0


async def test_a_broker_that_came_and_went_between_two_controllers_is_recorded(
    setup: Setup,
) -> None:
    standby = await follow(setup.start())
    lease = await register(setup.store, registration(broker_id=2))
    standby.clock.advance(5)
    await setup.store.revoke_lease(lease)
    await settle([standby], setup.store)
    await standby.elect()
    await settle([standby], setup.store)
    gone = await record(setup.store, 2)
    assert gone is not None
    assert (gone.registered, gone.last_seen_ms, gone.first_registered_ms) == (False, T0 + 5_000, T0)


async def test_a_deposed_controller_writes_nothing_and_its_term_ends(setup: Setup) -> None:
    coordinator = await follow(setup.start())
    term = await coordinator.elect()
    await settle([coordinator], setup.store)
    await setup.store.delete(KS.controller)
    await setup.store.put(KS.controller, b"{}")  # another coordinator's term
    await register(setup.store, registration())
    await settle([coordinator], setup.store)
    assert term.ended
    assert await record(setup.store) is None


async def test_a_malformed_record_is_overwritten(setup: Setup) -> None:
    await setup.store.put(KS.broker_record(1), b'{"broker_id": "nope"}')
    coordinator = await follow(setup.start())
    await coordinator.elect()
    await register(setup.store, registration())
    await settle([coordinator], setup.store)
    written = await record(setup.store)
    assert written is not None
    assert written.registered
