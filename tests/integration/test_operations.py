"""Day-2 operations on a real cluster (etcd, a coordinator, 4 brokers, a rest-proxy), driven
through the ``yak`` CLI as an operator would: a reassignment plan, preferred leader election
after a failover, group offsets export and import, topic dump and restore, and (last, since
it changes the cluster) decommissioning a broker. The coordinator runs without automatic
leader rebalance, so only ``elect-leaders`` moves leadership back. A broker restarted on an
empty data folder (a replaced disk) copies its replicas back.

Conditions on the metadata are awaited on a ``MetadataCache`` of the cluster (etcd watch
events); the CLI runs as a subprocess in the test's folder.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.sdk import AsyncAdmin, AsyncConsumer, AsyncPartitionReader, AsyncProducer, ConsumerRecord
from yak.types import TopicPartition

pytestmark = pytest.mark.integration

BROKERS = 4
WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder = tmp_path_factory.mktemp("ops")
    with local_cluster(
        folder,
        etcd,
        f"ops-{uuid.uuid4().hex[:8]}",
        brokers=BROKERS,
        coordinator_env={"YAK_AUTO_LEADER_REBALANCE": "false"},
    ) as running:
        running.start_proxy(0)
        yield running


@pytest.fixture
async def metadata(cluster: LocalCluster) -> AsyncIterator[MetadataCache]:
    store = EtcdMetadataStore.from_url(cluster.etcd.endpoint)
    cache = MetadataCache(store, Keyspace(cluster.cluster_id))
    await cache.start()
    try:
        yield cache
    finally:
        await cache.stop()
        await store.aclose()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def until(
    cache: MetadataCache, predicate: Callable[[ClusterSnapshot], bool]
) -> ClusterSnapshot:
    return await cache.wait_for(predicate, WAIT_S)


def in_sync(topic: str) -> Callable[[ClusterSnapshot], bool]:
    """Every partition of ``topic`` exists, has a leader, no move runs and ISR = replicas."""

    def check(snapshot: ClusterSnapshot) -> bool:
        states = snapshot.partitions_of(topic)
        record = snapshot.topics.get(topic)
        return (
            record is not None
            and len(states) == record.partitions
            and all(
                s.has_leader and not s.reassigning and sorted(s.isr) == sorted(s.replicas)
                for s in states
            )
        )

    return check


async def yak(cluster: LocalCluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI against this cluster (its coordinator or proxy, by command)."""
    where = (
        ("--url", cluster.proxy_url(0))
        if args[0] in ("groups",) or args[:2] in (("topics", "dump"), ("topics", "restore"))
        else ("--coordinator", cluster.coordinator_url)
    )
    argv = [str(Path(sys.executable).with_name("yak")), *args, *where]
    return await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=100, cwd=cwd
    )


async def create(cluster: LocalCluster, topic: str, partitions: int, rf: int) -> None:
    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        await admin.create_topic(topic, partitions=partitions, replication_factor=rf)


async def produce(cluster: LocalCluster, topic: str, count: int, partitions: int) -> None:
    """Keyed records with headers and explicit timestamps, spread over every partition."""
    async with AsyncProducer(cluster.proxy_url(0)) as producer:
        for i in range(count):
            await producer.send(
                topic,
                f"value-{i}".encode() if i % 7 else None,
                key=f"key-{i}" if i % 5 else None,
                headers=[("seq", str(i).encode()), ("empty", None)] if i % 3 else (),
                partition=i % partitions,
                timestamp=1_700_000_000_000 + i,
            )
        await producer.flush()


async def read_all(cluster: LocalCluster, topic: str, partitions: int) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    async with AsyncPartitionReader(cluster.proxy_url(0)) as reader:
        for p in range(partitions):
            start, end = await reader.offsets(topic, p)
            offset = start
            while offset < end:
                read = await reader.read(topic, p, offset)
                out += read.records
                offset = read.next_offset
    return out


