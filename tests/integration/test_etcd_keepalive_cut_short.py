"""A lease keep-alive whose member is left (its channel closed) between the stream's creation
and its first write: before the fix that keep-alive never returned — the stream's write waits
for the call's initial metadata to be sent, a wait gRPC's deadline does not end — so the
``LeaseKeeper`` hung, the lease expired in etcd and the keys on it (a broker's registration)
vanished while the holder still believed it held them (the chaos suite's ``pause-etcd`` and
``partition-etcd-member`` runs: a broker ready and registered by its own account, absent from
etcd's ``brokers/``, never back in an ISR). Now the keep-alive gives up at its deadline and
is sent again to the next member; real 3-member etcd on 127.0.0.1."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from yak.etcd_cluster import EmbeddedEtcdCluster
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.store import LeaseExpiredError

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedEtcdCluster]:
    with EmbeddedEtcdCluster(tmp_path / "etcd", 3, unsafe_no_fsync=True) as started:
        yield started


async def test_a_keep_alive_whose_member_is_left_under_it_goes_on_elsewhere(
    cluster: EmbeddedEtcdCluster,
) -> None:
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=5.0)
    try:
        lease = await store.grant_lease(3)
        members = store._members
        conn = members.current()
        opened = conn.lease.LeaseKeepAlive

        def left_at_once(*args: Any, **kwargs: Any) -> Any:
            call = opened(*args, **kwargs)
            # another call finds the member down right now: the channel is closed before
            # the keep-alive's first message is sent
            asyncio.get_running_loop().call_soon(members.move_on, conn)
            return call

        conn.lease.LeaseKeepAlive = left_at_once
        async with asyncio.timeout(5.0):  # hung for good before the fix
            ttl = await store.keep_alive_once(lease)
        assert ttl > 0
        assert not members.is_current(conn)
    finally:
        await store.aclose()


async def test_a_keeper_is_never_silently_stuck_while_members_are_left(
    cluster: EmbeddedEtcdCluster,
) -> None:
    """Connections retired every 0-50 ms for 10 s (a storm of member switches): the keeper
    either keeps the lease or says it lost it; it never believes in a lease etcd has
    dropped."""
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=5.0)
    rng = random.Random(2)
    try:
        lease = await store.grant_lease(2)
        async with LeaseKeeper(store, lease, 2) as keeper:
            end = asyncio.get_running_loop().time() + 10.0
            while asyncio.get_running_loop().time() < end and not keeper.lost:
                await asyncio.sleep(rng.uniform(0.0, 0.05))
                store._members.move_on(store._members.current())
            if not keeper.lost:
                await asyncio.sleep(3.0)  # quiet: the keeper gets its refreshes through
            try:
                alive = await store.keep_alive_once(lease) > 0
            except LeaseExpiredError:
                alive = False
            assert keeper.lost or alive
    finally:
        await store.aclose()
