"""Real ``yak-broker`` processes on the session's real etcd: data plane, restarts, crashes.

These tests stand in for the coordinator: they write ``TopicRecord`` and ``PartitionState``
keys into etcd themselves (the lead adds end-to-end tests with the real coordinator). Each test
uses its own cluster id, so they share the session etcd without seeing each other's keys.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from yak.clients.broker import BrokerClient
from yak.errors import NotLeaderOrFollowerError
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.protocol.broker_wire import FRAME_CONTENT_TYPE, ProducePartition
from yak.record import RecordInput, encode_batch, iter_records
from yak.supervisor import ManagedProcess, ProcessSpec, Supervisor

pytestmark = pytest.mark.integration

#: Long enough that a restart after kill -9 finds the old lease even on a loaded machine.
LEASE_TTL_S = 8


def batch(*values: bytes) -> bytes:
    return encode_batch([RecordInput(value=v) for v in values])


class BrokerRunner:
    """Starts, stops and kills one ``yak-broker`` on a fixed data folder and fresh ports."""

    def __init__(self, etcd_url: str, cluster_id: str, data_dir: Path, broker_id: int = 0) -> None:
        self.etcd_url = etcd_url
        self.cluster_id = cluster_id
        self.data_dir = data_dir
        self.broker_id = broker_id
        self.supervisor = Supervisor()
        self.process: ManagedProcess | None = None
        self.url = ""

    def start(self) -> str:
        (port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{port}"
        script = str(Path(sys.executable).with_name("yak-broker"))
        spec = ProcessSpec(
            name=f"broker-{self.broker_id}",
            argv=(script, "--host", "127.0.0.1", "--port", str(port)),
            log_path=self.data_dir.with_suffix(".log"),
            health_url=f"{self.url}/readyz",  # ready = logs loaded and registered in etcd
            env={
                "YAK_ETCD": self.etcd_url,
                "YAK_CLUSTER_ID": self.cluster_id,
                "YAK_NODE_ID": str(self.broker_id),
                "YAK_DATA_DIR": str(self.data_dir),
                "YAK_LEASE_TTL_S": str(LEASE_TTL_S),
            },
            ready_timeout_s=20,
        )
        self.process = self.supervisor.start(spec)
        return self.url

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        assert self.process is not None
        os.kill(self.process.pid, sig)
        code = self.process.popen.wait(15)
        self.supervisor.processes.clear()
        self.process = None
        return code

    def close(self) -> None:
        self.supervisor.stop_all(grace_s=10)


@pytest.fixture
def cluster_id() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def runner(etcd: EmbeddedEtcd, cluster_id: str, tmp_path: Path) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(etcd.endpoint, cluster_id, tmp_path / "broker-0")
    try:
        yield runner
    finally:
        runner.close()


async def create_topic(
    store: EtcdMetadataStore, keys: Keyspace, name: str, leaders: list[int]
) -> None:
    """Write the topic as the coordinator would: partition p led by ``leaders[p]``."""
    record = TopicRecord(
        name=name,
        topic_id=uuid.uuid4().hex,
        partitions=len(leaders),
        replication_factor=1,
        created_at_ms=0,
    )
    await store.put(keys.topic(name), record.encode())
    for p, leader in enumerate(leaders):
        replicas = tuple(sorted({leader, 0}))
        state = PartitionState(
            topic=name, partition=p, leader=leader, leader_epoch=1, replicas=replicas, isr=(leader,)
        )
        await store.put(keys.partition(name, p), state.encode())


async def wait_hosted(client: BrokerClient, topic: str, count: int) -> None:
    """Until the broker hosts ``count`` partitions of ``topic`` (it follows etcd's watch)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        hosted = (await client.partitions()).partitions
        if sum(1 for p in hosted if p.topic == topic) >= count:
            return
        await asyncio.sleep(0.05)  # observing another process: no event to wait on
    raise AssertionError(f"{topic} not hosted within 10 s")


async def test_produce_fetch_long_poll_errors(
    runner: BrokerRunner, etcd_store: EtcdMetadataStore, cluster_id: str
) -> None:
    keys = Keyspace(cluster_id)
    url = runner.start()
    await create_topic(etcd_store, keys, "events", leaders=[0, 1])
    async with BrokerClient(url) as client:
        await wait_hosted(client, "events", 2)
        offsets = [(await client.produce_one("events", 0, batch(b"a", b"b"))).base_offset]
        offsets.append((await client.produce_one("events", 0, batch(b"c"))).base_offset)
        assert offsets == [0, 2]
        fetched = await client.fetch_one("events", 0, 0, max_wait_ms=0)
        assert [r.value for r in iter_records(fetched.records)] == [b"a", b"b", b"c"]

        # Long poll: woken by the append, far before its 10 s max wait.
        loop = asyncio.get_running_loop()
        poll = asyncio.create_task(client.fetch_one("events", 0, 3, max_wait_ms=10_000))
        await asyncio.sleep(0.2)  # let the fetch reach the broker and wait there
        appended_at = loop.time()
        await client.produce_one("events", 0, batch(b"d"))
        woken = await asyncio.wait_for(poll, 5)
        assert loop.time() - appended_at < 0.5
        assert [r.value for r in iter_records(woken.records)] == [b"d"]

        # ... and answered empty at max wait when nothing comes.
        started = loop.time()
        empty = await client.fetch_one("events", 0, 4, max_wait_ms=300)
        assert 0.29 <= loop.time() - started < 2
        assert len(empty.records) == 0

        with pytest.raises(NotLeaderOrFollowerError) as raised:
            await client.produce_one("events", 1, batch(b"x"))
        assert (raised.value.details["leader"], raised.value.details["leader_epoch"]) == (1, 1)

        async with httpx.AsyncClient(base_url=url) as http:
            bad = await http.post(
                "/v1/produce", content=b"YKF1garbage", headers={"content-type": FRAME_CONTENT_TYPE}
            )
            assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_REQUEST")
            corrupt = bytearray(batch(b"e"))
            corrupt[-1] ^= 1
            results = await client.produce([ProducePartition("events", 0, bytes(corrupt))])
            assert results[0].error is not None
            assert results[0].error.code == "CORRUPT_MESSAGE"
        (latest,) = await client.list_offsets([("events", 0)], "latest")
        assert latest.offset == 4  # nothing of the bad requests was written


async def test_restart_and_crash_keep_data_and_registration(
    runner: BrokerRunner, etcd_store: EtcdMetadataStore, cluster_id: str
) -> None:
    keys = Keyspace(cluster_id)
    url = runner.start()
    await create_topic(etcd_store, keys, "durable", leaders=[0])
    first = await registration(etcd_store, keys)
    async with BrokerClient(url) as client:
        await wait_hosted(client, "durable", 1)
        await client.produce_one("durable", 0, batch(b"one", b"two"))

    # uvicorn re-raises the SIGTERM it handled after its graceful shutdown
    assert runner.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
    assert (runner.data_dir / "durable-0" / ".clean-shutdown").exists()
    assert await etcd_store.get(keys.broker(0)) is None  # deregistered at once, not after a TTL

    url = runner.start()
    second = await registration(etcd_store, keys)
    assert second.incarnation != first.incarnation
    async with BrokerClient(url) as client:
        fetched = await client.fetch_one("durable", 0, 0, max_wait_ms=0)
        assert [r.value for r in iter_records(fetched.records)] == [b"one", b"two"]
        await client.produce_one("durable", 0, batch(b"three"))

    runner.stop(signal.SIGKILL)  # no deregistration: the new process waits out the old lease
    url = runner.start()
    third = await registration(etcd_store, keys)
    assert third.incarnation != second.incarnation
    async with BrokerClient(url) as client:
        fetched = await client.fetch_one("durable", 0, 0, max_wait_ms=0)
        assert [r.value for r in iter_records(fetched.records)] == [b"one", b"two", b"three"]
        assert (await client.produce_one("durable", 0, batch(b"four"))).base_offset == 3
    log = runner.data_dir.with_suffix(".log").read_text()
    assert "is still registered by" in log  # the restart after kill -9 said why it waited


async def registration(store: EtcdMetadataStore, keys: Keyspace) -> BrokerRegistration:
    kv = await store.get(keys.broker(0))
    assert kv is not None
    assert kv.lease != 0
    return BrokerRegistration.decode(kv.value)
