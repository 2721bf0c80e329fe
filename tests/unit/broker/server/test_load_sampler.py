"""The broker's load sample and its publish-rate rule, on a fake clock and a fake process."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from yak.clock import FakeClock
from yak.metadata.models import BrokerLoad
from yak_broker.metrics import BrokerTopicStats
from yak_broker.server.load_sampler import (
    LoadPublisher,
    LoadSampler,
    PsutilProcess,
    disk_used_ratio,
    moved,
    records_appended,
    should_publish,
)

INTERVAL_MS = 5_000


class FakeProcess:
    def __init__(self) -> None:
        self.cpu = 0.0
        self.rss = 200 * 1024 * 1024

    def cpu_seconds(self) -> float:
        return self.cpu

    def rss_bytes(self) -> int:
        return self.rss


class Counter:
    def __init__(self) -> None:
        self.total = 0.0

    def __call__(self) -> float:
        return self.total


def sample(
    cpu: float = 0.5, memory: int = 200 << 20, disk: float = 0.5, rate: float = 1_000.0
) -> BrokerLoad:
    return BrokerLoad(
        cpu=cpu,
        memory_bytes=memory,
        disk_used_ratio=disk,
        records_per_second=rate,
        sampled_at_ms=0,
        publish_interval_ms=INTERVAL_MS,
    )


def test_the_sample_is_the_rate_over_the_window_since_the_previous_one() -> None:
    clock, process, records = FakeClock(), FakeProcess(), Counter()
    sampler = LoadSampler(process, lambda: 0.25, records, clock, INTERVAL_MS)
    clock.advance(5)
    process.cpu, records.total = 2.5, 10_000
    first = sampler.sample()
    assert first.cpu == pytest.approx(0.5)  # 2.5 s of CPU in 5 s: half a core
    assert first.records_per_second == pytest.approx(2_000)
    assert (first.memory_bytes, first.disk_used_ratio) == (200 * 1024 * 1024, 0.25)
    assert first.sampled_at_ms == clock.time_ms()
    assert first.publish_interval_ms == INTERVAL_MS
    clock.advance(2)
    process.cpu = 4.5  # 2 s more: one core busy
    second = sampler.sample()
    assert second.cpu == pytest.approx(1.0)
    assert second.records_per_second == 0.0


def test_a_sample_without_elapsed_time_reads_zero_rates() -> None:
    clock, process, records = FakeClock(), FakeProcess(), Counter()
    sampler = LoadSampler(process, lambda: 1.5, records, clock, INTERVAL_MS)
    process.cpu, records.total = 3.0, 50
    taken = sampler.sample()
    assert (taken.cpu, taken.records_per_second) == (0.0, 0.0)
    assert taken.disk_used_ratio == 1.0  # clamped into 0..1


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (sample(), False),
        (sample(cpu=0.54), False),  # 8 %: not a tenth
        (sample(cpu=0.56), True),
        (sample(rate=1_090.0), False),
        (sample(rate=1_200.0), True),
        (sample(memory=(200 << 20) + (10 << 20)), False),  # 5 %
        (sample(memory=(200 << 20) + (30 << 20)), True),
        (sample(disk=0.56), True),
    ],
)
def test_moved_means_by_more_than_a_tenth(current: BrokerLoad, expected: bool) -> None:
    assert moved(sample(), current) is expected


def test_noise_around_zero_moves_nothing() -> None:
    idle = sample(cpu=0.001, rate=0.0)
    assert not moved(idle, sample(cpu=0.03, rate=20.0))  # below the floors
    assert moved(idle, sample(cpu=0.2, rate=0.0))


def test_the_publish_rule() -> None:
    steady, busy = sample(), sample(cpu=1.5)
    assert should_publish(None, steady, 0)  # the first sample
    assert not should_publish(steady, busy, 0)  # never twice in one interval
    assert should_publish(steady, busy, 1)  # moved
    assert not should_publish(steady, steady, 1)  # steady: not yet
    assert should_publish(steady, steady, 2)  # before readers call it stale (at 3)


class FakeRegistrar:
    def __init__(self) -> None:
        self.loads: list[BrokerLoad] = []
        self.accept = True

    async def publish(self, load: BrokerLoad) -> bool:
        if self.accept:
            self.loads.append(load)
        return self.accept


async def test_the_publisher_writes_at_a_bounded_rate() -> None:
    """A minute of ticks: steady load costs a write every two intervals, a load moving at
    every tick a write per interval, never more."""
    clock, process, records = FakeClock(), FakeProcess(), Counter()
    sampler = LoadSampler(process, lambda: 0.5, records, clock, INTERVAL_MS)
    registrar = FakeRegistrar()
    publisher = LoadPublisher(sampler, registrar.publish, clock, INTERVAL_MS)
    task = asyncio.create_task(publisher.run())
    await asyncio.sleep(0)
    for _ in range(12):  # steady: half a core, 1,000 records/s
        process.cpu += 2.5
        records.total += 5_000
        clock.advance(INTERVAL_MS / 1000)
        await asyncio.sleep(0)
    assert publisher.writes == 1 + 11 // 2  # the first, then every second tick
    steady_writes = publisher.writes
    for tick in range(12):  # CPU swinging by half at every tick
        process.cpu += 2.5 if tick % 2 else 5.0
        clock.advance(INTERVAL_MS / 1000)
        await asyncio.sleep(0)
    assert publisher.writes - steady_writes == 12
    stamps = [load.sampled_at_ms for load in registrar.loads[-12:]]
    assert {b - a for a, b in itertools.pairwise(stamps)} == {INTERVAL_MS}
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_refused_write_is_tried_again_at_the_next_tick() -> None:
    clock = FakeClock()
    sampler = LoadSampler(FakeProcess(), lambda: 0.5, Counter(), clock, INTERVAL_MS)
    registrar = FakeRegistrar()
    registrar.accept = False
    publisher = LoadPublisher(sampler, registrar.publish, clock, INTERVAL_MS)
    clock.advance(5)
    assert not await publisher.tick()
    assert publisher.published is None
    registrar.accept = True
    clock.advance(5)
    assert await publisher.tick()
    assert publisher.published == registrar.loads[0]


def test_the_real_readings(tmp_path: Path) -> None:
    process = PsutilProcess()
    assert process.rss_bytes() > 1024 * 1024
    assert process.cpu_seconds() > 0
    assert 0.0 < disk_used_ratio(tmp_path)() <= 1.0
    stats = BrokerTopicStats()
    read = records_appended(stats)
    assert read() == 0
    stats.on_produce("a", 100, 7)
    stats.on_produce("b", 100, 5)
    stats.on_produce("a", 100, 1)
    assert read() == 13
