"""The broker process's load: sampled every publish interval, published in its registration.

A sample (``BrokerLoad``) holds the process's CPU use in cores and the records producers
appended to partitions it leads per second, both over the window since the previous sample;
its resident memory; and the used fraction of the filesystem holding its data folder. Every
broker of ``yak up`` shares one host, so the process's own figures are what tell them apart.
CPU and memory come from ``psutil`` (``PsutilProcess``), the records from the counter the
appender keeps for ``/metrics`` (``yak_broker_topic_records_in_total``).

**Publishing** (``LoadPublisher``): one sample per ``load_publish_interval_ms`` (the broker's
setting, default 5 s), and a rewrite of ``brokers/<id>`` only when ``should_publish`` says so:
the first sample; then one of its figures moved by more than a tenth since the published one
(``moved``: relative, with a floor per figure so that noise around zero moves nothing); or the
published sample has aged two intervals — readers ignore it after three (``BrokerLoad.stale``).
So a broker rewrites its registration at most once per interval, and once every two
intervals while steady: with the default, 0.1 to 0.2 etcd writes per second per broker, on
its lease, compared with what it last wrote (``BrokerRegistrar.publish_load``). A write that
fails is tried again at the next tick; nothing is queued.

``LoadSampler`` and ``should_publish`` read no clock of their own (the clock and the process
are handed in), so tests drive them with a ``FakeClock``. Single event loop.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from yak.clock import Clock
from yak.metadata.models import BrokerLoad
from yak_broker.metrics import BrokerTopicStats

__all__ = [
    "LoadPublisher",
    "LoadSampler",
    "ProcessStats",
    "PsutilProcess",
    "disk_used_ratio",
    "moved",
    "records_appended",
    "should_publish",
]

_log = logging.getLogger(__name__)

#: A figure must move by more than this fraction of its published value to be republished...
MOVE_RATIO = 0.1
#: ...and by more than its floor: CPU in cores, memory in bytes, disk as a fraction, records/s.
_FLOORS = BrokerLoad(
    cpu=0.05,
    memory_bytes=16 * 1024 * 1024,
    disk_used_ratio=0.01,
    records_per_second=50.0,
    sampled_at_ms=0,
)
#: A steady sample is republished once it has aged this many intervals (readers drop it at 3).
REFRESH_INTERVALS = 2


class ProcessStats(Protocol):
    """This process's cumulative CPU time and current resident memory."""

    def cpu_seconds(self) -> float: ...

    def rss_bytes(self) -> int: ...


class PsutilProcess:
    """``ProcessStats`` of the running process, through psutil."""

    def __init__(self) -> None:
        self._process = psutil.Process()

    def cpu_seconds(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def rss_bytes(self) -> int:
        return int(self._process.memory_info().rss)


def records_appended(stats: BrokerTopicStats) -> Callable[[], float]:
    """The records producers appended here so far, every topic summed (the counter behind
    ``yak_broker_topic_records_in_total``), read at each call: one pass over the topics."""
    counter = stats.records_in

    def read() -> float:
        return sum(
            sample.value
            for metric in counter.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )

    return read


def disk_used_ratio(folder: Path) -> Callable[[], float]:
    """The used fraction of the filesystem holding ``folder``, read at each call."""

    def read() -> float:
        usage = shutil.disk_usage(folder)
        return usage.used / usage.total if usage.total else 0.0

    return read


@dataclass(slots=True)
class _Window:
    at_s: float
    cpu_seconds: float
    records: float


class LoadSampler:
    """Turns the process's cumulative counters into rates over the window since the previous
    ``sample`` (the first window starts at construction)."""

    def __init__(
        self,
        process: ProcessStats,
        disk_used: Callable[[], float],
        records_total: Callable[[], float],
        clock: Clock,
        publish_interval_ms: int,
    ) -> None:
        self._process = process
        self._disk_used = disk_used
        self._records_total = records_total
        self._clock = clock
        self._interval_ms = publish_interval_ms
        self._last = self._read()

    def _read(self) -> _Window:
        return _Window(self._clock.monotonic(), self._process.cpu_seconds(), self._records_total())

    def sample(self) -> BrokerLoad:
        """The load over the window since the previous sample."""
        now = self._read()
        previous, self._last = self._last, now
        elapsed = now.at_s - previous.at_s
        if elapsed <= 0:
            cpu = rate = 0.0
        else:
            cpu = max(0.0, now.cpu_seconds - previous.cpu_seconds) / elapsed
            rate = max(0.0, now.records - previous.records) / elapsed
        return BrokerLoad(
            cpu=round(cpu, 3),
            memory_bytes=self._process.rss_bytes(),
            disk_used_ratio=round(min(max(self._disk_used(), 0.0), 1.0), 4),
            records_per_second=round(rate, 1),
            sampled_at_ms=self._clock.time_ms(),
            publish_interval_ms=self._interval_ms,
        )


def _moved_by_more_than_a_tenth(published: float, current: float, floor: float) -> bool:
    return abs(current - published) > max(MOVE_RATIO * abs(published), floor)


def moved(published: BrokerLoad, current: BrokerLoad) -> bool:
    """Whether a figure of ``current`` moved by more than a tenth of the ``published`` one
    (and by more than that figure's floor)."""
    return any(
        _moved_by_more_than_a_tenth(a, b, floor)
        for a, b, floor in (
            (published.cpu, current.cpu, _FLOORS.cpu),
            (published.memory_bytes, current.memory_bytes, _FLOORS.memory_bytes),
            (published.disk_used_ratio, current.disk_used_ratio, _FLOORS.disk_used_ratio),
            (
                published.records_per_second,
                current.records_per_second,
                _FLOORS.records_per_second,
            ),
        )
    )


def should_publish(published: BrokerLoad | None, current: BrokerLoad, intervals: int) -> bool:
    """Whether to rewrite the registration with ``current`` when the ``published`` sample was
    written ``intervals`` ticks ago (see the module doc). Never twice in one interval."""
    if published is None:
        return True
    if intervals < 1:
        return False
    return intervals >= REFRESH_INTERVALS or moved(published, current)


class LoadPublisher:
    """Samples every interval and publishes through ``publish`` when ``should_publish``."""

    def __init__(
        self,
        sampler: LoadSampler,
        publish: Callable[[BrokerLoad], Awaitable[bool]],
        clock: Clock,
        publish_interval_ms: int,
    ) -> None:
        self._sampler = sampler
        self._publish = publish
        self._clock = clock
        self._interval_s = publish_interval_ms / 1000
        #: The sample last written, and the ticks since.
        self.published: BrokerLoad | None = None
        self._ticks = 0
        #: Registration rewrites made (for tests and tools).
        self.writes = 0

    async def tick(self) -> bool:
        """Take one sample and publish it if due; whether it was written."""
        self._ticks += 1
        sample = self._sampler.sample()
        if not should_publish(self.published, sample, self._ticks):
            return False
        if not await self._publish(sample):
            return False
        self.published, self._ticks = sample, 0
        self.writes += 1
        return True

    async def run(self) -> None:
        """Tick every interval until cancelled."""
        while True:
            await self._clock.sleep(self._interval_s)
            try:
                await self.tick()
            except Exception:  # a failed sample must not end the loop
                _log.exception("sampling or publishing the broker's load failed")
