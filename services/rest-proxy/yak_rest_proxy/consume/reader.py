"""Reading partitions through their leaders: fetches, offsets, and the retries they need.

``fetch`` long-polls several partitions that may sit on different leaders: one fetch per leader
broker, run concurrently, each waiting up to ``max_wait_ms`` (the broker wakes it on append, so
no polling here), and the answer comes as soon as the first leader returns data. A partition
whose leader moved (``NOT_LEADER_OR_FOLLOWER``, no leader, a broker that cannot be reached) is
reported with its error so the caller can retry it after the metadata changed; records come
back decoded, from the asked offset on (a batch may start below it), at most ``max_bytes``
beyond the first record.

With ``raw`` a fetch hands out the brokers' record batches undecoded (``PartitionRead.batches``,
what a member's binary poll answers): whole batches only, a trailing one cut off by the
broker's byte limit dropped (fetched whole next time), batches wholly below the asked offset
stepped over, at least one batch and then up to ``max_bytes`` of batch bytes; only the batch
headers are read, to find where the next read starts (base offset + lastOffsetDelta + 1 of the
last batch kept). Records below the asked offset in the first batch are the client's to skip.

A consumer's poll hands out finished fetches oldest first while their records fit its
``max_bytes``; one that would overflow stays parked for the consumer's next poll (Kafka's
consumer keeps completed fetches so) instead of being decoded, cut and fetched again.

With a ``record_filter`` (``yak.filters``) a fetch decodes, then keeps only the records the
filter lets through, and ``next_offset`` is past every record it *scanned*, matching or not,
so a filter never stalls a reader. A fetch whose leader answered only records the filter
dropped counts as empty: while the wait lasts, the next fetch of that leader starts from where
the scan ended (it keeps scanning, advancing), and when the wait is over the partition is
reported with no records and the advanced ``next_offset``. A filtered fetch is never ``raw``
(the brokers' batches cannot be filtered without decoding them), and a parked fetch is taken
over only by a poll asking the same filter.

Each ``fetch`` observes two poll stages once (``metrics.PollStats``): ``decode``, the decoding
of the batches it hands out (a fetch taken over from an earlier poll was decoded then), and
``fetch``, the rest of its time: waiting for the brokers.
"""

from __future__ import annotations

import asyncio
import struct
import time
import weakref
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import NamedTuple

from yak.clients.broker import BrokerClient
from yak.clock import Clock, SystemClock
from yak.errors import InvalidRequestError, YakError
from yak.filters import RecordFilter, compile_filter
from yak.metadata.cache import MetadataCache
from yak.protocol.broker_models import OffsetResult
from yak.protocol.broker_wire import Buffer, FetchPartition, FetchRequest
from yak.record import Record, iter_records
from yak.record.batch_header import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, validate_batch
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.brokers import BrokerPool, leader_of
from yak_rest_proxy.metrics import PollStats
from yak_rest_proxy.security.access import require

__all__ = ["FILTER_DOC", "PartitionRead", "Reader", "filter_param", "whole_batches"]

#: Beyond its max wait, how long a poll waits for a fetch's answer to travel back.
_WAIT_MARGIN_S = 2.0
#: Partitions named in one ListOffsets request (their query string stays a few kB).
_OFFSETS_PER_REQUEST = 200
#: How long an answered fetch that no poll took over is kept for its owner.
_KEEP_ANSWER_S = 30.0
_NONE: tuple[None, None] = (None, None)

#: What a parked fetch was asked: raw or decoded, its filter's text, its (topic, partition,
#: offset) triples sorted; only a poll asking the same takes it over.
_Signature = tuple[bool, str | None, tuple[tuple[str, int, int], ...]]


#: What the ``filter`` query parameter of every consume route says (docs/filters.md).
FILTER_DOC = (
    "Only records this expression lets through (docs/filters.md); the others are skipped "
    "but still advance the position."
)


