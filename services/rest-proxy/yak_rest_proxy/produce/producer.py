"""The proxy's producer: records of concurrent requests batched per partition, sent idempotently.

Every HTTP produce request hands its records to one ``Producer`` per process; they wait in a
queue per (topic, partition, acks) (``accumulator``). One sender per leader broker
(``sender.Sender``) sends every ready queue of that broker in one produce request (a *round*),
with up to ``max_in_flight`` rounds under way, and hands each round back to the producer
(``send_round``), which drains the queues, sends and settles the answers.

Linger is adaptive (issue 18): a queue whose leader's sender has no round under way is routed
at once, with no wait; the sender picks up, in the next event-loop turn, every queue that
became ready meanwhile, so the records of concurrent requests still share one round. While a
round to that broker is outstanding, records wait and leave together when an answer from that
broker comes back, when their batch reaches ``batch_max_bytes`` (capped by the topic's
``max.message.bytes`` and ``segment.bytes``: ``accumulator.batch_limit``), or ``linger_ms``
after they started waiting, whichever comes first. So an idle proxy adds nothing to a
produce's latency, and batches grow with load (as Kafka's producer's do); ``linger_ms`` only
bounds the wait behind a busy broker. A queue's records that arrive while its own batch is in
flight leave together after that batch's answer. Each ``send`` gets one future for all its
records, resolved with one result per record once every batch holding them was answered.

Idempotence (KIP-98): each queue writes with its own producer id (from etcd,
``ProducerIds``), epoch 0 and consecutive sequence numbers, and has at most one batch in
flight. A batch that failed retriably (``NOT_LEADER_OR_FOLLOWER``, no leader, a timeout, a
dropped connection, not enough replicas) is sent again *unchanged* after the metadata names
the new leader, so the broker's duplicate detection turns a retry of a batch that did land into
its original offsets — never a second copy. ``OUT_OF_ORDER_SEQUENCE_NUMBER`` and unknown
producer answers (state expired or truncated away on the broker; the batch was not appended)
re-encode the batch under a fresh producer id. Other errors fail the batch's records and give
its sequence numbers back. A batch not delivered within ``delivery_timeout_ms`` fails with
``REQUEST_TIMED_OUT``, and its queue moves to a fresh producer id, since the broker may or may
not have appended it.

Latency (``metrics.ProduceStats``, observed once per round, never per record): ``queue`` (the
round's oldest record, enqueued → the round's start), ``sender`` (round start → the request
handed to the broker client) and ``broker`` (that call).

Single event loop; ``send`` may be called from any number of concurrent tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

from yak.clock import Clock, SystemClock
from yak.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaTimeoutError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.producer_ids import ProducerIds
from yak.protocol.broker_wire import ProducePartition, ProduceResult
from yak.record import CompressionType, RecordInput
from yak.record.record_encoder import encode_record_body
from yak_rest_proxy.brokers import BrokerPool, leader_of
from yak_rest_proxy.metrics import ProduceStats
from yak_rest_proxy.produce.accumulator import (
    Call,
    Chunk,
    InFlight,
    PartitionQueue,
    Result,
    batch_limit,
    encode,
    record_size,
    take,
)
from yak_rest_proxy.produce.sender import Sender

__all__ = ["Producer"]

log = logging.getLogger(__name__)

_SEQUENCE_LIMIT = 2**31
_RETRY_BACKOFF_S = 0.1
_NEW_PRODUCER_ERRORS = (OutOfOrderSequenceError, UnknownProducerIdError, InvalidProducerEpochError)


class Producer:
    """Batches, sends and retries records for one proxy process; see the module docstring."""

    def __init__(
        self,
        cache: MetadataCache,
        brokers: BrokerPool,
        producer_ids: ProducerIds,
        *,
        linger_ms: float = 2.0,
        batch_max_bytes: int = 1024 * 1024,
        compression: CompressionType = CompressionType.NONE,
        delivery_timeout_ms: int = 30_000,
        max_in_flight: int = 1,
        stats: ProduceStats | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._cache = cache
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._stats = stats if stats is not None else ProduceStats()
        self._brokers = brokers
        self._ids = producer_ids
        self._linger_s = linger_ms / 1000
        self._batch_max_bytes = batch_max_bytes
        self._compression = compression
        self._delivery_timeout_s = delivery_timeout_ms / 1000
        self._max_in_flight = max_in_flight
        self._queues: dict[tuple[str, int, int], PartitionQueue] = {}
        self._senders: dict[int, Sender] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Stop sending; records still queued fail with ``REQUEST_TIMED_OUT``."""
        for sender in self._senders.values():
            await sender.aclose()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._senders.clear()
        error = KafkaTimeoutError("the proxy is shutting down")
        for queue in self._queues.values():
            self._stop_lingering(queue)
            inflight = queue.in_flight.chunks if queue.in_flight else []
            for chunk in [*inflight, *queue.pending]:
                chunk.fail(error)

    def send(
        self,
        topic: str,
        partition: int,
        records: Sequence[RecordInput],
        *,
        acks: int = -1,
        sizes: Sequence[int] | None = None,
    ) -> asyncio.Future[list[Result]]:
        """Queue ``records`` for one partition; the future gives, in order, where each record
        landed or why it did not (a ``YakError``; batches of one call may fare differently).
        Records without a timestamp get the current time; ``sizes`` (``record_size`` of each,
        when the caller has them) saves computing them again. The producer numbers the records
        of a batch itself: an ``offset_delta`` given is ignored."""
        now_ms = self._clock.time_ms()
        try:
            bodies = [encode_record_body(r.key, r.value, r.headers) for r in records]
        except InvalidRecordError as exc:  # a header key that is not UTF-8: the call's records fail
            future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
            future.set_result([exc] * len(records))
            return future
        timestamps = [now_ms if r.timestamp is None else r.timestamp for r in records]
        if sizes is None:
            sizes = [record_size(r) for r in records]
        return self.send_bodies(topic, partition, bodies, timestamps, list(sizes), acks=acks)

    def send_bodies(
        self,
        topic: str,
        partition: int,
        bodies: list[bytes],
        timestamps: list[int],
        sizes: list[int],
        *,
        acks: int = -1,
    ) -> asyncio.Future[list[Result]]:
        """``send`` of records already encoded: each one's body (``encode_record_body``), its
        timestamp and ``record_size``. The lists become the queue's: the caller lets go of them."""
        key = (topic, partition, acks)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = PartitionQueue(topic, partition, acks)
        future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        if not bodies:
            future.set_result([])
            return future
        size = sum(sizes)
        call = Call(future, len(bodies), time.perf_counter())
        queue.pending.append(Chunk(call, 0, bodies, timestamps, sizes, size))
        queue.pending_bytes += size
        self._schedule(queue)
        return future

    # --- queue state -------------------------------------------------------------------------

    def _max_batch_bytes(self, topic: str) -> int:
        record = self._cache.snapshot.topics.get(topic)
        if record is None:
            return self._batch_max_bytes
        return max(1, min(self._batch_max_bytes, batch_limit(record.configs)))

    def _schedule(self, queue: PartitionQueue) -> None:
        if queue.in_flight is not None or queue.routing or not queue.pending:
            return
        full = queue.pending_bytes >= self._max_batch_bytes(queue.topic)
        if queue.lingering_on is None or full:
            self._route(queue, linger=not full and self._linger_s > 0)

    def _route(self, queue: PartitionQueue, *, linger: bool = False) -> None:
        """Hand the queue to its leader's sender (or wait for a leader). With ``linger``, a
        queue whose leader has a round under way waits instead (see the module docstring)."""
        if queue.routing:
            self._stop_lingering(queue)
            return
        try:
            broker = leader_of(self._cache.snapshot, queue.topic, queue.partition)
        except UnknownTopicOrPartitionError as exc:
            self._stop_lingering(queue)
            self._fail_all(queue, exc)
            return
        except YakError:
            self._stop_lingering(queue)
            self._route_later(queue, -1)
            return
        sender = self._senders.get(broker.broker_id)
        if sender is None:
            sender = self._senders[broker.broker_id] = Sender(
                self, broker.broker_id, self._max_in_flight
            )
        if linger and sender.outstanding:
            if queue.lingering_on is None:
                queue.lingering_on = sender.broker_id
                sender.linger(queue)
                queue.timer = asyncio.get_running_loop().call_later(
                    self._linger_s, self._route, queue
                )
            return
        self._stop_lingering(queue)
        queue.routing = True
        sender.enqueue(queue)

    def _stop_lingering(self, queue: PartitionQueue) -> None:
        if queue.timer is not None:
            queue.timer.cancel()
            queue.timer = None
        if queue.lingering_on is not None:
            sender = self._senders.get(queue.lingering_on)
            if sender is not None:
                sender.stop_lingering(queue)
            queue.lingering_on = None

    def release_lingering(self, queue: PartitionQueue) -> None:
        """The broker a queue lingered on answered: route it now (unless it moved on)."""
        self._stop_lingering(queue)
        if queue.in_flight is None and not queue.routing and queue.pending:
            self._route(queue)

    def _route_later(self, queue: PartitionQueue, failed_broker: int) -> None:
        """Route again once the metadata changes (a new leader), at most a backoff later."""
        queue.routing = True
        seen = self._cache.snapshot.revision

        def moved(snapshot: ClusterSnapshot) -> bool:
            return snapshot.revision > seen

        async def wait() -> None:
            with contextlib.suppress(TimeoutError, YakError):
                await self._cache.wait_for(moved, _RETRY_BACKOFF_S)
            queue.routing = False
            self._route(queue)

        task = asyncio.get_running_loop().create_task(wait())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def abort_round(self, queues: list[PartitionQueue], error: YakError) -> None:
        """Fail what a broken round held and let the queues be routed again."""
        for queue in queues:
            queue.routing = False
            if queue.in_flight is not None:
                queue.producer_id = -1  # the batch's fate is unknown: a fresh sequence
                self._finish(queue, error)
            elif queue.pending:
                self._route(queue)

    def _fail_all(self, queue: PartitionQueue, error: YakError) -> None:
        if queue.in_flight is not None:
            self._finish(queue, error)
        while queue.pending:
            queue.pending.popleft().fail(error)
        queue.pending_bytes = 0

    # --- sending -----------------------------------------------------------------------------

    async def _drain(self, queue: PartitionQueue) -> InFlight | None:
        if queue.in_flight is not None:
            return queue.in_flight
        if not queue.pending:
            return None
        chunks = take(queue, self._max_batch_bytes(queue.topic))
        if not chunks:
            return None
        if queue.producer_id < 0:
            queue.producer_id, queue.next_sequence = await self._ids.allocate(), 0
        count = sum(len(chunk.bodies) for chunk in chunks)
        inflight = InFlight(chunks, count, b"", queue.next_sequence, self._clock.monotonic())
        try:
            inflight.batch = encode(queue, chunks, queue.next_sequence, self._compression)
        except Exception as exc:  # a field out of range: these records (only) cannot be sent
            error = exc if isinstance(exc, YakError) else InvalidRecordError(str(exc))
            for chunk in chunks:
                chunk.fail(error)
            return None
        queue.next_sequence = (queue.next_sequence + count) % _SEQUENCE_LIMIT
        queue.in_flight = inflight
        return inflight

    async def send_round(
        self, broker_id: int, acks: int, queues: list[PartitionQueue], started: float
    ) -> None:
        """A sender's round (``sender.RoundHandler``): the queues' batches drained, sent to
        ``broker_id`` in one request, and each answer settled."""
        waited = [q.pending[0].call.enqueued for q in queues if q.in_flight is None and q.pending]
        if waited:  # fresh records, not only a retry
            self._stats.queue.observe(started - min(waited))
        sending: list[PartitionQueue] = []
        for queue in queues:
            drained = await self._drain(queue)
            queue.routing = False  # only now: until the batch is in flight, nobody else routes
            if drained is not None:
                sending.append(queue)
        if not sending:
            return
        broker = self._cache.snapshot.brokers.get(broker_id)
        if broker is None:
            for queue in sending:
                self._retry(queue, broker_id)
            return
        parts = [
            ProducePartition(q.topic, q.partition, q.in_flight.batch)  # type: ignore[union-attr]
            for q in sending
        ]
        timeout_ms = int(self._delivery_timeout_s * 1000)
        stats = self._stats
        sent = time.perf_counter()
        stats.sender.observe(sent - started)
        try:
            results = await self._brokers.client(broker).produce(
                parts, acks=acks, timeout_ms=timeout_ms
            )
        except YakError as exc:
            stats.broker.observe(time.perf_counter() - sent)
            for queue in sending:
                self._on_error(queue, exc, broker_id)
            return
        stats.broker.observe(time.perf_counter() - sent)
        if acks == 0:
            for queue in sending:
                self._complete(queue, ProduceResult(queue.topic, queue.partition))
            return
        by_partition = {(r.topic, r.partition): r for r in results}
        for queue in sending:
            result = by_partition.get((queue.topic, queue.partition))
            if result is None:
                self._retry(queue, broker_id)
            elif result.error is not None:
                self._on_error(queue, result.error.exception(), broker_id)
            else:
                self._complete(queue, result)

    def _complete(self, queue: PartitionQueue, result: ProduceResult) -> None:
        inflight = queue.in_flight
        assert inflight is not None
        inflight.land(queue.partition, result.base_offset)
        queue.in_flight = None
        if queue.pending:
            self._route(queue)  # they waited a round trip already: no more linger

    def _on_error(self, queue: PartitionQueue, error: YakError, broker_id: int) -> None:
        inflight = queue.in_flight
        assert inflight is not None
        if isinstance(error, _NEW_PRODUCER_ERRORS):
            self._renew_producer(queue)
            return
        if not error.retriable:
            queue.next_sequence = inflight.base_sequence  # not appended: reuse the numbers
            self._finish(queue, error)
            return
        if self._clock.monotonic() - inflight.first_sent > self._delivery_timeout_s:
            queue.producer_id = -1  # the broker may hold the batch: start a fresh sequence
            self._finish(queue, KafkaTimeoutError(f"not delivered in time: {error.message}"))
            return
        self._retry(queue, broker_id)

    def _retry(self, queue: PartitionQueue, broker_id: int) -> None:
        log.debug("retrying %s-%d (leader was %d)", queue.topic, queue.partition, broker_id)
        self._route_later(queue, broker_id)

    def _renew_producer(self, queue: PartitionQueue) -> None:
        """The broker refused our sequence: the batch was not appended, send it as a new
        producer's first batch."""
        inflight = queue.in_flight
        assert inflight is not None

        async def renew() -> None:
            queue.producer_id, queue.next_sequence = await self._ids.allocate(), 0
            inflight.batch = encode(queue, inflight.chunks, 0, self._compression)
            inflight.base_sequence = 0
            queue.next_sequence = inflight.count % _SEQUENCE_LIMIT
            queue.routing = False
            self._route(queue)

        queue.routing = True
        task = asyncio.get_running_loop().create_task(renew())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _finish(self, queue: PartitionQueue, error: YakError) -> None:
        inflight = queue.in_flight
        assert inflight is not None
        for chunk in inflight.chunks:
            chunk.fail(error)
        queue.in_flight = None
        if queue.pending:
            self._route(queue)