async def test_a_plan_moves_a_partition_from_brokers_0_1_to_1_2_with_its_data(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    topic = unique("move")
    await create(cluster, topic, 1, 2)
    await until(metadata, in_sync(topic))
    # Start from [0, 1] exactly, whatever placement chose.
    put = await yak(cluster, tmp_path, "topics", "reassign", topic, "--partition", "0",
                    "--replicas", "0,1")  # fmt: skip
    assert put.returncode == 0, put.stderr
    await until(
        metadata, lambda s: in_sync(topic)(s) and s.partitions[(topic, 0)].replicas == (0, 1)
    )
    await produce(cluster, topic, 50, 1)
    before = await read_all(cluster, topic, 1)

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2]}]}))  # fmt: skip
    executed = await yak(
        cluster, tmp_path, "partitions", "reassign", str(plan), "--execute",
        "--rollback", str(tmp_path / "rollback.json"),
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert "started 1 reassignments" in executed.stdout
    rollback = json.loads((tmp_path / "rollback.json").read_text())
    assert rollback["partitions"][0]["replicas"] == [0, 1]
    verified = await yak(cluster, tmp_path, "partitions", "reassign", str(plan), "--verify",
                         "--wait", "--timeout", "60")  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "complete" in verified.stdout

    snapshot = await until(metadata, in_sync(topic))
    state = snapshot.partitions[(topic, 0)]
    assert (state.replicas, sorted(state.isr)) == ((1, 2), [1, 2])  # the new replica in sync
    after = await read_all(cluster, topic, 1)
    assert after == before
    status = await yak(cluster, tmp_path, "partitions", "reassign", "--status")
    assert "no reassignment running" in status.stdout


async def test_generate_prints_a_plan_onto_a_broker_list(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    topic = unique("gen")
    await create(cluster, topic, 4, 2)
    await until(metadata, in_sync(topic))
    generated = await yak(cluster, tmp_path, "partitions", "reassign", "--generate",
                          "--topic", topic, "--brokers", "0,1")  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    plan = json.loads(generated.stdout)
    current = {(s.partition): set(s.replicas) for s in metadata.snapshot.partitions_of(topic)}
    assert {p["partition"] for p in plan["partitions"]} == {
        p for p, replicas in current.items() if replicas != {0, 1}
    }
    assert all(set(p["replicas"]) == {0, 1} for p in plan["partitions"])


async def test_elect_leaders_restores_the_preferred_leader_after_a_failover(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    topic = unique("elect")
    await create(cluster, topic, 1, 3)
    snapshot = await until(metadata, in_sync(topic))
    preferred = snapshot.partitions[(topic, 0)].replicas[0]
    assert snapshot.partitions[(topic, 0)].leader == preferred

    cluster.kill(preferred)
    await until(metadata, lambda s: s.partitions[(topic, 0)].leader not in (preferred, -1))
    await asyncio.to_thread(cluster.start_broker, preferred)
    snapshot = await until(metadata, in_sync(topic))  # back in the ISR, still not leading
    assert snapshot.partitions[(topic, 0)].leader != preferred

    elected = await yak(cluster, tmp_path, "partitions", "elect-leaders", "--topic", topic,
                        "--partition", "0")  # fmt: skip
    assert elected.returncode == 0, elected.stdout + elected.stderr
    assert "elected the preferred leader of 1 partitions" in elected.stdout
    state = metadata.snapshot.partitions[(topic, 0)]
    assert state.leader == preferred
    again = await yak(cluster, tmp_path, "partitions", "elect-leaders")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already the preferred leader" in again.stdout


async def test_group_offsets_export_then_import_into_a_new_group(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    topic, group, copy = unique("offs"), unique("g"), unique("g-copy")
    await create(cluster, topic, 3, 2)
    await until(metadata, in_sync(topic))
    await produce(cluster, topic, 30, 3)
    committed = {
        TopicPartition(topic, 0): 4,
        TopicPartition(topic, 1): 7,
        TopicPartition(topic, 2): 10,
    }
    async with AsyncConsumer(
        cluster.proxy_url(0), group, [topic], auto_offset_reset="earliest"
    ) as consumer:
        while len(consumer.assignment()) < 3:
            await consumer.poll(500)
        await consumer.commit(committed)

    exported = await yak(cluster, tmp_path, "groups", "offsets", "export", group,
                         "--out", str(tmp_path / "offsets.json"))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    document = json.loads((tmp_path / "offsets.json").read_text())
    assert document["group"] == group
    assert {(o["partition"], o["offset"]) for o in document["offsets"]} == {(0, 4), (1, 7), (2, 10)}

    # Refused while the target group has an active member, as Kafka does.
    async with AsyncConsumer(cluster.proxy_url(0), copy, [topic]) as member:
        await member.start()
        refused = await yak(cluster, tmp_path, "groups", "offsets", "import", copy,
                            str(tmp_path / "offsets.json"))  # fmt: skip
        assert refused.returncode == 1
        assert "NON_EMPTY_GROUP" in refused.stderr
    imported = await yak(cluster, tmp_path, "groups", "offsets", "import", copy,
                         str(tmp_path / "offsets.json"))  # fmt: skip
    assert imported.returncode == 0, imported.stdout + imported.stderr
    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        described = await admin.describe_group(copy)
    assert {(p.partition, p.committed_offset) for p in described.partitions} == {
        (0, 4), (1, 7), (2, 10),
    }  # fmt: skip

    # An offset past a partition's end is moved to the end (10 records each), as Kafka does.
    document["offsets"] = [{"topic": topic, "partition": 0, "offset": 1_000}]
    (tmp_path / "far.json").write_text(json.dumps(document))
    preview = await yak(cluster, tmp_path, "groups", "offsets", "import", unique("g-far"),
                        str(tmp_path / "far.json"), "--dry-run")  # fmt: skip
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "1000 is outside the log" in preview.stdout
    assert "dry run: nothing changed" in preview.stdout


async def test_dump_and_restore_a_topic_record_by_record(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    topic, restored = unique("dump"), unique("restored")
    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        await admin.create_topic(
            topic, partitions=3, replication_factor=2, configs={"retention.ms": "86400000000"}
        )
    await until(metadata, in_sync(topic))
    await produce(cluster, topic, 120, 3)
    dumped = await yak(cluster, tmp_path, "topics", "dump", topic, "--out", str(tmp_path / "d"))
    assert dumped.returncode == 0, dumped.stderr
    assert "dumped 120 records" in dumped.stdout
    back = await yak(cluster, tmp_path, "topics", "restore", str(tmp_path / "d"),
                     "--topic", restored)  # fmt: skip
    assert back.returncode == 0, back.stdout + back.stderr
    assert "restored 120 records" in back.stdout

    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        original, copy = await admin.describe_topic(topic), await admin.describe_topic(restored)
    assert (copy.partition_count, copy.replication_factor, copy.configs) == (
        original.partition_count,
        original.replication_factor,
        original.configs,
    )
    source, target = await read_all(cluster, topic, 3), await read_all(cluster, restored, 3)
    assert len(target) == len(source) == 120

    def comparable(r: ConsumerRecord) -> tuple[object, ...]:
        return (r.partition, r.offset, r.key, r.value, r.headers, r.timestamp)

    assert [comparable(r) for r in target] == [comparable(r) for r in source]
    assert any(r.key is None for r in source)
    assert any(r.value is None for r in source)
    assert any(r.headers for r in source)


async def test_a_broker_on_an_empty_data_folder_fetches_its_replicas_back(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    """Replacing a failed disk (docs/operations.md): kill -9, wait until the controller took
    the broker out of the ISRs, empty its folder, start it: it copies every replica back
    from the leaders and rejoins the ISR."""
    topic, victim = unique("disk"), 3
    await create(cluster, topic, 4, 3)
    await until(metadata, in_sync(topic))
    await produce(cluster, topic, 80, 4)
    hosted = [s.partition for s in metadata.snapshot.partitions_of(topic) if victim in s.replicas]
    assert hosted

    cluster.kill(victim)
    await until(
        metadata,
        lambda s: (
            victim not in s.brokers and all(victim not in p.isr for p in s.partitions_of(topic))
        ),
    )
    folder = cluster.folder / f"broker-{victim}"
    await asyncio.to_thread(shutil.rmtree, folder)
    await asyncio.to_thread(cluster.start_broker, victim)
    await until(metadata, in_sync(topic))

    async with AsyncAdmin(cluster.proxy_url(0)) as admin:
        dirs = {b.broker_id: b for b in (await admin.log_dirs([topic])).brokers}
    copies = {r.partition: r for r in dirs[victim].replicas}
    assert sorted(copies) == hosted
    for partition in hosted:
        leader = metadata.snapshot.partitions[(topic, partition)].leader
        (led,) = [r for r in dirs[leader].replicas if r.partition == partition]
        assert copies[partition].log_end_offset == led.log_end_offset == 20
    assert (folder / "meta.properties").exists()


async def test_decommission_drains_broker_2_and_it_can_stop_with_nothing_under_replicated(
    cluster: LocalCluster, metadata: MetadataCache, tmp_path: Path
) -> None:
    topic = unique("drain")
    await create(cluster, topic, 6, 3)
    await until(metadata, in_sync(topic))
    await produce(cluster, topic, 90, 6)
    before = await read_all(cluster, topic, 6)
    assert any(2 in s.replicas for s in metadata.snapshot.partitions.values())

    drained = await yak(cluster, tmp_path, "brokers", "decommission", "2", "--wait",
                        "--timeout", "90")  # fmt: skip
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert "done: safe to stop" in drained.stdout

    def settled(snapshot: ClusterSnapshot) -> bool:
        return all(
            2 not in s.replicas and not s.reassigning and sorted(s.isr) == sorted(s.replicas)
            for s in snapshot.partitions.values()
        )

    snapshot = await until(metadata, settled)
    for state in snapshot.partitions.values():
        record = snapshot.topics[state.topic]
        assert len(state.replicas) == record.replication_factor
        assert state.leader != 2
    status = await yak(cluster, tmp_path, "cluster", "status")
    assert "under-replicated: 0" in status.stdout, status.stdout
    assert await read_all(cluster, topic, 6) == before

    # The broker stops; nothing becomes under-replicated or offline.
    cluster.brokers[2].popen.terminate()
    await asyncio.to_thread(cluster.brokers[2].popen.wait, 30)
    await until(metadata, lambda s: 2 not in s.brokers)
    status = await yak(cluster, tmp_path, "cluster", "status")
    assert "offline: 0  under-replicated: 0" in status.stdout, status.stdout
    listed = await yak(cluster, tmp_path, "brokers", "decommission", "--status")
    assert "done: safe to stop" in listed.stdout
    back = await yak(cluster, tmp_path, "brokers", "recommission", "2")
    assert back.returncode == 0, back.stderr
    assert (
        "no broker is being decommissioned"
        in (await yak(cluster, tmp_path, "brokers", "decommission", "--status")).stdout
    )
