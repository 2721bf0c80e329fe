"""Read the partitions a fetch names: whole batches, byte limits, per-partition errors.

Limits, as Kafka applies them: each partition returns at most its ``max_bytes`` and the
response at most the request's ``max_bytes``, except that the first partition with data returns
at least one whole batch even if it is larger (so a consumer never gets stuck behind a big
batch). Partitions after the limit is reached come back empty, without error.

Isolation: a consumer (``replica_id == -1``) reads below the high watermark; a follower
(``replica_id >= 0``) reads up to the log end offset, and its fetch offset — its own log end
offset — is first reported to the partition's ``LeaderPartition`` (follower progress, high
watermark, ISR expansion). The last stable offset equals the high watermark (no transactions).

Fencing: a partition asked with a ``current_leader_epoch`` other than the leader's is refused
(``FENCED_LEADER_EPOCH`` if older, ``UNKNOWN_LEADER_EPOCH`` if newer). ``OFFSET_OUT_OF_RANGE``
still carries the log start offset and high watermark, so a follower can reset.

Each partition's failure (unknown, not leader, offset out of range) is reported in its own
entry; the others are still read. A partition whose leadership here the metadata names but
the broker has not installed yet (``ReplicaNotReadyError``: a topic just created, a new leader
epoch) is, for a consumer, no failure but no data yet: answered empty, with the offsets of
its log (0 for a log yet to be created), so the long poll waits — woken when the replica is
installed — and answers empty at its deadline; a leader's start-up is never handed to the
client. A follower is told, as before.

A read that fails with ``EIO`` answers that partition ``KAFKA_STORAGE_ERROR`` (retriable) and
takes the data folder offline (``storage.log_dir_failure``), as a failed write does.

A read that meets a damaged batch in a sealed segment (bit rot: ``storage.damaged_batch``)
answers that partition ``KAFKA_STORAGE_ERROR`` (retriable) and never the damaged bytes; the
replica manager moves the leadership away and repairs the copy (``report_damage``), so the
reader's retry goes to the new leader (``NOT_LEADER_OR_FOLLOWER`` from here meanwhile).

``read_partitions`` is synchronous: one pass over the logs, no await. ``serve_fetch`` is a
whole fetch as either transport serves it (HTTP ``/v1/fetch``, the internal listener's Fetch):
counted, long-polled (``delayed_fetch``) on the waiters of its kind, its bytes added to the
topic counters.
"""

from __future__ import annotations

from collections.abc import Sequence

from yak.errors import OffsetOutOfRangeError, YakError
from yak.protocol.broker_wire import FetchedPartition, FetchRequest, PartitionError
from yak.types import TopicPartition
from yak_broker.replication.delayed_fetch import delayed_fetch
from yak_broker.replication.replica_manager import ReplicaManager, ReplicaNotReadyError
from yak_broker.replication.state.fetch_metadata import SessionClock
from yak_broker.storage.damaged_batch import DamagedBatchError
from yak_broker.storage.log import FetchIsolation

__all__ = ["read_partitions", "response_bytes", "serve_fetch"]

_EMPTY = memoryview(b"")


def read_partitions(
    request: FetchRequest, replicas: ReplicaManager, session: SessionClock | None = None
) -> list[FetchedPartition]:
    """One read of every partition of ``request`` (see the module doc); ``session``: the
    follower's incremental fetch session it is read for."""
    follower = request.replica_id >= 0
    isolation = FetchIsolation.LOG_END if follower else FetchIsolation.HIGH_WATERMARK
    remaining = request.max_bytes
    result: list[FetchedPartition] = []
    for wanted in request.partitions:
        tp = TopicPartition(wanted.topic, wanted.partition)
        log = None
        try:
            replica, leader = replicas.leader_partition(tp)
            leader.check_epoch(wanted.current_leader_epoch)
            log = replica.log
            if follower:
                replicas.on_follower_fetch(
                    replica,
                    request.replica_id,
                    wanted.offset,
                    session,
                    log_dir_id=request.replica_log_dir_id,
                )
            records = _EMPTY
            hw, start = log.high_watermark, log.log_start_offset
            if remaining > 0:
                limit = min(wanted.max_bytes, remaining)
                data = log.read(wanted.offset, limit, isolation)
                hw, start = data.high_watermark, data.log_start_offset
                if len(data.records) <= limit or remaining == request.max_bytes:
                    records = data.records  # over the limit only as the response's first data
                    remaining -= len(records)
            result.append(FetchedPartition(tp.topic, tp.partition, hw, hw, start, records))
        except OffsetOutOfRangeError as exc:
            error = PartitionError.of(exc)
            hw, start = (log.high_watermark, log.log_start_offset) if log else (-1, -1)
            result.append(
                FetchedPartition(tp.topic, tp.partition, hw, hw, start, _EMPTY, error=error)
            )
        except OSError as exc:  # EIO: the folder failed (``storage.log_dir_failure``)
            error = PartitionError.of(replicas.log_dir_failures.fail(exc, tp.dir_name))
            result.append(FetchedPartition(tp.topic, tp.partition, error=error))
        except DamagedBatchError as exc:  # bit rot: never served; the replica is repaired
            replicas.report_damage(tp, exc.details["offset"])
            result.append(FetchedPartition(tp.topic, tp.partition, error=PartitionError.of(exc)))
        except YakError as exc:
            if isinstance(exc, ReplicaNotReadyError) and not follower:
                result.append(_no_data_yet(tp, exc))
                continue
            error = PartitionError.of(exc)
            result.append(FetchedPartition(tp.topic, tp.partition, error=error))
    return result


def _no_data_yet(tp: TopicPartition, refused: ReplicaNotReadyError) -> FetchedPartition:
    """A consumer's answer for a partition whose leadership here is not installed yet: empty,
    with its log's offsets (0: a log yet to be created)."""
    log = refused.log
    hw, start = (log.high_watermark, log.log_start_offset) if log is not None else (0, 0)
    return FetchedPartition(tp.topic, tp.partition, hw, hw, start)


def response_bytes(partitions: list[FetchedPartition]) -> int:
    """Record bytes in a fetch result."""
    return sum(len(memoryview(p.records)) for p in partitions)


async def serve_fetch(
    request: FetchRequest, replicas: ReplicaManager, *, max_wait_limit_ms: int
) -> Sequence[FetchedPartition]:
    """A consumer's or a follower's fetch, whichever transport it came by (see the module doc)."""
    stats = replicas.stats
    follower = request.replica_id >= 0
    (stats.replica_fetch_requests if follower else stats.fetch_requests).inc()
    partitions = await delayed_fetch(
        request,
        lambda r: read_partitions(r, replicas),
        replicas.replica_waiters if follower else replicas.waiters,
        max_wait_limit_ms=max_wait_limit_ms,
        stages=stats.replica_fetch_stages if follower else stats.fetch_stages,
    )
    for fetched in partitions:
        stats.on_fetch(fetched.topic, fetched.records, follower=follower)
    return partitions
