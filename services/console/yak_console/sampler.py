"""``Sampler``: the console's periodic picture of the cluster, and its history.

Every ``sample_interval_ms`` the sampler asks the public API for the cluster (every broker the
cluster knows, up or down, the controller, partition health), every live broker's log dirs
summed per topic (sizes, records, high watermarks; a down broker costs no request) and every
consumer group's description (committed offsets, lag), and derives from consecutive samples
what no single call answers: produce rates (growth of the topics' high watermarks) and
consume rates (growth of the groups' committed offsets), per topic and overall. Pages render
from the latest sample, so a page with 100 topics x 16 partitions costs no API round trip;
charts and the under-replicated banner are fed from the history over Server-Sent Events
(``wait_next`` wakes every subscriber when a sample lands — no polling).

**A sampling costs what the cluster has of topics, not of partitions**: the log dirs come
summed per topic from each broker (``/api/v1/log-dirs/topics``), so at 20,000 partitions RF 3
a sampling reads a few thousand topic entries, not 60,000 replica entries. The per-partition
figures of one topic or one broker (a topic's page, a broker's page, the message browser's
start offsets) are asked when that page is looked at (``topic_logs``, ``broker_log_dir``).
Even so the sampler samples only as often as someone looks, and never spends more than a
tenth of its time sampling:

- *watched* — a page asked for the sample or an event stream waited for one in the last
  ``watch_s`` (60 s): every ``interval_s`` (2 s);
- *unwatched*: every ``idle_interval_s`` (30 s), which keeps ``/readyz`` and the charts'
  history current at a fifteenth of the cost;
- either way at least ten times the last sampling's duration apart (``duty`` 0.1);
- a page that finds the latest sample older than twice the current pause (the first look
  after a quiet spell) samples at once and waits for it.

A failed call keeps the last good part and records the error in the sample (shown on the
pages); the loop never dies of one. ``refresh()`` samples at once (after a change made through
the console, so the next page shows it). ``unreachable`` says whether the last sampling reached
the API at all (the console's ``/readyz``). Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from yak.api.admin import (
    BrokerLogDir,
    BrokerStatus,
    ClusterInfo,
    LogDirs,
    ReplicaLog,
    TopicLogDirs,
)
from yak.api.groups import GroupDescription
from yak.errors import KafkaTimeoutError, NetworkError, YakError
from yak.sdk import AsyncAdmin

__all__ = ["PartitionLog", "Sample", "Sampler", "TopicTotals", "derive", "leader_logs"]

_log = logging.getLogger(__name__)
_K = TypeVar("_K")
_T = TypeVar("_T")
#: Group descriptions fetched at once.
_GROUP_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class PartitionLog:
    """A partition's log as its leader reports it (``size_bytes`` summed over replicas in
    ``replica_bytes``)."""

    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    size_bytes: int
    replica_bytes: int

    @property
    def records(self) -> int:
        """Records between the log start and the high watermark (an upper bound after
        compaction, as Kafka tools report it)."""
        return max(0, self.high_watermark - self.log_start_offset)


@dataclass(frozen=True, slots=True)
class TopicTotals:
    """A topic's logs summed over its partitions' leaders (``replica_bytes``: every
    replica)."""

    size_bytes: int
    replica_bytes: int
    records: int
    high_watermark_sum: int


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the cluster. ``errors`` names the calls that failed (their part is the
    previous sample's)."""

    seq: int
    at: float
    cluster: ClusterInfo | None
    log_dirs: TopicLogDirs | None
    groups: Mapping[str, GroupDescription]
    errors: tuple[str, ...] = ()
    #: topic → its logs, summed.
    topics: Mapping[str, TopicTotals] = field(default_factory=dict)
    #: Records per second since the previous sample.
    produce_rate: float = 0.0
    consume_rate: float = 0.0
    topic_produce_rates: Mapping[str, float] = field(default_factory=dict)
    topic_consume_rates: Mapping[str, float] = field(default_factory=dict)

    @property
    def live_brokers(self) -> int:
        """The registered brokers (up or shutting down; the listing has down ones too)."""
        if self.cluster is None:
            return 0
        return sum(1 for b in self.cluster.brokers if b.status is not BrokerStatus.DOWN)

    @property
    def under_replicated(self) -> int:
        return self.cluster.under_replicated_partition_count if self.cluster else 0

    @property
    def offline(self) -> int:
        return self.cluster.offline_partition_count if self.cluster else 0


