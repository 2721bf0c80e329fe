"""Controller election on the in-memory store with a fake clock: one winner, takeover, fencing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from yak.clock import FakeClock
from yak.errors import NotControllerError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import ControllerRecord
from yak.metadata.store import PutOp
from yak_coordinator.election import Candidate, Election, Term

KS = Keyspace("elect")
TTL = 5


@pytest.fixture
async def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryMetadataStore]:
    store = MemoryMetadataStore(clock)
    yield store
    await store.aclose()


def election(store: MemoryMetadataStore, clock: FakeClock, node: str) -> Election:
    return Election(store, KS, Candidate(node, "127.0.0.1", 9000), ttl_s=TTL, clock=clock)


async def elected(e: Election) -> Term:
    return await asyncio.wait_for(e.wait_elected(), 5)


async def controller(store: MemoryMetadataStore) -> ControllerRecord:
    kv = await store.get(KS.controller)
    assert kv is not None
    return ControllerRecord.decode(kv.value)


async def test_one_winner_and_epoch_is_create_revision(
    store: MemoryMetadataStore, clock: FakeClock
) -> None:
    a, b = election(store, clock, "a"), election(store, clock, "b")
    a.start()
    term = await elected(a)
    b.start()
    await asyncio.sleep(0.01)
    assert b.term is None
    with pytest.raises(NotControllerError):
        b.require_term()
    record = await controller(store)
    kv = await store.get(KS.controller)
    assert kv is not None
    assert (record.coordinator_id, record.epoch) == ("a", term.epoch)
    assert kv.create_revision == term.epoch
    await b.stop()
    await a.stop()


async def test_killed_controller_is_replaced_after_the_lease_ttl(
    store: MemoryMetadataStore, clock: FakeClock
) -> None:
    a, b = election(store, clock, "a"), election(store, clock, "b")
    a.start()
    first = await elected(a)
    b.start()
    await asyncio.sleep(0.01)
    await a.stop(resign=False)  # like kill -9: the lease is left to expire
    clock.advance(TTL - 1)
    await asyncio.sleep(0.01)
    assert b.term is None
    clock.advance(2)
    second = await elected(b)
    assert second.epoch > first.epoch
    assert (await controller(store)).coordinator_id == "b"
    # The deposed controller's fenced writes fail.
    result = await store.txn([first.fence], [PutOp(KS.topic("x"), b"{}")])
    assert not result.succeeded
    await b.stop()


async def test_resigning_hands_over_at_once(store: MemoryMetadataStore, clock: FakeClock) -> None:
    a, b = election(store, clock, "a"), election(store, clock, "b")
    a.start()
    first = await elected(a)
    b.start()
    await asyncio.sleep(0.01)
    await a.stop()  # SIGTERM path: revoke the lease
    assert first.ended
    second = await elected(b)  # no clock advance needed
    assert second.epoch > first.epoch
    await b.stop()


async def test_lost_lease_ends_the_term_and_campaigns_again(
    store: MemoryMetadataStore, clock: FakeClock
) -> None:
    a = election(store, clock, "a")
    a.start()
    first = await elected(a)
    await store.revoke_lease(first.lease_id)  # e.g. expired while etcd was unreachable
    clock.advance(TTL / 3 + 0.1)  # the keeper's next refresh learns it
    await asyncio.wait_for(first.wait_ended(), 5)
    second = await elected(a)
    assert second.epoch > first.epoch
    await a.stop()