def filter_param(text: str | None) -> RecordFilter | None:
    """A route's ``filter`` parameter compiled (cached by text), None when absent; raises
    ``InvalidFilterError`` / ``FilterTooLargeError`` (400) before anything is fetched."""
    return None if text is None else compile_filter(text)


class PartitionRead(NamedTuple):
    """What one partition gave: records from the asked offset (or, read ``raw``, its whole
    batches), the offsets, or an error."""

    topic: str
    partition: int
    records: list[Record]
    next_offset: int
    high_watermark: int = -1
    log_start_offset: int = -1
    error: YakError | None = None
    #: Bytes of the records' keys and values, or of the batches read raw (-1: not counted).
    size: int = -1
    #: Read ``raw``: whole record batches as the broker stored them (``whole_batches``).
    batches: Buffer = b""

    @property
    def has_data(self) -> bool:
        """Whether it gave records (or batches, read raw)."""
        return bool(self.records) or len(self.batches) > 0


class _Answer(NamedTuple):
    """One broker's fetch: its partitions' reads, the time their decoding took, the bytes of
    their records (keys and values) and when it was answered (``time.perf_counter``)."""

    reads: list[PartitionRead]
    decode_s: float = 0.0
    size: int = 0
    answered: float = 0.0


class Reader:
    """Fetches and offset look-ups for the proxy's consumers and the stateless read API.

    ``stats`` holds every poll stage of the proxy (``metrics.PollStats``): the reader observes
    ``fetch`` and ``decode``; the group polls built on it observe their ``reconcile``,
    ``render`` and ``save`` there too."""

    def __init__(
        self,
        cache: MetadataCache,
        brokers: BrokerPool,
        stats: PollStats | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._cache = cache
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._brokers = brokers
        self.stats = stats if stats is not None else PollStats()
        #: Per (consumer, broker): the fetch still running or answered but not handed out.
        self._parked: dict[tuple[str, int], tuple[_Signature, asyncio.Future[_Answer]]] = {}

    async def fetch(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int = 1,
        owner: str | None = None,
        raw: bool = False,
        record_filter: RecordFilter | None = None,
    ) -> list[PartitionRead]:
        """Read ``(topic, partition, offset)`` triples; one ``PartitionRead`` each (a partition
        whose leader did not answer within the wait is left out: read it again next time).

        ``owner`` (a consumer) lets a fetch outlive the poll that started it: when one leader
        answers first, the fetches still parked at the others are kept, and the owner's next
        poll asking the same partitions at the same offsets takes them over — their records
        then come at once (Kafka's consumer prefetches so). Nothing is ever cancelled, so no
        connection is torn down mid-answer, and one consumer parks at most one fetch per
        broker.
        With security on, every topic read needs READ (``TOPIC_AUTHORIZATION_FAILED`` before
        anything is fetched): a consumer's topics are checked as it reads them, as Kafka does.
        ``raw``: batches undecoded (see the module docstring); a parked fetch is taken over
        only by a poll asking the same form. ``record_filter``: only the records it lets
        through, positions past every record scanned (see the module docstring).
        """
        if raw and record_filter is not None:
            raise InvalidRequestError("a filtered read cannot be raw: the filter decodes records")
        started = time.perf_counter()
        require(ResourceType.TOPIC, (topic for topic, _, _ in positions), Operation.READ)
        by_broker: dict[int, list[tuple[str, int, int]]] = {}
        failed: list[PartitionRead] = []
        snapshot = self._cache.snapshot
        for topic, partition, offset in positions:
            try:
                broker = leader_of(snapshot, topic, partition)
            except YakError as exc:
                failed.append(PartitionRead(topic, partition, [], offset, error=exc))
                continue
            by_broker.setdefault(broker.broker_id, []).append((topic, partition, offset))
        if not by_broker:
            return failed
        now = self._clock.monotonic
        deadline = now() + max_wait_ms / 1000
        text = record_filter.text if record_filter is not None else None
        tasks: dict[int, asyncio.Future[_Answer]] = {}
        fresh: set[asyncio.Future[_Answer]] = set()
        #: Per broker, a filtered answer that only advanced (no record matched) and was
        #: superseded by a fetch from where it ended: reported if that one does not answer.
        scanned: dict[int, _Answer] = {}

        def start(broker_id: int, wait_ms: int) -> None:
            group = by_broker[broker_id]
            tasks[broker_id] = self._start(
                owner, broker_id, group, wait_ms, max_bytes, min_bytes, raw, record_filter
            )
            fresh.add(tasks[broker_id])

        for broker_id, group in by_broker.items():
            parked = self._parked.get((owner, broker_id)) if owner is not None else None
            if parked is not None and parked[0] == (raw, text, tuple(sorted(group))):
                tasks[broker_id] = parked[1]
            else:
                start(broker_id, max_wait_ms)
        while True:
            finished = [t for t in tasks.values() if t.done()]
            if any(r.has_data for t in finished for r in t.result().reads):
                break  # records: answer now
            remaining = deadline - now()
            if remaining > 0.001:
                for broker_id, task in list(tasks.items()):
                    # A fetch that ran out empty before this poll's wait did: park a new one,
                    # from where a filtered one's scan ended.
                    if task.done() and not any(r.error for r in task.result().reads):
                        if _advance(by_broker, broker_id, task.result().reads):
                            scanned[broker_id] = task.result()
                        start(broker_id, int(remaining * 1000))
            pending = [t for t in tasks.values() if not t.done()]
            started_here = [t for t in pending if t in fresh]
            if not pending or (remaining <= 0 and not started_here):
                break
            # A fetch started here answers a little after its max wait at the broker.
            margin = _WAIT_MARGIN_S if started_here else 0.0
            await asyncio.wait(
                pending, timeout=max(remaining, 0.0) + margin, return_when=asyncio.FIRST_COMPLETED
            )
            if now() >= deadline + margin:
                break
        reads = list(failed)
        decode_s = decoded_here_s = 0.0
        handed = 0
        answered = sorted(
            (task.result().answered, broker_id) for broker_id, task in tasks.items() if task.done()
        )
        for broker_id in by_broker.keys() - {b for _, b in answered}:
            if broker_id in scanned:  # still fetching past a scan: report how far it got
                reads.extend(scanned[broker_id].reads)
        for _, broker_id in answered:
            task = tasks[broker_id]
            result = task.result()
            key = (owner, broker_id) if owner is not None else None
            parked_here = key is not None and self._parked.get(key, _NONE)[1] is task
            if parked_here and handed and handed + result.size > max_bytes:
                continue  # would overflow this poll: kept for the owner's next one
            handed += result.size
            reads.extend(result.reads)
            decode_s += result.decode_s
            if task in fresh:
                decoded_here_s += result.decode_s
            if key is not None and parked_here:
                del self._parked[key]  # its records are handed out now
        self.stats.fetch.observe(time.perf_counter() - started - decoded_here_s)
        self.stats.decode.observe(decode_s)
        return reads

    def _start(
        self,
        owner: str | None,
        broker_id: int,
        group: list[tuple[str, int, int]],
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int,
        raw: bool,
        record_filter: RecordFilter | None = None,
    ) -> asyncio.Future[_Answer]:
        task: asyncio.Future[_Answer] = asyncio.ensure_future(
            self._fetch_from(
                broker_id, group, max_wait_ms, max_bytes, min_bytes, raw, record_filter
            )
        )
        if owner is not None:
            text = record_filter.text if record_filter is not None else None
            self._park(owner, broker_id, (raw, text, tuple(sorted(group))), task)
        return task

    def _park(
        self,
        owner: str,
        broker_id: int,
        signature: _Signature,
        task: asyncio.Future[_Answer],
    ) -> None:
        key = (owner, broker_id)
        self._parked[key] = (signature, task)

        # The timer refers to the fetch weakly: a strong reference would keep every answer
        # (its decoded records) alive for _KEEP_ANSWER_S after its poll had handed them out —
        # ~1 GB resident with four consumer groups draining at full speed.
        parked = weakref.ref(task)

        def forget(_task: asyncio.Future[_Answer]) -> None:
            # A finished fetch nobody took over is dropped a while later (its owner moved on,
            # or polls through another proxy).
            def drop() -> None:
                current = self._parked.get(key)
                if current is not None and current[1] is parked():
                    del self._parked[key]

            asyncio.get_running_loop().call_later(_KEEP_ANSWER_S, drop)

        task.add_done_callback(forget)

    async def _fetch_from(
        self,
        broker_id: int,
        group: list[tuple[str, int, int]],
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int,
        raw: bool = False,
        record_filter: RecordFilter | None = None,
    ) -> _Answer:
        broker = self._cache.snapshot.brokers.get(broker_id)
        offsets = {(t, p): o for t, p, o in group}
        try:
            if broker is None:
                raise YakError(f"broker {broker_id} is gone")
            request = FetchRequest(
                tuple(FetchPartition(t, p, o, max_bytes) for t, p, o in group),
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
            )
            # Shielded: a poll torn down by its client must not cancel the HTTP call, since
            # httpcore leaks the connection of a request cancelled mid-close
            # (encode/httpcore#1093); the fetch ends by itself at its max wait.
            fetched = await asyncio.shield(self._brokers.fetch_client(broker).fetch(request))
        except YakError as exc:
            return _Answer([PartitionRead(t, p, [], o, error=exc) for t, p, o in group])
        started = time.perf_counter()
        reads = []
        size = 0
        for part in fetched:
            offset = offsets[(part.topic, part.partition)]
            if part.error is not None:
                error = part.error.exception()
                reads.append(PartitionRead(part.topic, part.partition, [], offset, error=error))
                continue
            if raw:
                batches, next_offset = whole_batches(part.records, offset, max_bytes)
                size += len(batches)
                reads.append(
                    PartitionRead(
                        part.topic,
                        part.partition,
                        [],
                        next_offset,
                        part.high_watermark,
                        part.log_start_offset,
                        size=len(batches),
                        batches=batches,
                    )
                )
                continue
            records, part_size = _records_from(part.records, offset, max_bytes)
            next_offset = records[-1].offset + 1 if records else offset
            if record_filter is not None and records:
                records = record_filter.select(records)
                part_size = _size(records)
            size += part_size
            reads.append(
                PartitionRead(
                    part.topic,
                    part.partition,
                    records,
                    next_offset,
                    part.high_watermark,
                    part.log_start_offset,
                    size=part_size,
                )
            )
        answered = time.perf_counter()
        return _Answer(reads, answered - started, size, answered)

    async def list_offsets(self, topic: str, partition: int, timestamp: int | str) -> OffsetResult:
        """ListOffsets of one partition at its leader (``earliest``, ``latest`` or ms)."""
        _, client = self._brokers.leader(topic, partition)
        (result,) = await client.list_offsets([(topic, partition)], timestamp)
        if result.error is not None:
            raise result.error.exception()
        return result

    async def list_offsets_many(
        self, partitions: Sequence[tuple[str, int]], timestamp: int | str
    ) -> dict[tuple[str, int], OffsetResult | YakError]:
        """ListOffsets of many partitions, each its result or the typed error why not: one
        request per leader and ``_OFFSETS_PER_REQUEST`` partitions, all concurrent (a group
        over thousands of partitions is described in a few requests, not one each)."""
        found: dict[tuple[str, int], OffsetResult | YakError] = {}
        asked: dict[int, tuple[BrokerClient, list[tuple[str, int]]]] = {}
        for topic, partition in partitions:
            try:
                broker, client = self._brokers.leader(topic, partition)
            except YakError as exc:
                found[(topic, partition)] = exc
                continue
            asked.setdefault(broker.broker_id, (client, []))[1].append((topic, partition))

        async def ask(client: BrokerClient, chunk: list[tuple[str, int]]) -> None:
            try:
                results = await client.list_offsets(chunk, timestamp)
            except YakError as exc:
                found.update(dict.fromkeys(chunk, exc))
                return
            for result in results:
                error = result.error
                found[(result.topic, result.partition)] = (
                    result if error is None else error.exception()
                )

        step = _OFFSETS_PER_REQUEST
        await asyncio.gather(
            *(
                ask(client, listed[start : start + step])
                for client, listed in asked.values()
                for start in range(0, len(listed), step)
            )
        )
        return found


def _advance(
    by_broker: dict[int, list[tuple[str, int, int]]], broker_id: int, reads: list[PartitionRead]
) -> bool:
    """Move ``broker_id``'s asked offsets to where its answer's scan ended; whether any moved
    (only a filtered fetch that matched nothing ends past its offsets without records)."""
    reached = {(r.topic, r.partition): r.next_offset for r in reads}
    group = by_broker[broker_id]
    moved = [(t, p, max(o, reached.get((t, p), o))) for t, p, o in group]
    by_broker[broker_id] = moved
    return moved != group


def whole_batches(
    data: Buffer, offset: int, max_bytes: int, *, at_least_one: bool = True
) -> tuple[memoryview, int]:
    """The whole batches of ``data`` that reach ``offset`` or beyond — at least one (unless
    not ``at_least_one``), then up to ``max_bytes`` of them — and the offset after the last one
    (``offset`` if none). Batches wholly below ``offset`` are stepped over; a trailing batch
    cut short is dropped. Only headers are read (framing checked, not the CRC: the client
    checks it when it decodes); bad framing raises ``CorruptRecordError``."""
    view = memoryview(data)
    end = len(view)
    pos, start, next_offset = 0, -1, offset
    while end - pos >= RECORD_BATCH_OVERHEAD:
        size = _BATCH_LENGTH.unpack_from(view, pos + 8)[0] + LOG_OVERHEAD
        if size > end - pos:
            break  # cut off by the broker's byte limit: read whole next time
        header = validate_batch(view, pos, check_crc=False)
        last = header.base_offset + header.last_offset_delta
        if last >= offset:
            if start < 0:
                if size > max_bytes and not at_least_one:
                    break
                start = pos
            elif pos + size - start > max_bytes:
                break
            next_offset = last + 1
        pos += size
    if start < 0:
        return view[0:0], offset
    return view[start:pos], next_offset


def _records_from(data: Buffer, offset: int, max_bytes: int) -> tuple[list[Record], int]:
    """Decoded records at or past ``offset``: at least one, then up to ``max_bytes`` of keys
    and values; and the bytes of those kept."""
    if len(data) <= max_bytes:
        # The common case: the whole answer fits (it does unless compressed), so its records
        # are counted in C, not one by one.
        records = list(iter_records(data, from_offset=offset))
        size = _size(records)
        if size <= max_bytes:
            return records, size
        return _first(iter(records), max_bytes)
    return _first(iter_records(data, from_offset=offset), max_bytes)


def _first(records: Iterator[Record], max_bytes: int) -> tuple[list[Record], int]:
    kept: list[Record] = []
    size = 0
    for record in records:
        grown = size + len(record.key or b"") + len(record.value or b"")
        if kept and grown > max_bytes:
            break
        kept.append(record)
        size = grown
    return kept, size


_BATCH_LENGTH = struct.Struct(">i")
_keys = itemgetter(2)
_values = itemgetter(3)


def _size(records: list[Record]) -> int:
    """Bytes of the records' keys and values (None and empty count nothing)."""
    return sum(map(len, filter(None, map(_keys, records)))) + sum(
        map(len, filter(None, map(_values, records)))
    )
