"""Blocking twins of the SDK: ``Producer``, ``Consumer``, ``ShareConsumer`` and ``Admin``.

Each runs its async counterpart (``AsyncProducer``, ``AsyncConsumer``, ``AsyncShareConsumer``,
``AsyncAdmin``, built with the same arguments) on a private event loop in a daemon thread and
forwards every call to it — no logic of their own, so both flavours behave the same. Calls
block the calling thread until the loop answers; ``Producer.send`` returns a
``concurrent.futures.Future``. An instance may be used from several threads (calls are
serialised on its loop). ``close`` (or leaving the ``with`` block) closes the async object and
stops the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Literal, TypeVar

from yak.api.admin import (
    BrokerInfo,
    ClusterInfo,
    LogDirs,
    PartitionOffset,
    TopicDeleted,
    TopicDescription,
    TopicList,
    TopicLogDirs,
)
from yak.api.groups import GroupDescription, GroupList, OffsetResetResult
from yak.api.scheduled import CancelledSchedule, ScheduledRecords
from yak.api.share_groups import (
    ShareGroupDeleted,
    ShareGroupDescription,
    ShareGroupList,
    ShareOffsetResetName,
)
from yak.closing import Closing
from yak.sdk.admin import AsyncAdmin, ResetTarget
from yak.sdk.consumer import AsyncConsumer
from yak.sdk.producer import AsyncProducer, DeliverAt
from yak.sdk.records import ConsumerRecord, Data, Headers, RecordMetadata
from yak.sdk.share_consumer import AckFailure, AcknowledgeType, AsyncShareConsumer, ShareRecord
from yak.types import TopicPartition

__all__ = ["Admin", "Consumer", "Producer", "ShareConsumer"]

_T = TypeVar("_T")


class _LoopThread:
    """An event loop running forever in a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[_T], timeout: float | None = None) -> _T:
        """Run a coroutine on the loop and wait for its result."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking SDK call from its own event loop would deadlock")

        async def wrapper() -> _T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout)

    def call(self, function: Callable[[], _T]) -> _T:
        """Run a plain function on the loop (for state only the loop may touch)."""

        async def wrapper() -> _T:
            return function()

        return self.run(wrapper())

    @property
    def stopped(self) -> bool:
        return self._loop.is_closed()

    def build(self, factory: Callable[[], _T]) -> _T:
        """``factory()`` called on the loop; the loop stops if it raises."""
        try:
            return self.call(factory)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        self.run(self._loop.shutdown_asyncgens())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class _Twin(Closing):
    """What the three twins share: the loop thread and the context-manager protocol."""

    def __init__(self, name: str) -> None:
        self._runner = _LoopThread(name)

    def _drive(self, records: AsyncGenerator[_T, None]) -> Iterator[_T]:
        """An async iteration, one item at a time, driven from the calling thread; closed on
        the loop when the caller stops early (unless the loop is gone)."""
        try:
            while True:
                try:
                    yield self._runner.run(anext(records))
                except StopAsyncIteration:
                    return
        finally:
            if not self._runner.stopped:
                self._runner.run(records.aclose())

    def _stop(self, closing: Awaitable[None]) -> None:
        try:
            self._runner.run(closing)
        finally:
            self._runner.stop()


class Producer(_Twin):
    """Blocking ``AsyncProducer``: ``Producer(url, **options)`` takes its arguments."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__("yak-producer")
        self._producer = self._runner.build(lambda: AsyncProducer(url, **options))

    def send(
        self,
        topic: str,
        value: Data | None,
        *,
        key: Data | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        deliver_after_ms: int | None = None,
        deliver_at: DeliverAt | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record (blocking only for metadata and buffer space, as the async one);
        the future resolves once it was written. A delay as ``AsyncProducer.send``'s."""
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()

        async def queue() -> None:
            delivery = await self._producer.send(
                topic,
                value,
                key=key,
                headers=headers,
                partition=partition,
                timestamp=timestamp,
                deliver_after_ms=deliver_after_ms,
                deliver_at=deliver_at,
            )
            delivery.add_done_callback(lambda done: _copy(done, result))

        self._runner.run(queue())
        return result

    def send_and_wait(
        self,
        topic: str,
        value: Data | None,
        *,
        key: Data | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        deliver_after_ms: int | None = None,
        deliver_at: DeliverAt | None = None,
    ) -> RecordMetadata:
        return self._runner.run(
            self._producer.send_and_wait(
                topic,
                value,
                key=key,
                headers=headers,
                partition=partition,
                timestamp=timestamp,
                deliver_after_ms=deliver_after_ms,
                deliver_at=deliver_at,
            )
        )

    def partitions_for(self, topic: str) -> int:
        return self._runner.run(self._producer.partitions_for(topic))

    def flush(self, timeout: float | None = None) -> None:
        self._runner.run(self._producer.flush(), timeout)

    def close(self) -> None:
        self._stop(self._producer.aclose())


def _copy(
    source: asyncio.Future[RecordMetadata], target: concurrent.futures.Future[RecordMetadata]
) -> None:
    if source.cancelled():
        target.cancel()
    elif (error := source.exception()) is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())


