"""Replication under real faults: 3 brokers, RF 3, min.insync.replicas 2, idempotent acks=all
producers at a steady rate; partition leaders are killed with kill -9 again and again (on
different brokers), once while another replica is paused with SIGSTOP. Afterwards every
partition is read from offset 0: each acknowledged record is there exactly once, at the offset
it was acknowledged with, in acknowledged order. Each failover's duration is printed: kill →
the first acknowledged write to that partition, and lease expiry (the registration vanishing
from etcd) → that write.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import pytest

from loadtest.local_cluster import (
    IdempotentProducer,
    LocalCluster,
    RegistrationWatch,
    local_cluster,
    read_partition,
    wait_for,
)
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import InvalidReplicaAssignmentError
from yak.etcd_server import EmbeddedEtcd

pytestmark = pytest.mark.integration

TOPIC = "faults"
PARTITIONS = 3


async def _failover(
    cluster: LocalCluster,
    admin: AdminClient,
    watch: RegistrationWatch,
    producers: list[IdempotentProducer],
    partition: int,
    pause_other: bool,
) -> tuple[float, float]:
    """Kill the partition's leader; seconds from the kill and from the lease expiry until that
    partition acknowledged a write again."""
    described = await wait_for(admin, TOPIC, "full-isr")
    victim = described.partitions[partition].leader
    paused = None
    if pause_other:
        paused = next(r for r in described.partitions[partition].replicas if r != victim)
        cluster.pause(paused)
    acked_before = len(producers[partition].acks)
    killed_at = time.monotonic()
    cluster.kill(victim)
    if paused is not None:
        await asyncio.sleep(1.0)
        cluster.resume(paused)
    deadline = killed_at + 30
    while len(producers[partition].acks) == acked_before:
        assert time.monotonic() < deadline, f"partition {partition} never recovered"
        await asyncio.sleep(0.02)
    acked_at = producers[partition].acks[acked_before].acked_at
    expired_at = watch.expired_after(victim, killed_at)
    # Restarted off the event loop (the supervisor waits for readiness): producers keep going.
    await asyncio.to_thread(cluster.start_broker, victim)  # rejoins, truncates, catches up
    return acked_at - killed_at, acked_at - (expired_at if expired_at is not None else acked_at)


async def test_kill_leaders_repeatedly_loses_no_acknowledged_record(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    cluster_id = f"rf-{uuid.uuid4().hex[:10]}"
    with local_cluster(tmp_path, etcd, cluster_id) as cluster:
        async with (
            AdminClient(cluster.coordinator_url) as admin,
            RegistrationWatch(cluster) as watch,
        ):
            await admin.create_topic(
                TOPIC,
                partitions=PARTITIONS,
                replication_factor=3,
                configs={"min.insync.replicas": "2"},
            )
            await wait_for(admin, TOPIC, "full-isr")
            producers = [
                IdempotentProducer(cluster, admin, TOPIC, p, producer_id=7_000 + p)
                for p in range(PARTITIONS)
            ]
            stop = asyncio.Event()
            tasks = [asyncio.create_task(p.run(stop, interval_s=0.02)) for p in producers]
            try:
                await asyncio.sleep(1.0)
                durations = []
                for round_ in range(4):
                    durations.append(
                        await _failover(
                            cluster, admin, watch, producers, round_ % PARTITIONS, round_ == 2
                        )
                    )
                    await asyncio.sleep(0.5)
                await wait_for(admin, TOPIC, "full-isr")
                await asyncio.sleep(0.5)
            finally:
                stop.set()
                await asyncio.gather(*tasks)
            print("failover s, kill -> next acknowledged write:", [d for d, _ in durations])
            print("failover s, lease expiry -> that write:", [e for _, e in durations])
            print("retries:", [p.retries for p in producers], [p.errors for p in producers])

            described = await wait_for(admin, TOPIC, "full-isr")
            for producer, partition in zip(producers, described.partitions, strict=True):
                assert len(producer.acks) > 20
                async with BrokerClient(cluster.broker_url(partition.leader)) as client:
                    stored = await read_partition(client, TOPIC, partition.partition)
                values = [value for _, value in stored]
                assert len(values) == len(set(values)), "a record was stored twice"
                position = {value: offset for offset, value in stored}
                for ack in producer.acks:
                    assert position.get(ack.value) == ack.offset, (
                        f"acknowledged {ack.value!r} at {ack.offset}, "
                        f"stored at {position.get(ack.value)}"
                    )
                offsets = [ack.offset for ack in producer.acks]
                assert offsets == sorted(offsets)
            for producer in producers:
                await producer.aclose()
            assert all(d < 4 * cluster.lease_ttl_s for d, _ in durations), durations


async def test_sigterm_moves_leadership_before_the_broker_exits(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    """Controlled shutdown: the leader hands its partitions to in-sync replicas, then exits;
    a producer keeps writing with acks=all through it."""
    cluster_id = f"cs-{uuid.uuid4().hex[:10]}"
    with local_cluster(tmp_path, etcd, cluster_id) as cluster:
        async with AdminClient(cluster.coordinator_url) as admin:
            await admin.create_topic(
                "handover", partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
            )
            before = await wait_for(admin, "handover", "full-isr")
            victim = before.partitions[0].leader
            led = [p.partition for p in before.partitions if p.leader == victim]
            producer = IdempotentProducer(cluster, admin, "handover", 0, producer_id=4_242)
            await producer.send_one()

            process = cluster.brokers[victim]
            process.popen.send_signal(signal.SIGTERM)
            exit_code = await asyncio.to_thread(process.popen.wait, 30)
            assert exit_code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
            log = (tmp_path / "logs" / f"broker-{victim}.log").read_text()
            assert "controlled shutdown: no partition left to move" in log

            after = await admin.describe_topic("handover")
            for partition in led:
                state, old = after.partitions[partition], before.partitions[partition]
                assert state.leader not in (victim, -1)
                assert state.leader_epoch > old.leader_epoch
            started = time.monotonic()
            await producer.send_one()  # the new leader takes acks=all writes at once
            assert time.monotonic() - started < cluster.lease_ttl_s
            await producer.aclose()


async def test_reassignment_moves_a_partition_to_other_brokers_with_its_data(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    """RF 1 on one broker → reassigned to the two others: they copy the log, join the ISR,
    the move completes (leadership included) and the old broker deletes its copy."""
    cluster_id = f"ra-{uuid.uuid4().hex[:10]}"
    with local_cluster(tmp_path, etcd, cluster_id) as cluster:
        async with AdminClient(cluster.coordinator_url) as admin:
            created = await admin.create_topic("moving", partitions=1, replication_factor=1)
            source = created.partitions[0].leader
            producer = IdempotentProducer(cluster, admin, "moving", 0, producer_id=5_151)
            for _ in range(20):
                await producer.send_one()
            target = [b for b in range(3) if b != source]
            started = await admin.reassign_partition("moving", 0, target)
            assert (started.adding_replicas, started.removing_replicas) == (target, [source])
            assert [p.partition for p in (await admin.reassignments()).reassignments] == [0]

            deadline = time.monotonic() + 30
            while True:
                state = (await admin.describe_topic("moving")).partitions[0]
                if not state.adding_replicas and not state.removing_replicas:
                    break
                assert time.monotonic() < deadline, f"reassignment stuck: {state}"
                await asyncio.sleep(0.1)
            assert (state.replicas, sorted(state.isr)) == (target, sorted(target))
            assert state.leader == target[0]
            assert (await admin.reassignments()).reassignments == []

            async with BrokerClient(cluster.broker_url(state.leader)) as client:
                stored = await read_partition(client, "moving", 0)
            assert [value for _, value in stored] == [ack.value for ack in producer.acks]
            await producer.send_one()  # the new leader takes writes
            old_copy = tmp_path / f"broker-{source}" / "moving-0"
            deadline = time.monotonic() + 10
            while old_copy.exists():
                assert time.monotonic() < deadline, "the old replica was not deleted"
                await asyncio.sleep(0.1)
            await producer.aclose()

            with pytest.raises(InvalidReplicaAssignmentError):
                await admin.reassign_partition("moving", 0, [0, 0])
            with pytest.raises(InvalidReplicaAssignmentError):
                await admin.reassign_partition("moving", 0, [7])
