"""``Sender``: delivers each partition's batches to the rest-proxy, with retries.

One task per partition drains its ``BatchQueue``: it waits — woken by an event, never by
polling — until the head batch is ready, sends it, and sends the next only once the answer is
in: one batch in flight per partition, so records of a partition are written in the order they
were sent.

Linger is adaptive (issue 18), as the proxy's own producer's: the proxy is this producer's one
destination, and while none of its batches is in flight there, a ready batch is sent at once
(so are the other partitions' batches that became ready in the same event-loop turn). While
batches are in flight, a partition's batch waits until the next answer comes back, until it is
full, until a flush or close asks, or ``linger_ms`` after it was started, whichever comes
first. An idle producer never waits; under load, records gather behind the requests in flight
and batches grow with the load.

Idempotent mode (``POST /api/v1/topics/{t}/partitions/{p}/batches``): the batch is stamped
once with the session's producer id, epoch and base sequence (``SequenceNumbers``) and encoded
here, once, as the Kafka record batch v2 the proxy forwards to the leader unchanged (the
binary form, ``application/vnd.yak.recordbatch.v2``; the configured codec compresses it); a
retriable failure (``YakError.retriable``: a moved leader, a timeout, an unreachable proxy)
resends the *same* bytes, through which the broker recognises a batch it already wrote.
Otherwise (``POST /api/v1/topics/{t}/records``) records that failed retriably are sent again
and may be written twice, as in Kafka without idempotence.

Retries back off exponentially (``retry_backoff_ms`` doubling to ``retry_backoff_max_ms``,
with jitter) and stop after ``retries`` resends or ``delivery_timeout_ms`` after the batch was
started; the records then fail with ``KafkaTimeoutError``. A proxy answering 429
``THROTTLING_QUOTA_EXCEEDED`` (the principal is over its produce quota) is waited out: the retry
comes no sooner than its ``Retry-After``, still within ``delivery_timeout_ms``. A batch the
broker finds too large (``MESSAGE_TOO_LARGE``) is split in two and both halves are sent
instead (each half stamped and encoded anew); an unknown producer id starts a new session and
the batch is encoded again under it. A batch that cannot be encoded (``InvalidRecordError``:
a timestamp out of range) fails its records, as the proxy's 400 would. Every record's future
gets its ``RecordMetadata`` or its typed error; nothing is dropped silently.

Per batch, not per record: a batch's records are encoded together when it is first sent, their
futures resolved in one loop from the one answer, and the batch's bytes go back to the
producer's buffer (``release``) once it completed (written or failed; the halves of a split
batch each give back their own share).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from yak.api.records import (
    RECORD_BATCH_MEDIA_TYPE,
    Encoding,
    HeaderEncoding,
    ProduceBatchResponse,
    ProduceRecordsRequest,
    ProduceRecordsResponse,
    ProducerSession,
)
from yak.clients._http import error_from_response, segment
from yak.errors import (
    InvalidProducerEpochError,
    KafkaTimeoutError,
    MessageTooLargeError,
    OutOfOrderSequenceError,
    ThrottlingQuotaExceededError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    YakError,
    error_for_code,
)
from yak.record import CompressionType, RecordInput, encode_batch
from yak.sdk._client import ApiClient, throttle_ms
from yak.sdk.accumulator import BatchQueue, ProducerBatch
from yak.sdk.idempotence import SequenceNumbers
from yak.sdk.metadata import TopicMetadata
from yak.sdk.records import RecordMetadata, produce_record
from yak.types import TopicPartition

__all__ = ["Compression", "Sender", "SenderConfig"]

Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
_FENCING = (OutOfOrderSequenceError, InvalidProducerEpochError, UnknownProducerIdError)


@dataclass(frozen=True, slots=True)
class SenderConfig:
    linger_ms: int
    batch_max_records: int
    batch_max_bytes: int
    compression: Compression
    acks: Literal["all", "1", "0"]
    idempotent: bool
    retries: int | None
    delivery_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int


def _now_ms() -> float:
    return time.monotonic() * 1000


class _Partition:
    __slots__ = ("answers_seen", "in_flight", "queue", "task", "wake")

    def __init__(self, queue: BatchQueue) -> None:
        self.queue = queue
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.in_flight: ProducerBatch | None = None  # the batch being delivered
        #: the producer's answer count when the head batch began to wait (None: nothing waits)
        self.answers_seen: int | None = None


class Sender:
    """Per-partition delivery tasks (see the module docstring). One event loop.

    ``release(size)`` is called with a batch's ``size`` once the batch completed.
    """

    def __init__(
        self,
        api: ApiClient,
        metadata: TopicMetadata,
        config: SenderConfig,
        release: Callable[[int], None],
    ) -> None:
        self._api = api
        self._release = release
        self._metadata = metadata
        self._config = config
        self._codec = CompressionType[config.compression.upper()]
        self._sequences = SequenceNumbers()
        self._session_lock = asyncio.Lock()
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._flushing = 0
        self._closing = False
        self._in_flight = 0  # batches sent and not answered yet, over every partition
        self._answers = 0  # answers received: a batch waiting behind them leaves on the next
        self._burst = False  # an idle producer began sending in this event-loop turn
        self._lingering: set[_Partition] = set()

    def append(
        self,
        topic: str,
        partition: int,
        record: RecordInput,
        future: asyncio.Future[RecordMetadata],
        size: int,
    ) -> None:
        """Queue a record; the partition's delivery task starts with its first record."""
        if self._closing:
            raise RuntimeError("the producer is closed")
        state = self._partitions.get((topic, partition))
        if state is None:
            state = self._start(TopicPartition(topic, partition))
        if state.queue.append(record, future, size):  # a new batch, or a full one
            if state.answers_seen is None:
                state.answers_seen = self._answers
            state.wake.set()

    def _start(self, tp: TopicPartition) -> _Partition:
        config = self._config
        state = _Partition(BatchQueue(config.batch_max_records, config.batch_max_bytes, _now_ms))
        self._partitions[tp] = state
        state.task = asyncio.create_task(self._run(tp, state), name=f"yak-sender-{tp}")
        return state

    def undelivered(self) -> list[asyncio.Future[RecordMetadata]]:
        """The futures of every record queued or in flight now."""
        futures: list[asyncio.Future[RecordMetadata]] = []
        for state in self._partitions.values():
            if state.in_flight is not None:
                futures += state.in_flight.futures
            for batch in state.queue:
                futures += batch.futures
        return futures

    def begin_flush(self) -> None:
        """Send every waiting batch without lingering, until ``end_flush``."""
        self._flushing += 1
        self._wake_all()

    def end_flush(self) -> None:
        self._flushing -= 1

    async def close(self) -> None:
        """Deliver what is queued (each batch within its delivery timeout), then stop."""
        self._closing = True
        self._wake_all()
        tasks = [p.task for p in self._partitions.values() if p.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    def _wake_all(self) -> None:
        for state in self._partitions.values():
            state.wake.set()

    # --- the per-partition loop -----------------------------------------------------------

    def _idle(self, state: _Partition) -> bool:
        """Whether the head batch goes without lingering (see the module docstring)."""
        return not self._in_flight or self._burst or state.answers_seen != self._answers

    def _sending(self) -> None:
        if not self._in_flight and not self._burst:
            self._burst = True  # partitions woken in this same turn go along
            asyncio.get_running_loop().call_soon(self._end_burst)
        self._in_flight += 1

    def _end_burst(self) -> None:
        self._burst = False

    def _answered(self) -> None:
        self._in_flight -= 1
        self._answers += 1
        for state in self._lingering:
            state.wake.set()

    async def _run(self, tp: TopicPartition, state: _Partition) -> None:
        config = self._config
        while True:
            if state.answers_seen is None:
                state.answers_seen = self._answers
            ready_at = state.queue.ready_at(
                config.linger_ms, self._flushing > 0 or self._closing, self._idle(state)
            )
            if ready_at is None:
                if self._closing:
                    return
                state.answers_seen = None
                state.wake.clear()
                await state.wake.wait()
                continue
            delay_ms = ready_at - _now_ms()
            if delay_ms > 0:
                state.wake.clear()
                self._lingering.add(state)
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay_ms / 1000):
                            await state.wake.wait()
                finally:
                    self._lingering.discard(state)
                continue
            batch = state.in_flight = state.queue.pop()
            self._sending()
            state.answers_seen = self._answers  # what waits behind this batch leaves after it
            completed = True
            try:
                completed = await self._deliver(tp, state.queue, batch)
            except Exception as exc:  # a bug must fail the records, not stop the partition
                self._give_up(tp, batch, ambiguous=True)
                self._fail(batch, exc)
            finally:
                state.in_flight = None
                self._answered()
                if completed:  # else its halves are queued, each with its share of the bytes
                    self._release(batch.size)

    async def _deliver(
        self,
        tp: TopicPartition,
        queue: BatchQueue,
        batch: ProducerBatch,
    ) -> bool:
        """Deliver or fail every record of ``batch``: True; False if it was split and its
        halves put back at the head of ``queue``."""
        deadline = batch.created_ms + self._config.delivery_timeout_ms
        while True:
            batch.attempts += 1
            try:
                if self._config.idempotent:
                    await self._send_batch(tp, batch)
                else:
                    await self._send_records(tp, batch)
                return True
            except YakError as exc:
                error = exc
            if isinstance(error, UnknownTopicOrPartitionError):
                self._metadata.invalidate(tp.topic)
            backoff_ms = self._backoff_ms(batch.attempts)
            if isinstance(error, ThrottlingQuotaExceededError):
                # 429: the proxy says how long the principal's quota needs (Retry-After).
                backoff_ms = max(backoff_ms, throttle_ms(error))
            may_retry = self._may_retry(batch, deadline, backoff_ms)
            lost_producer = batch.stamp is not None and isinstance(error, UnknownProducerIdError)
            if may_retry and (error.retriable or lost_producer):
                if lost_producer:
                    # The broker lost (or never had) this producer: the batch was not written;
                    # it goes again, stamped in a new session.
                    self._give_up(tp, batch, ambiguous=True)
                await asyncio.sleep(backoff_ms / 1000)
                continue
            # Written or not, nobody knows after a retriable error, a fencing error or a
            # server failure: only a refusal (4xx) surely left the log untouched.
            ambiguous = error.retriable or isinstance(error, _FENCING) or error.http_status >= 500
            self._give_up(tp, batch, ambiguous=ambiguous)
            if isinstance(error, MessageTooLargeError) and len(batch.records) > 1:
                queue.push_front(batch.split())
                return False
            if error.retriable:
                error = KafkaTimeoutError(
                    f"{len(batch.records)} record(s) for {tp} not delivered after "
                    f"{batch.attempts} attempt(s) in {_now_ms() - batch.created_ms:,.0f} ms: "
                    f"{error.code}: {error.message}",
                    topic=tp.topic,
                    partition=tp.partition,
                )
            self._fail(batch, error)
            return True

    def _give_up(self, tp: TopicPartition, batch: ProducerBatch, *, ambiguous: bool) -> None:
        """Take a failed batch out of flight; a batch whose fate is unknown ends its session
        (its sequence numbers can be neither reused nor skipped)."""
        if batch.stamp is None:
            return
        if ambiguous:
            self._sequences.end_session(batch.stamp)
        self._sequences.release(tp)
        batch.stamp = None
        batch.payload = None  # encoded for that stamp

    def _may_retry(self, batch: ProducerBatch, deadline: float, backoff: float) -> bool:
        retries = self._config.retries
        if retries is not None and batch.attempts > retries:
            return False
        return _now_ms() + backoff < deadline

    def _backoff_ms(self, attempts: int) -> float:
        config = self._config
        doubled: int = config.retry_backoff_ms << min(attempts - 1, 16)
        base = min(doubled, config.retry_backoff_max_ms)
        return base * random.uniform(0.8, 1.2)  # jitter, as Kafka's clients

    # --- one attempt ----------------------------------------------------------------------

    async def _session(self) -> None:
        async with self._session_lock:
            if self._sequences.session is None:
                session = await self._api.call("POST", "/producers", ProducerSession)
                self._sequences.start_session(session.producer_id, session.producer_epoch)

    async def _send_batch(self, tp: TopicPartition, batch: ProducerBatch) -> None:
        if batch.stamp is None:
            await self._session()
            batch.stamp = self._sequences.stamp(tp)
            batch.payload = None
        stamp = batch.stamp
        if batch.payload is None:  # encoded once per stamp: every retry sends these bytes
            batch.payload = encode_batch(
                batch.records,
                producer_id=stamp.producer_id,
                producer_epoch=stamp.producer_epoch,
                base_sequence=stamp.base_sequence,
                compression=self._codec,
            )
        path = f"/topics/{segment(tp.topic)}/partitions/{tp.partition}/batches"
        answer = await self._api.call(
            "POST",
            path,
            ProduceBatchResponse,
            batch.payload,
            content_type=RECORD_BATCH_MEDIA_TYPE,
            params={"acks": "all"},
        )
        self._sequences.acknowledge(tp, stamp, len(batch.records))
        topic, partition = tp
        for future, record, offset in zip(
            batch.futures, batch.records, answer.offsets, strict=True
        ):
            if not future.done():  # the caller may have cancelled it
                timestamp = cast(int, record.timestamp)  # send stamps every record
                future.set_result(RecordMetadata(topic, partition, offset, timestamp))
        batch.futures = []

    async def _send_records(self, tp: TopicPartition, batch: ProducerBatch) -> None:
        body = ProduceRecordsRequest(
            records=[
                produce_record(r.key, r.value, r.headers, r.timestamp, tp.partition)
                for r in batch.records
            ],
            key_encoding=Encoding.BASE64,
            value_encoding=Encoding.BASE64,
            header_encoding=HeaderEncoding.BASE64,
        )
        path = f"/topics/{segment(tp.topic)}/records"
        response = await self._api.send("POST", path, body, params={"acks": self._config.acks})
        try:
            answer = ProduceRecordsResponse.model_validate_json(response.content)
        except ValueError:
            raise error_from_response(response) from None
        retry: list[RecordInput] = []
        waiting: list[asyncio.Future[RecordMetadata]] = []
        first: YakError | None = None
        for record, future, result in zip(
            batch.records, batch.futures, answer.results, strict=True
        ):
            if result.error is None:
                offset = -1 if result.offset is None else result.offset
                stamp = cast(
                    int, record.timestamp if result.timestamp is None else result.timestamp
                )
                if not future.done():
                    future.set_result(RecordMetadata(tp.topic, tp.partition, offset, stamp))
                continue
            error = error_for_code(result.error.code, result.error.message)
            if error.retriable:
                retry.append(record)
                waiting.append(future)
                first = first or error
            elif not future.done():
                future.set_exception(error)
        # Only the records to retry stay; the batch's bytes go back when it completes.
        batch.records, batch.futures = retry, waiting
        if first is not None:
            raise first

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        for future in batch.futures:
            if not future.done():
                future.set_exception(error)
        batch.futures = []