class Consumer(_Twin):
    """Blocking ``AsyncConsumer``: ``Consumer(url, group, topics, **options)`` takes its
    arguments; joins the group at construction."""

    def __init__(self, url: str, group: str, *args: Any, **options: Any) -> None:
        super().__init__("yak-consumer")
        self._consumer = self._runner.build(lambda: AsyncConsumer(url, group, *args, **options))
        try:
            self._runner.run(self._consumer.start())
        except BaseException:
            self._stop(self._consumer.aclose())
            raise

    @property
    def member_id(self) -> str | None:
        return self._consumer.member_id

    @property
    def member_epoch(self) -> int:
        return self._consumer.member_epoch

    def poll(self, timeout_ms: int = 1_000, max_bytes: int | None = None) -> list[ConsumerRecord]:
        return self._runner.run(self._consumer.poll(timeout_ms, max_bytes))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, one by one (the async iteration, driven from this thread)."""
        return self._drive(self._consumer.__aiter__())

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        self._runner.run(self._consumer.commit(offsets))

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._runner.run(self._consumer.seek(topic, partition, offset))

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self._runner.run(self._consumer.seek_to_beginning(*tps))

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._runner.run(self._consumer.seek_to_end(*tps))

    def seek_to_timestamp(self, timestamp_ms: int, *tps: TopicPartition) -> None:
        self._runner.run(self._consumer.seek_to_timestamp(timestamp_ms, *tps))

    def position(self, tp: TopicPartition) -> int | None:
        return self._runner.call(lambda: self._consumer.position(tp))

    def assignment(self) -> set[TopicPartition]:
        return self._runner.call(self._consumer.assignment)

    def pause(self, *tps: TopicPartition) -> None:
        self._runner.call(lambda: self._consumer.pause(*tps))

    def resume(self, *tps: TopicPartition) -> None:
        self._runner.call(lambda: self._consumer.resume(*tps))

    def paused(self) -> set[TopicPartition]:
        return self._runner.call(self._consumer.paused)

    def close(self) -> None:
        self._stop(self._consumer.aclose())


class ShareConsumer(_Twin):
    """Blocking ``AsyncShareConsumer``: ``ShareConsumer(url, group, topics, **options)`` takes
    its arguments. A record's ``ack()``, ``release()``, ``reject()`` and ``renew()`` may be
    called from any thread (the answer is noted on the consumer's loop); ``flush`` sends them."""

    def __init__(self, url: str, group: str, topics: Sequence[str] | str, **options: Any) -> None:
        super().__init__("yak-share-consumer")
        self._consumer = self._runner.build(
            lambda: AsyncShareConsumer(url, group, topics, **options)
        )
        self._consumer.note = self._note

    def _note(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        self._runner.call(lambda: self._consumer.answer(record, kind))

    @property
    def member_id(self) -> str | None:
        return self._consumer.member_id

    def acquire(self, timeout_ms: int = 1_000, max_records: int | None = None) -> list[ShareRecord]:
        return self._runner.run(self._consumer.acquire(timeout_ms, max_records))

    def __iter__(self) -> Iterator[ShareRecord]:
        """Every record, one by one (the async iteration, driven from this thread)."""
        return self._drive(self._consumer.__aiter__())

    def flush(self) -> list[AckFailure]:
        return self._runner.run(self._consumer.flush())

    def close(self) -> None:
        self._stop(self._consumer.aclose())


class Admin(_Twin):
    """Blocking ``AsyncAdmin``."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__("yak-admin")
        self._admin = self._runner.build(lambda: AsyncAdmin(url, **options))

    def cluster(self) -> ClusterInfo:
        return self._runner.run(self._admin.cluster())

    def brokers(self) -> list[BrokerInfo]:
        return self._runner.run(self._admin.brokers())

    def log_dirs(
        self, topics: Sequence[str] | None = None, brokers: Sequence[int] | None = None
    ) -> LogDirs:
        return self._runner.run(self._admin.log_dirs(topics, brokers))

    def log_dir_topics(self, brokers: Sequence[int] | None = None) -> TopicLogDirs:
        return self._runner.run(self._admin.log_dir_topics(brokers))

    def partition_offset(
        self, topic: str, partition: int, timestamp: int | Literal["earliest", "latest"]
    ) -> PartitionOffset:
        return self._runner.run(self._admin.partition_offset(topic, partition, timestamp))

    def list_scheduled(
        self,
        topic: str,
        partition: int,
        *,
        after_ms: int | None = None,
        after_offset: int = -1,
        limit: int = 100,
    ) -> ScheduledRecords:
        return self._runner.run(
            self._admin.list_scheduled(
                topic, partition, after_ms=after_ms, after_offset=after_offset, limit=limit
            )
        )

    def cancel_scheduled(self, topic: str, partition: int, offset: int) -> CancelledSchedule:
        return self._runner.run(self._admin.cancel_scheduled(topic, partition, offset))

    def list_topics(self) -> TopicList:
        return self._runner.run(self._admin.list_topics())

    def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        return self._runner.run(
            self._admin.create_topic(
                name, partitions=partitions, replication_factor=replication_factor, configs=configs
            )
        )

    def describe_topic(self, name: str) -> TopicDescription:
        return self._runner.run(self._admin.describe_topic(name))

    def describe_topics(self, names: Collection[str] | None = None) -> list[TopicDescription]:
        return self._runner.run(self._admin.describe_topics(names))

    def delete_topic(self, name: str) -> TopicDeleted:
        return self._runner.run(self._admin.delete_topic(name))

    def alter_topic_configs(
        self,
        name: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: tuple[str, ...] | list[str] = (),
    ) -> TopicDescription:
        return self._runner.run(
            self._admin.alter_topic_configs(
                name, set_configs=set_configs, delete_configs=delete_configs
            )
        )

    def create_partitions(self, name: str, count: int) -> TopicDescription:
        return self._runner.run(self._admin.create_partitions(name, count))

    def list_groups(self) -> GroupList:
        return self._runner.run(self._admin.list_groups())

    def describe_group(self, group: str) -> GroupDescription:
        return self._runner.run(self._admin.describe_group(group))

    def delete_group(self, group: str) -> None:
        self._runner.run(self._admin.delete_group(group))

    def reset_offsets(
        self,
        group: str,
        to: ResetTarget,
        *,
        timestamp: int | None = None,
        offset: int | None = None,
        topics: list[str] | None = None,
        offsets: dict[tuple[str, int], int] | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> OffsetResetResult:
        return self._runner.run(
            self._admin.reset_offsets(
                group,
                to,
                timestamp=timestamp,
                offset=offset,
                topics=topics,
                offsets=offsets,
                force=force,
                dry_run=dry_run,
            )
        )

    def create_share_group(
        self,
        name: str,
        *,
        dead_letter_topic: str | None = None,
        max_delivery_attempts: int = 5,
        lock_duration_ms: int = 30_000,
        offset_reset: ShareOffsetResetName = "latest",
    ) -> ShareGroupDescription:
        return self._runner.run(
            self._admin.create_share_group(
                name,
                dead_letter_topic=dead_letter_topic,
                max_delivery_attempts=max_delivery_attempts,
                lock_duration_ms=lock_duration_ms,
                offset_reset=offset_reset,
            )
        )

    def list_share_groups(self) -> ShareGroupList:
        return self._runner.run(self._admin.list_share_groups())

    def describe_share_group(self, name: str, topics: Sequence[str] = ()) -> ShareGroupDescription:
        return self._runner.run(self._admin.describe_share_group(name, topics))

    def alter_share_group(
        self,
        name: str,
        *,
        dead_letter_topic: str | None = None,
        clear_dead_letter_topic: bool = False,
        max_delivery_attempts: int | None = None,
        lock_duration_ms: int | None = None,
        offset_reset: ShareOffsetResetName | None = None,
    ) -> ShareGroupDescription:
        return self._runner.run(
            self._admin.alter_share_group(
                name,
                dead_letter_topic=dead_letter_topic,
                clear_dead_letter_topic=clear_dead_letter_topic,
                max_delivery_attempts=max_delivery_attempts,
                lock_duration_ms=lock_duration_ms,
                offset_reset=offset_reset,
            )
        )

    def delete_share_group(self, name: str) -> ShareGroupDeleted:
        return self._runner.run(self._admin.delete_share_group(name))

    def close(self) -> None:
        self._stop(self._admin.aclose())
