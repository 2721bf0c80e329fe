"""ShareFetch and ShareAcknowledge served at the partitions' leader (``kafka_share`` values in,
values out; the internal listener decodes and encodes).

Per partition of a request, in its own entry of the answer: an unknown topic id is
``UNKNOWN_TOPIC_OR_PARTITION`` (Kafka's ``UNKNOWN_TOPIC_ID`` has no Yak error of its own), a
share group that does not exist or is being deleted ``GROUP_ID_NOT_FOUND``, a partition led
elsewhere ``NOT_LEADER_OR_FOLLOWER`` with the current leader and epoch, a failed save the
save's error. A filter that does not compile fails the whole request (``INVALID_FILTER``,
raised before anything is applied).

ShareFetch applies each partition's acknowledgements (once, before its first acquisition),
then acquires from every partition concurrently — their snapshots share the saves — with
``max_records`` split between them; in the ``batch_optimized`` acquire mode each partition's
acquisition goes on to the end of the last batch it answers (so up to a batch per partition
more than ``max_records``, as in Kafka). With nothing acquired and no error it long-polls up to
``max_wait_ms`` (bounded by the broker's limit) on the leader's fetch waiters: an append that
moves a high watermark, a release, an expired lock, a due delayed record or a lost leadership
wakes it (``FetchWaiters.notify``), never a polling loop.

Acknowledge types: Kafka's numbers are the machine's (``AcknowledgeType``); ``GAP`` (offsets
that hold no record) changes nothing. A batch with one type per offset is split into runs.
A partition may carry any number of batches; each is applied whole or refused, in order, and
the answer names the partition's first refusal as its (acknowledgement) error and lists the
refused batches by their index in the request (``kafka_share.YAK_ACK_REFUSED_TAG``; a batch
with one type per offset is listed when any of its runs was refused).
Single event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

from yak.errors import UnknownTopicOrPartitionError, YakError
from yak.filters import RecordFilter, compile_filter
from yak.protocol import kafka_share as ks
from yak.protocol.broker_wire import PartitionError
from yak.types import TopicPartition
from yak_broker.share.share_manager import ShareManager
from yak_broker.share.state.records import AcknowledgementBatch, AcknowledgeType, AcquiredRecord
from yak_broker.share.state_store import SharePartitionKey

__all__ = [
    "acknowledgement_batches",
    "acquired_ranges",
    "serve_share_acknowledge",
    "serve_share_fetch",
]


class _Acks(NamedTuple):
    """A partition's acknowledgements as the machine takes them, and for each the index of
    the request's batch it came from."""

    batches: list[AcknowledgementBatch]
    sources: list[int]

    def refused(
        self, results: Sequence[YakError | None]
    ) -> tuple[PartitionError | None, tuple[int, ...]]:
        """The first refusal, and the request's batches that had one (ascending)."""
        first = next((r for r in results if r is not None), None)
        indices = sorted({self.sources[i] for i, r in enumerate(results) if r is not None})
        return (PartitionError.of(first) if first is not None else None), tuple(indices)


def _machine_acks(acks: Sequence[ks.AckBatch]) -> _Acks:
    out = _Acks([], [])
    for index, batch in enumerate(acks):
        if len(batch.types) == 1:
            runs = [(batch.first_offset, batch.last_offset, batch.types[0])]
        else:
            runs = []
            for offset, kind in enumerate(batch.types, batch.first_offset):
                if runs and runs[-1][2] == kind:
                    runs[-1] = (runs[-1][0], offset, kind)
                else:
                    runs.append((offset, offset, kind))
        for first, last, kind in runs:
            if kind != ks.AckType.GAP:
                out.batches.append(AcknowledgementBatch(first, last, AcknowledgeType(kind)))
                out.sources.append(index)
    return out


def acknowledgement_batches(acks: Sequence[ks.AckBatch]) -> list[AcknowledgementBatch]:
    """The machine's batches of a request's (see the module doc)."""
    return _machine_acks(acks).batches


def acquired_ranges(acquired: Sequence[AcquiredRecord]) -> tuple[ks.AcquiredRecords, ...]:
    """Consecutive offsets with one delivery count as one range."""
    ordered = sorted(acquired)
    if not ordered:
        return ()
    low, high = ordered[0].offset, ordered[-1].offset
    counts = set(map(itemgetter(1), ordered))
    if high - low == len(ordered) - 1 and len(counts) == 1:  # one run (a whole batch, say)
        return (ks.AcquiredRecords(low, high, counts.pop()),)
    out: list[ks.AcquiredRecords] = []
    for offset, count in ordered:
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            out[-1] = last._replace(last_offset=offset)
        else:
            out.append(ks.AcquiredRecords(offset, offset, count))
    return tuple(out)


def _leader(error: YakError) -> tuple[int, int]:
    return int(error.details.get("leader", -1)), int(error.details.get("leader_epoch", -1))