def leader_logs(log_dirs: LogDirs | None) -> dict[tuple[str, int], PartitionLog]:
    """(topic, partition) → the partition's log as its leader reports it (pure)."""
    replicas: dict[tuple[str, int], list[ReplicaLog]] = {}
    for broker in log_dirs.brokers if log_dirs else ():
        for replica in broker.replicas:
            replicas.setdefault((replica.topic, replica.partition), []).append(replica)
    logs = {}
    for key, found in replicas.items():
        leaders = [r for r in found if r.is_leader]
        # Without a leader answering, the most advanced replica is the best guess.
        best = max(leaders or found, key=lambda r: (r.leader_epoch, r.high_watermark))
        logs[key] = PartitionLog(
            log_start_offset=best.log_start_offset,
            high_watermark=best.high_watermark,
            log_end_offset=best.log_end_offset,
            size_bytes=best.size_bytes,
            replica_bytes=sum(r.size_bytes for r in found),
        )
    return logs


def _topic_totals(log_dirs: TopicLogDirs | None) -> dict[str, TopicTotals]:
    sums: dict[str, list[int]] = {}
    for broker in log_dirs.brokers if log_dirs else ():
        for t in broker.topics:
            row = sums.setdefault(t.topic, [0, 0, 0, 0])
            row[0] += t.leader_size_bytes
            row[1] += t.size_bytes
            row[2] += t.records
            row[3] += t.high_watermark_sum
    return {topic: TopicTotals(*row) for topic, row in sums.items()}


