"""Partition reassignment and partition health against a real coordinator process and etcd.

Metadata only: the brokers are registrations on a lease (the ``brokers`` fixture), not
processes, so nothing replicates. The test plays the partition leader's part instead: it adds
a caught-up replica to the ISR by writing ``PartitionState`` to etcd with a compare-and-swap and
``partition_epoch`` + 1, exactly as a leader's AlterPartition does. (The same move with real
brokers copying the data is ``tests/integration/test_replication_faults.py``.)
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState
from yak.metadata.store import Compare, PutOp

pytestmark = pytest.mark.integration

YAK = str(Path(sys.executable).with_name("yak"))


async def yak(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        YAK,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},  # rich wraps table cells at 80 otherwise
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def stored(store: EtcdMetadataStore, ks: Keyspace, topic: str) -> PartitionState:
    kv = await store.get(ks.partition(topic, 0))
    assert kv is not None
    return PartitionState.decode(kv.value)


async def add_to_isr(store: EtcdMetadataStore, ks: Keyspace, topic: str, replica: int) -> None:
    """What the leader does once ``replica`` caught up: CAS the ISR, partition_epoch + 1."""
    key = ks.partition(topic, 0)
    kv = await store.get(key)
    assert kv is not None
    state = PartitionState.decode(kv.value)
    grown = state.model_copy(
        update={"isr": (*state.isr, replica), "partition_epoch": state.partition_epoch + 1}
    )
    result = await store.txn(
        [Compare.mod_revision(key, kv.mod_revision)], [PutOp(key, grown.encode())]
    )
    assert result.succeeded


async def eventually(
    store: EtcdMetadataStore, ks: Keyspace, topic: str, done: Callable[[PartitionState], bool]
) -> PartitionState:
    deadline = time.monotonic() + 10
    while not done(state := await stored(store, ks, topic)):
        assert time.monotonic() < deadline, f"not reached: {state}"
        await asyncio.sleep(0.05)  # another process decides: nothing local to wait on
    return state


async def test_reassignment_completes_once_the_new_replicas_join_the_isr(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1, 2, 3, 4)
    c0 = await coordinators("c0")
    await wait_for_controller([c0.url])
    where = ("--coordinator", c0.url)
    await yak("topics", "create", "mv", "--replication-factor", "2", *where)
    before = await stored(etcd_store, keyspace, "mv")
    target = [b for b in (1, 2, 3, 4) if b not in before.replicas]

    out = await yak("topics", "reassign", "mv", "--partition", "0", "--replicas",
                    ",".join(map(str, target)), *where)  # fmt: skip
    assert f"adding {target}" in out
    moving = await stored(etcd_store, keyspace, "mv")
    assert moving.replicas == (*target, *before.replicas)
    assert (moving.isr, moving.leader, moving.leader_epoch) == (
        before.isr,
        before.leader,
        before.leader_epoch,
    )
    removing = ",".join(map(str, before.replicas))
    assert f"reassigning (+{','.join(map(str, target))} -{removing})" in await yak(
        "topics", "describe", "mv", *where
    )
    async with httpx.AsyncClient(base_url=f"{c0.url}/admin/v1", timeout=10) as http:
        listed = (await http.get("/reassignments")).json()["reassignments"]
        assert [(r["topic"], r["partition"]) for r in listed] == [("mv", 0)]

        await add_to_isr(etcd_store, keyspace, "mv", target[0])
        await asyncio.sleep(0.5)  # one target replica in sync is not enough
        assert (await stored(etcd_store, keyspace, "mv")).reassigning

        await add_to_isr(etcd_store, keyspace, "mv", target[1])
        done = await eventually(etcd_store, keyspace, "mv", lambda s: not s.reassigning)
        assert (done.replicas, sorted(done.isr)) == (tuple(target), sorted(target))
        assert done.leader == target[0]  # the old leader left: the first in-sync target leads
        assert done.leader_epoch == before.leader_epoch + 1
        deadline = time.monotonic() + 10  # the coordinator's cache follows etcd a moment later
        while listed := (await http.get("/reassignments")).json()["reassignments"]:
            assert time.monotonic() < deadline, listed
            await asyncio.sleep(0.05)  # another process's cache: nothing local to wait on


async def test_cancel_restores_the_original_replicas(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1, 2, 3)
    c0 = await coordinators("c0")
    await wait_for_controller([c0.url])
    where = ("--coordinator", c0.url)
    await yak("topics", "create", "cx", *where)
    before = await stored(etcd_store, keyspace, "cx")
    other = next(b for b in (1, 2, 3) if b not in before.replicas)
    await yak("topics", "reassign", "cx", "--partition", "0", "--replicas", str(other), *where)
    out = await yak("topics", "reassign", "cx", "--partition", "0", "--cancel", *where)
    assert f"replicas {list(before.replicas)}" in out
    after = await stored(etcd_store, keyspace, "cx")
    assert (after.replicas, after.isr, after.leader) == (before.replicas, before.isr, before.leader)
    assert not after.reassigning


async def test_under_replicated_partitions_in_the_api_and_the_cli(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1, 2)
    await brokers(3)  # on its own lease
    c0 = await coordinators("c0")
    await wait_for_controller([c0.url])
    where = ("--coordinator", c0.url)
    await yak("topics", "create", "urp", "--partitions", "2", "--replication-factor", "3",
              "--config", "min.insync.replicas=3", *where)  # fmt: skip
    await yak("topics", "create", "fine", "--replication-factor", "2", *where)
    assert "under-replicated: 0" in await yak("cluster", "status", *where)

    await etcd_store.delete(keyspace.broker(3))  # broker 3 is gone: it leaves every ISR
    await eventually(etcd_store, keyspace, "urp", lambda s: 3 not in s.isr)
    async with httpx.AsyncClient(base_url=f"{c0.url}/admin/v1", timeout=10) as http:
        listed = (await http.get("/partitions", params={"state": "under-replicated"})).json()
        urp = {(p["topic"], p["partition"]) for p in listed["partitions"]}
        assert ("urp", 0) in urp
        assert ("urp", 1) in urp
        offline = (await http.get("/partitions", params={"state": "offline"})).json()
        assert offline["partitions"] == []
    status = await yak("cluster", "status", *where)
    assert "under-replicated: " in status
    assert "under-replicated: 0" not in status
    assert "needs attention" in status
    assert "urp-0" in status
    described = await yak("topics", "describe", "urp", *where)
    assert "under-replicated" in described
    assert "under min ISR (3)" in described
