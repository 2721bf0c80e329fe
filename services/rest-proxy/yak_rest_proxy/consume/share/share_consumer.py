"""``ShareConsumers``: acquire and acknowledge records of share groups at the partitions' leaders.

**Acquire.** The group must exist (``ClusterSnapshot.share_groups``, looked up again once the
cache caught up with etcd): else ``GROUP_ID_NOT_FOUND`` before any broker is asked; so must the
topics, and a filter must compile (``INVALID_FILTER`` with its position). Then one ShareFetch
per leader broker of the topics' partitions, concurrently, each long-polling up to the
request's timeout; the answer comes as soon as one leader hands out records. A fetch still
waiting at another leader may acquire records after that: it is *parked* for the member, and
the member's next acquire through this proxy takes it over (its records come at once, and no
second fetch is sent to that broker meanwhile: one fetch per member and broker). Parked records
no acquire takes within ``keep_s`` (at most half their lock) are released for others. Answers
are handed out oldest first while they fit ``max_records``; the rest stays parked.

**Acknowledgements riding an acquire** (``riding_acks``): each partition's entries go in that
partition's ShareFetch, sent with no long poll so that its result comes at once; a leader
that answers it with no records is then asked again with the acquire's long poll (and no
entries). The answer carries one result per entry beside the records; refused entries do not
stop the acquire, and an acquire that carried entries answers its partitions' errors rather
than raising them.

**Acknowledge.** One ShareAcknowledge per leader, concurrently, each partition with all its
entries (``acknowledgements.by_partition``); each entry gets its own result.

**Leaders that moved.** A partition whose leader is unknown, moved (``NOT_LEADER_OR_FOLLOWER``)
or unreachable is retried once, after the metadata cache caught up with etcd; what still fails
is reported per partition (acquire) or per entry (acknowledge).

Nothing here is durable (the leaders hold the state): a proxy that dies loses only parked
answers, whose locks expire and whose records are delivered again. Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import NamedTuple, TypeVar

from yak.errors import NetworkError, UnknownServerError, YakError, error_for_kafka_code
from yak.filters import compile_filter
from yak.metadata.cache import MetadataCache
from yak.metadata.models import BrokerRegistration
from yak.protocol.kafka_share import AckType, AcquireMode, ShareFetchRequest, SharePartitionAcks
from yak.security.acl import Operation, ResourceType
from yak_rest_proxy.consume.share.acknowledgements import AckRange
from yak_rest_proxy.consume.share.acknowledger import Acknowledger
from yak_rest_proxy.consume.share.acquired import AcquiredPartition, acquired_records
from yak_rest_proxy.consume.share.riding_acks import Outcomes, RidingAcks
from yak_rest_proxy.consume.share.share_metadata import (
    ShareClient,
    ShareLookup,
    by_leader,
    check_member,
    leader_moved,
    topic_ids,
)
from yak_rest_proxy.consume.share.share_stats import ShareStats
from yak_rest_proxy.security.access import require
from yak_rest_proxy.topics import TopicLookup

__all__ = ["Acquisition", "ShareClient", "ShareConsumers"]

#: Beyond its max wait, how long an acquire waits for a fetch's answer to travel back.
_WAIT_MARGIN_S = 2.0
_T = TypeVar("_T")


class Acquisition(NamedTuple):
    """What an acquire handed to the member: records per partition, partitions that failed."""

    member_id: str
    lock_timeout_ms: int
    partitions: list[AcquiredPartition]
    errors: list[tuple[str, int, YakError]]
    #: One result per acknowledgement entry the acquire carried: None when applied.
    ack_results: Sequence[YakError | None] = ()

    @property
    def records(self) -> int:
        """How many records were acquired."""
        return sum(len(p.records) for p in self.partitions)


class _Answer(NamedTuple):
    """One leader's ShareFetch, decoded: when it came (``time.perf_counter``)."""

    partitions: list[AcquiredPartition]
    errors: list[tuple[str, int, YakError]]
    lock_timeout_ms: int
    answered: float
    #: For the entries the fetch carried, by partition: None when applied.
    acked: Outcomes

    @property
    def records(self) -> int:
        return sum(len(p.records) for p in self.partitions)


class _Ask(NamedTuple):
    """The parts of an acquire every one of its fetches shares."""

    group: str
    member: str
    ids: dict[str, uuid.UUID]
    max_records: int
    filter: str | None
    mode: AcquireMode = AcquireMode.RECORD_LIMIT


_Parked = tuple[str, str, int]  # group, member, broker id