def _key(
    manager: ShareManager, group: str, topic_id: uuid.UUID, partition: int
) -> SharePartitionKey:
    topic = manager.topic_ids.name(topic_id)
    if topic is None:
        raise UnknownTopicOrPartitionError(
            f"unknown topic id {topic_id}", topic_id=str(topic_id), partition=partition
        )
    return manager.share_key(group, topic, partition)


async def _fetch_one(
    manager: ShareManager,
    request: ks.ShareFetchRequest,
    wanted: ks.SharePartitionAcks,
    acks: _Acks,
    max_records: int,
    record_filter: RecordFilter | None,
) -> tuple[ks.ShareFetchedPartition, bool]:
    """One partition's answer, and whether it must be answered now."""
    try:
        key = _key(manager, request.group_id, wanted.topic_id, wanted.partition)
        driver = await manager.driver(key)
        got = await driver.acquire(
            request.member_id,
            acks.batches,
            max_records,
            record_filter,
            whole_batches=request.acquire_mode == ks.AcquireMode.BATCH_OPTIMIZED,
        )
    except YakError as exc:
        leader_id, leader_epoch = _leader(exc)
        failed = ks.ShareFetchedPartition(
            wanted.topic_id, wanted.partition, error=PartitionError.of(exc),
            leader_id=leader_id, leader_epoch=leader_epoch,
        )  # fmt: skip
        return failed, True
    ack_error, refused = acks.refused(got.ack_results)
    records = b"".join(got.records) if len(got.records) > 1 else (got.records or [b""])[0]
    answer = ks.ShareFetchedPartition(
        wanted.topic_id, wanted.partition, records, acquired_ranges(got.acquired),
        ack_error=ack_error, leader_id=-1, leader_epoch=driver.leader_epoch, ack_refused=refused,
    )  # fmt: skip
    return answer, bool(got.acquired)


async def serve_share_fetch(
    manager: ShareManager, request: ks.ShareFetchRequest, *, max_wait_limit_ms: int
) -> ks.ShareFetchResponse:
    """Acquire (see the module doc)."""
    record_filter = compile_filter(request.filter) if request.filter is not None else None
    snapshot = manager.snapshot()
    group = snapshot.share_groups.get(request.group_id)
    lock_ms = group.lock_duration_ms if group is not None else 0
    wanted = request.partitions
    per_partition = max(request.max_records // max(len(wanted), 1), 1)
    pending_acks = [_machine_acks(p.acks) for p in wanted]
    ack_errors: dict[int, tuple[PartitionError, tuple[int, ...]]] = {}
    keys = []
    for p in wanted:
        name = manager.topic_ids.name(p.topic_id)
        if name is not None:
            keys.append(TopicPartition(name, p.partition))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(request.max_wait_ms, max_wait_limit_ms) / 1000
    with manager.waiters.watching(keys) as waiter:
        while True:
            waiter.arm()  # before reading: a wake-up after it finds the armed future
            outcomes = await asyncio.gather(
                *(
                    _fetch_one(manager, request, p, acks, per_partition, record_filter)
                    for p, acks in zip(wanted, pending_acks, strict=True)
                )
            )
            for index, (answer, _) in enumerate(outcomes):
                if answer.ack_error is not None:
                    ack_errors[index] = (answer.ack_error, answer.ack_refused)
            pending_acks = [_Acks([], []) for _ in wanted]  # applied once
            remaining = deadline - loop.time()
            if any(now for _, now in outcomes) or remaining <= 0 or not wanted:
                break
            await waiter.wait(remaining)
    partitions = tuple(
        answer._replace(ack_error=ack_errors[index][0], ack_refused=ack_errors[index][1])
        if index in ack_errors
        else answer
        for index, (answer, _) in enumerate(outcomes)
    )
    return ks.ShareFetchResponse(partitions, lock_ms)


async def _acknowledge_one(
    manager: ShareManager, request: ks.ShareAcknowledgeRequest, wanted: ks.SharePartitionAcks
) -> ks.AckResult:
    try:
        key = _key(manager, request.group_id, wanted.topic_id, wanted.partition)
        driver = await manager.driver(key)
        acks = _machine_acks(wanted.acks)
        results = await driver.acknowledge(request.member_id, acks.batches)
    except YakError as exc:
        leader_id, leader_epoch = _leader(exc)
        return ks.AckResult(
            wanted.topic_id, wanted.partition, PartitionError.of(exc), leader_id, leader_epoch
        )
    error, refused = acks.refused(results)
    return ks.AckResult(wanted.topic_id, wanted.partition, error, -1, driver.leader_epoch, refused)


async def serve_share_acknowledge(
    manager: ShareManager, request: ks.ShareAcknowledgeRequest
) -> list[ks.AckResult]:
    """Acknowledge every partition's batches (concurrently: their saves are shared)."""
    return list(
        await asyncio.gather(*(_acknowledge_one(manager, request, p) for p in request.partitions))
    )