def _per_topic(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for topic, value in pairs:
        totals[topic] = totals.get(topic, 0) + value
    return totals


def _committed(groups: Mapping[str, GroupDescription]) -> dict[tuple[str, str, int], int]:
    return {
        (g.group_id, p.topic, p.partition): p.committed_offset
        for g in groups.values()
        for p in g.partitions
        if p.committed_offset is not None
    }


def _rates(
    now: Mapping[_K, int], before: Mapping[_K, int], topic_of: Callable[[_K], str]
) -> dict[str, int]:
    """Growth per topic of counters present in both (a counter that went down — a
    truncation, an offset reset — counts as 0)."""
    grown = ((topic_of(k), max(0, v - before[k])) for k, v in now.items() if k in before)
    return _per_topic(grown)


def derive(
    previous: Sample | None,
    seq: int,
    at: float,
    cluster: ClusterInfo | None,
    log_dirs: TopicLogDirs | None,
    groups: Mapping[str, GroupDescription],
    errors: tuple[str, ...] = (),
) -> Sample:
    """The sample of these answers, with rates against ``previous`` (pure)."""
    topics = _topic_totals(log_dirs)
    if previous is None or at <= previous.at:
        return Sample(seq, at, cluster, log_dirs, groups, errors, topics)
    elapsed = at - previous.at
    produced = _rates(
        {t: v.high_watermark_sum for t, v in topics.items()},
        {t: v.high_watermark_sum for t, v in previous.topics.items()},
        lambda t: t,
    )
    consumed = _rates(
        _committed(groups),
        _committed(previous.groups),
        lambda k: k[1],
    )
    return Sample(
        seq,
        at,
        cluster,
        log_dirs,
        groups,
        errors,
        topics,
        produce_rate=sum(produced.values()) / elapsed,
        consume_rate=sum(consumed.values()) / elapsed,
        topic_produce_rates={t: n / elapsed for t, n in produced.items()},
        topic_consume_rates={t: n / elapsed for t, n in consumed.items()},
    )


class Sampler:
    """Samples the cluster through ``admin`` and keeps ``history``; see the module doc for
    how often."""

    def __init__(
        self,
        admin: AsyncAdmin,
        *,
        interval_s: float = 2.0,
        idle_interval_s: float = 30.0,
        watch_s: float = 60.0,
        duty: float = 0.1,
        history: int = 300,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admin = admin
        self._interval_s = interval_s
        self._idle_interval_s = max(interval_s, idle_interval_s)
        self._watch_s = watch_s
        self._duty = duty
        self._clock = clock
        self._monotonic = monotonic
        self.history: deque[Sample] = deque(maxlen=history)
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._lock = asyncio.Lock()
        self._watched_until = -math.inf
        self._sampled_at = -math.inf  # monotonic, when the last sampling ended
        self._last_duration = 0.0
        #: Why the public API could not be reached on the last sampling (None: it answered,
        #: possibly with an error such as a refused credential).
        self.unreachable: str | None = None

    @property
    def latest(self) -> Sample | None:
        return self.history[-1] if self.history else None

    def now(self) -> float:
        """The time on the clock samples are taken by (their ``at``)."""
        return self._clock()

    def watched(self) -> bool:
        """Whether a page or an event stream looked in the last ``watch_s``."""
        return self._monotonic() < self._watched_until

    def pause(self) -> float:
        """Seconds between two samplings now: the interval if watched, the idle interval if
        not, and at least the last sampling's duration over the duty cycle."""
        base = self._interval_s if self.watched() else self._idle_interval_s
        return max(base, self._last_duration / self._duty)

    def watch(self) -> None:
        """Someone is looking: sample every interval for the next ``watch_s``."""
        idle = not self.watched()
        self._watched_until = self._monotonic() + self._watch_s
        if idle:
            self._kick.set()  # the loop plans its next sampling again, now sooner

    async def current(self) -> Sample:
        """The latest sample (a page is looking): sampled now if there is none, or if it is
        older than twice the pause (the first look after a quiet spell)."""
        self.watch()
        latest = self.latest
        if latest is None or self._monotonic() - self._sampled_at > 2 * self.pause():
            return await self.refresh()
        return latest

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_next(self, after_seq: int, timeout_s: float) -> Sample | None:
        """The first sample newer than ``after_seq``, or None after ``timeout_s`` (an event
        stream is looking)."""
        self.watch()
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._changed.wait_for(
                        lambda: self.latest is not None and self.latest.seq > after_seq
                    )
        latest = self.latest
        return latest if latest is not None and latest.seq > after_seq else None

    async def refresh(self) -> Sample:
        """Sample now (one sampling at a time; a caller that waited gets the fresh one)."""
        async with self._lock:
            sample = await self._sample()
        async with self._changed:
            self._changed.notify_all()
        return sample

    async def _sample(self) -> Sample:
        started = self._monotonic()
        try:
            sample = await self._take(self.latest)
            self.history.append(sample)
            return sample
        finally:
            self._sampled_at = self._monotonic()
            self._last_duration = self._sampled_at - started

    def _due_in(self) -> float:
        return self._sampled_at + self.pause() - self._monotonic()

    async def _run(self) -> None:
        while True:
            wait = self._due_in()
            if wait > 0:
                # ``asyncio.timeout``, not ``wait_for``: on 3.11 ``wait_for`` swallows a
                # cancellation that lands as the kick is set (``stop`` right after a page).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._kick.wait()
                self._kick.clear()
                continue
            try:
                async with self._lock:
                    if self._due_in() > 0:
                        continue  # a page sampled while this waited for the lock
                    await self._sample()
                async with self._changed:
                    self._changed.notify_all()
            except Exception:  # the loop must outlive any one bad answer
                _log.exception("sampling the cluster failed")

    async def _take(self, previous: Sample | None) -> Sample:
        errors: list[str] = []
        unreachable: list[str] = []
        cluster_call = _attempt(self._admin.cluster(), "cluster", errors, unreachable)
        dirs_call = _attempt(self._admin.log_dir_topics(), "log dirs", errors)
        groups_call = _attempt(self._groups(), "groups", errors)
        cluster, log_dirs, found = await asyncio.gather(cluster_call, dirs_call, groups_call)
        groups: Mapping[str, GroupDescription] = found or {}
        self.unreachable = unreachable[0] if unreachable else None
        if previous is not None:
            cluster = cluster if cluster is not None else previous.cluster
            log_dirs = log_dirs if log_dirs is not None else previous.log_dirs
            groups = found if found is not None else previous.groups
        seq = previous.seq + 1 if previous else 1
        return derive(previous, seq, self._clock(), cluster, log_dirs, groups, tuple(errors))

    async def topic_logs(self, topic: str) -> dict[int, PartitionLog]:
        """Partition → its log as the leader reports it, asked now (each broker lists only
        this topic's replicas); empty when the brokers cannot be asked."""
        try:
            dirs = await self._admin.log_dirs([topic])
        except (YakError, OSError) as exc:
            _log.warning("log dirs of topic %s: %s", topic, exc)
            return {}
        return {p: log for (t, p), log in leader_logs(dirs).items() if t == topic}

    async def broker_log_dir(self, broker_id: int) -> BrokerLogDir | None:
        """One broker's data folder with every replica it holds, asked now (None when it
        cannot be asked)."""
        try:
            dirs = await self._admin.log_dirs(brokers=[broker_id])
        except (YakError, OSError) as exc:
            _log.warning("log dir of broker %d: %s", broker_id, exc)
            return None
        return next((d for d in dirs.brokers if d.broker_id == broker_id), None)

    async def _groups(self) -> dict[str, GroupDescription]:
        listed = await self._admin.list_groups()
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)

        async def describe(group: str) -> GroupDescription | None:
            async with limit:
                with contextlib.suppress(YakError):  # deleted between list and describe
                    return await self._admin.describe_group(group)
                return None

        found = await asyncio.gather(*(describe(g.group_id) for g in listed.groups))
        return {d.group_id: d for d in found if d is not None}


async def _attempt(
    call: Awaitable[_T], what: str, errors: list[str], unreachable: list[str] | None = None
) -> _T | None:
    try:
        return await call
    except (YakError, OSError) as exc:
        errors.append(f"{what}: {exc}")
        if unreachable is not None and isinstance(exc, NetworkError | KafkaTimeoutError | OSError):
            unreachable.append(str(exc))
        return None