class ShareConsumers:
    """Share-group acquires and acknowledgements through the leaders (module docstring)."""

    def __init__(
        self,
        cache: MetadataCache,
        topics: TopicLookup,
        client_of: Callable[[BrokerRegistration], ShareClient],
        *,
        node_id: str,
        stats: ShareStats | None = None,
        keep_s: float = 30.0,
    ) -> None:
        self._lookup = ShareLookup(cache, topics)
        self._acknowledger = Acknowledger(self._lookup, client_of)
        self._client_of = client_of
        self._node_id = node_id
        self.stats = stats if stats is not None else ShareStats()
        self._keep_s = keep_s
        self._parked: dict[_Parked, asyncio.Future[_Answer]] = {}
        self._timers: dict[_Parked, asyncio.TimerHandle] = {}
        self._background: set[asyncio.Future[None]] = set()

    def new_member_id(self) -> str:
        return f"share-{self._node_id}-{uuid.uuid4().hex}"

    async def acquire(
        self,
        group: str,
        member: str,
        topics: Sequence[str],
        *,
        max_records: int,
        timeout_ms: int,
        filter: str | None = None,
        acknowledgements: Sequence[AckRange] = (),
        whole_batches: bool = False,
    ) -> Acquisition:
        """Records of ``topics`` the member now holds, after applying ``acknowledgements``
        (see the module docstring); ``whole_batches``: the leaders acquire to the end of the
        last batch they answer (``AcquireMode.BATCH_OPTIMIZED``: ``max_records`` is soft)."""
        acks = RidingAcks(self._acknowledger, group, member)
        mode = AcquireMode.BATCH_OPTIMIZED if whole_batches else AcquireMode.RECORD_LIMIT
        got = await self._timed(
            "acquire",
            self._acquire(
                group, member, topics, max_records, timeout_ms, filter, acks, acknowledgements, mode
            ),
        )
        self.stats.count("acquire", got.records)
        self._count_acks(acknowledgements, got.ack_results)
        return got

    async def validate(
        self, group: str, member: str, topics: Sequence[str], filter: str | None = None
    ) -> dict[str, uuid.UUID]:
        """What an acquire checks before any broker is asked (a stream checks it before it
        starts): the member id, the group (``GROUP_ID_NOT_FOUND``), the filter
        (``INVALID_FILTER`` with its position), READ on the topics, that they exist; their ids."""
        check_member(member)
        await self._lookup.known_group(group)
        if filter is not None:
            compile_filter(filter)
        require(ResourceType.TOPIC, topics, Operation.READ)
        return topic_ids(await self._lookup.snapshot_of(set(topics)), topics)

    async def acknowledge(
        self, group: str, member: str, entries: Sequence[AckRange]
    ) -> list[YakError | None]:
        """Apply ``entries``; per entry, None when applied or the error why not."""
        results = await self._timed(
            "acknowledge", self._acknowledger.acknowledge(group, member, entries)
        )
        self._count_acks(entries, results)
        return results

    def _count_acks(self, entries: Sequence[AckRange], results: Sequence[YakError | None]) -> None:
        for entry, error in zip(entries, results, strict=True):
            if error is None:
                self.stats.count(entry.type.name.lower(), 1)

    async def aclose(self) -> None:
        """Release the records of parked answers (best effort; their locks expire anyway)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        parked, self._parked = self._parked, {}
        for (group, member, _), task in parked.items():
            if task.done() and not task.cancelled():
                with contextlib.suppress(YakError):
                    await self._release(group, member, task.result())
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # --- acquire ----------------------------------------------------------------------------

    async def _acquire(
        self,
        group: str,
        member: str,
        topics: Sequence[str],
        max_records: int,
        timeout_ms: int,
        filter: str | None,
        acks: RidingAcks,
        entries: Sequence[AckRange],
        mode: AcquireMode,
    ) -> Acquisition:
        ids = await self.validate(group, member, topics, filter)
        await acks.prepare(self._lookup, entries)
        snapshot = self._lookup.snapshot
        wanted = [(t, p) for t in ids for p in range(snapshot.topics[t].partitions)]
        wanted += [key for key in acks.partitions if key not in set(wanted)]
        ids = {**acks.ids, **ids}
        by_broker, failed = by_leader(snapshot, wanted)
        retried = False
        if any(leader_moved(error) for *_, error in failed):
            retried = True
            await self._lookup.sync_partitions((t, p) for t, p, e in failed if leader_moved(e))
            by_broker, failed = by_leader(self._lookup.snapshot, wanted)
        acks.send_apart(key for key in wanted if key not in set().union(*by_broker.values()))
        ask = _Ask(group, member, ids, max_records, filter, mode)
        deadline = time.monotonic() + timeout_ms / 1000
        tasks: dict[int, asyncio.Future[_Answer]] = {}
        fresh: set[asyncio.Future[_Answer]] = set()
        carrying: dict[int, tuple[list[tuple[str, int]], asyncio.Future[_Answer]]] = {}
        for (g, m, broker_id), task in self._parked.items():
            if (g, m) == (group, member) and (broker_id in by_broker or task.done()):
                tasks[broker_id] = task  # an earlier acquire's fetch: taken over
                acks.send_apart(by_broker.get(broker_id, ()))
        for broker_id, parts in by_broker.items():
            if broker_id not in tasks:
                riding = acks.riding(parts)
                wait_ms = 0 if riding else timeout_ms
                tasks[broker_id] = self._start(ask, broker_id, parts, wait_ms, riding)
                fresh.add(tasks[broker_id])
                if riding:
                    carrying[broker_id] = (list(riding), tasks[broker_id])
        while True:
            done = [t for t in tasks.values() if t.done()]
            if any(t.result().records for t in done):
                break
            wait_ms = int((deadline - time.monotonic()) * 1000)
            for broker_id, (_, task) in carrying.items():
                if tasks[broker_id] is task and task.done() and wait_ms > 0:
                    # the entries are answered; now the long poll, at that leader too
                    tasks[broker_id] = self._start(ask, broker_id, by_broker[broker_id], wait_ms)
                    fresh.add(tasks[broker_id])
            if not retried:
                moved = [(t, p) for d in done for t, p, e in d.result().errors if leader_moved(e)]
                if moved:
                    retried = True
                    await self._lookup.sync_partitions(moved)
                    regrouped, _ = by_leader(self._lookup.snapshot, moved)
                    wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
                    for broker_id, parts in regrouped.items():
                        if broker_id not in tasks or tasks[broker_id].done():
                            tasks[broker_id] = self._start(ask, broker_id, parts, wait_ms)
                            fresh.add(tasks[broker_id])
                    continue
            pending = [t for t in tasks.values() if not t.done()]
            started_here = [t for t in pending if t in fresh]
            remaining = deadline - time.monotonic()
            if not pending or (remaining <= 0 and not started_here):
                break
            margin = _WAIT_MARGIN_S if started_here else 0.0
            await asyncio.wait(
                pending, timeout=max(remaining, 0.0) + margin, return_when=asyncio.FIRST_COMPLETED
            )
            if time.monotonic() >= deadline + margin:
                break
        pending = [task for _, task in carrying.values() if not task.done()]
        if pending:  # sent without a long poll: their answers are due at once
            await asyncio.wait(pending, timeout=_WAIT_MARGIN_S)
        results = await acks.results(
            [
                (parts, task.result().acked if task.done() else None)
                for parts, task in carrying.values()
            ]
        )
        # an acquire that carried entries answers them even when nothing could be read
        raise_at = None if entries else len(wanted)
        got = self._hand_out(group, member, tasks, failed, max_records, raise_at)
        return got._replace(ack_results=results)

    def _hand_out(
        self,
        group: str,
        member: str,
        tasks: dict[int, asyncio.Future[_Answer]],
        failed: list[tuple[str, int, YakError]],
        max_records: int,
        wanted: int | None,
    ) -> Acquisition:
        """The finished answers, oldest first, while they fit ``max_records`` (the first one
        always); the others stay parked for the member's next acquire. With nothing handed
        out and all ``wanted`` partitions failed, the first error is raised (None: never)."""
        answered = sorted(
            (t.result().answered, broker_id) for broker_id, t in tasks.items() if t.done()
        )
        partitions: list[AcquiredPartition] = []
        errors = {(t, p): e for t, p, e in failed}
        lock_ms = handed = 0
        for _, broker_id in answered:
            task = tasks[broker_id]
            answer = task.result()
            if handed and handed + answer.records > max_records:
                continue
            handed += answer.records
            self._unpark((group, member, broker_id), task)
            for part in answer.partitions:
                errors.pop((part.topic, part.partition), None)
                if part.records:
                    partitions.append(part)
            errors.update({(t, p): e for t, p, e in answer.errors})
            if answer.records:
                lock_ms = max(lock_ms, answer.lock_timeout_ms)
        if wanted is not None and not handed and errors and len(errors) >= wanted:
            raise next(iter(errors.values()))  # nothing could be read at all
        listed = [(t, p, e) for (t, p), e in sorted(errors.items())]
        return Acquisition(member, lock_ms, partitions, listed)

    def _start(
        self,
        ask: _Ask,
        broker_id: int,
        parts: list[tuple[str, int]],
        wait_ms: int,
        riding: dict[tuple[str, int], list[AckRange]] | None = None,
    ) -> asyncio.Future[_Answer]:
        task = asyncio.ensure_future(self._fetch(ask, broker_id, parts, wait_ms, riding or {}))
        key = (ask.group, ask.member, broker_id)
        self._parked[key] = task
        task.add_done_callback(lambda done: self._answered(key, done))
        return task

    async def _fetch(
        self,
        ask: _Ask,
        broker_id: int,
        parts: list[tuple[str, int]],
        wait_ms: int,
        riding: dict[tuple[str, int], list[AckRange]],
    ) -> _Answer:
        broker = self._lookup.snapshot.brokers.get(broker_id)
        request = ShareFetchRequest(
            ask.group,
            ask.member,
            tuple(
                SharePartitionAcks(ask.ids[t], p, tuple(r.batch for r in riding.get((t, p), ())))
                for t, p in parts
            ),
            max_wait_ms=wait_ms,
            max_records=ask.max_records,
            batch_size=ask.max_records,
            filter=ask.filter,
            acquire_mode=ask.mode,
        )
        try:
            if broker is None:
                raise NetworkError(f"broker {broker_id} is gone")
            response = await self._client_of(broker).share_fetch(request)
            if response.error_code:
                message = response.error_message or "the share fetch was refused"
                raise error_for_kafka_code(response.error_code, message)
        except YakError as exc:
            acked: Outcomes = dict.fromkeys(riding, (exc, ()))
            return _Answer([], [(t, p, exc) for t, p in parts], 0, time.perf_counter(), acked)
        names = {topic_id: name for name, topic_id in ask.ids.items()}
        partitions: list[AcquiredPartition] = []
        errors: list[tuple[str, int, YakError]] = []
        acked = {key: (_unanswered(broker_id, key), ()) for key in riding}
        for part in response.partitions:
            topic = names.get(part.topic_id)
            if topic is None:
                continue
            key = (topic, part.partition)
            if part.error is not None:
                errors.append((topic, part.partition, part.error.exception()))
                if key in acked:
                    acked[key] = (part.error.exception(), ())
                continue
            if key in acked:
                error = None if part.ack_error is None else part.ack_error.exception()
                acked[key] = (error, part.ack_refused)
            try:
                partitions.append(
                    acquired_records(topic, part.partition, part.records, part.acquired)
                )
            except YakError as exc:  # corrupt batches: the locks expire, others try again
                errors.append((topic, part.partition, exc))
        return _Answer(partitions, errors, response.lock_timeout_ms, time.perf_counter(), acked)

    def _answered(self, key: _Parked, task: asyncio.Future[_Answer]) -> None:
        """A parked fetch finished: an empty one is forgotten; records wait for an acquire
        for ``keep_s`` (at most half their lock), then go back to the group."""
        if self._parked.get(key) is not task:
            return
        if task.cancelled() or not task.result().records:
            del self._parked[key]
            return
        keep_s = min(self._keep_s, task.result().lock_timeout_ms / 2000)
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(keep_s, self._expire, key, task)

    def _unpark(self, key: _Parked, task: asyncio.Future[_Answer]) -> None:
        if self._parked.get(key) is task:
            del self._parked[key]
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _expire(self, key: _Parked, task: asyncio.Future[_Answer]) -> None:
        if self._parked.get(key) is not task:
            return
        self._unpark(key, task)
        release = asyncio.ensure_future(self._release(key[0], key[1], task.result()))
        self._background.add(release)
        release.add_done_callback(self._background.discard)
        release.add_done_callback(_retrieve)

    async def _release(self, group: str, member: str, answer: _Answer) -> None:
        entries = [
            AckRange(part.topic, part.partition, first, last, AckType.RELEASE)
            for part in answer.partitions
            for first, last in _runs(record.offset for record in part.records)
        ]
        if entries:
            await self._acknowledger.acknowledge(group, member, entries)

    async def _timed(self, operation: str, work: Awaitable[_T]) -> _T:
        started = time.perf_counter()
        outcome = "ok"
        try:
            return await work
        except YakError as exc:
            outcome = exc.code
            raise
        finally:
            self.stats.observe(operation, time.perf_counter() - started, outcome)


def _unanswered(broker_id: int, key: tuple[str, int]) -> YakError:
    return UnknownServerError(f"broker {broker_id} did not answer for {key[0]}-{key[1]}")


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()


def _runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted offsets as inclusive runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if runs and runs[-1][1] == offset - 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs
