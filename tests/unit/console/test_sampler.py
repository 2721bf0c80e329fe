"""The sampler's derivations (pure) and its loop against an in-process fake admin."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from yak.api.admin import (
    BrokerLogDir,
    BrokerTopicLogs,
    ClusterInfo,
    LogDirs,
    ReplicaLog,
    TopicLog,
    TopicLogDirs,
)
from yak.api.groups import GroupDescription, GroupList, PartitionLag
from yak.errors import NetworkError
from yak_console.sampler import Sampler, derive, leader_logs


def replica(topic: str, partition: int, hw: int, *, leader: bool, size: int = 100) -> ReplicaLog:
    return ReplicaLog(
        topic=topic,
        partition=partition,
        is_leader=leader,
        leader_epoch=1,
        size_bytes=size,
        segments=1,
        log_start_offset=0,
        high_watermark=hw,
        log_end_offset=hw,
    )


def dirs(*replicas: tuple[int, ReplicaLog]) -> LogDirs:
    by_broker: dict[int, list[ReplicaLog]] = {}
    for broker_id, r in replicas:
        by_broker.setdefault(broker_id, []).append(r)
    return LogDirs(
        brokers=[BrokerLogDir(broker_id=b, replicas=rs) for b, rs in sorted(by_broker.items())]
    )


def topic(name: str, hw: int, *, leaders: int = 1, size: int = 100) -> TopicLog:
    """A topic on one broker: one replica, led there when ``leaders``, log start 0."""
    led = leaders > 0
    return TopicLog(
        topic=name,
        replicas=1,
        leaders=leaders,
        size_bytes=size,
        leader_size_bytes=size if led else 0,
        records=hw if led else 0,
        high_watermark_sum=hw if led else 0,
    )


def topic_dirs(*topics: tuple[int, TopicLog]) -> TopicLogDirs:
    by_broker: dict[int, list[TopicLog]] = {}
    for broker_id, t in topics:
        by_broker.setdefault(broker_id, []).append(t)
    return TopicLogDirs(
        brokers=[BrokerTopicLogs(broker_id=b, topics=ts) for b, ts in sorted(by_broker.items())]
    )


def group(name: str, *committed: tuple[str, int, int | None]) -> GroupDescription:
    return GroupDescription(
        group_id=name,
        state="Stable",
        group_epoch=1,
        assignor="uniform",
        members=[],
        partitions=[
            PartitionLag(
                topic=t, partition=p, committed_offset=c, end_offset=100, lag=0, owner=None
            )
            for t, p, c in committed
        ],
        total_lag=0,
    )


def test_partition_logs_come_from_the_leader_and_sum_replica_bytes() -> None:
    logs = leader_logs(
        dirs(
            (0, replica("a", 0, 7, leader=True, size=70)),
            (1, replica("a", 0, 5, leader=False, size=50)),
        )
    )
    log = logs[("a", 0)]
    assert (log.high_watermark, log.size_bytes, log.replica_bytes, log.records) == (7, 70, 120, 7)
    assert list(logs) == [("a", 0)]


def test_topic_totals_count_each_led_partition_once_and_every_replica_byte() -> None:
    sample = derive(
        None,
        1,
        10.0,
        None,
        topic_dirs(
            (0, topic("a", 7, size=70)),
            (1, topic("a", 0, leaders=0, size=50)),
            (1, topic("b", 3, size=30)),
        ),
        {},
    )
    a, b = sample.topics["a"], sample.topics["b"]
    assert (a.size_bytes, a.replica_bytes, a.records, a.high_watermark_sum) == (70, 120, 7, 7)
    assert (b.size_bytes, b.replica_bytes, b.records) == (30, 30, 3)
    assert (sample.produce_rate, sample.consume_rate) == (0.0, 0.0)


def test_rates_are_growth_per_second_per_topic() -> None:
    first = derive(
        None,
        1,
        10.0,
        None,
        topic_dirs((0, topic("a", 100)), (0, topic("b", 10))),
        {"g": group("g", ("a", 0, 50))},
    )
    second = derive(
        first,
        2,
        12.0,
        None,
        topic_dirs((0, topic("a", 300)), (0, topic("b", 10))),
        {"g": group("g", ("a", 0, 90))},
    )
    assert second.produce_rate == pytest.approx(100.0)
    assert second.topic_produce_rates == {"a": pytest.approx(100.0), "b": 0.0}
    assert second.consume_rate == pytest.approx(20.0)
    assert second.topic_consume_rates == {"a": pytest.approx(20.0)}


def test_a_counter_that_went_down_counts_as_no_growth() -> None:
    first = derive(None, 1, 1.0, None, None, {"g": group("g", ("a", 0, 90))})
    reset = derive(first, 2, 2.0, None, None, {"g": group("g", ("a", 0, 0))})
    assert reset.consume_rate == 0.0
    uncommitted = derive(reset, 3, 3.0, None, None, {"g": group("g", ("a", 0, None))})
    assert uncommitted.topic_consume_rates == {}


class FakeAdmin:
    """Answers like AsyncAdmin; ``fail`` makes the named calls raise."""

    def __init__(self) -> None:
        self.hw = 0
        self.fail: set[str] = set()
        self.asked: list[tuple[Sequence[str] | None, Sequence[int] | None]] = []

    async def cluster(self) -> ClusterInfo:
        if "cluster" in self.fail:
            raise NetworkError("proxy down")
        return ClusterInfo(
            cluster_id="c",
            coordinator_id="0",
            controller=None,
            brokers=[],
            topic_count=1,
            partition_count=1,
            offline_partition_count=0,
            under_replicated_partition_count=1,
        )

    async def log_dir_topics(self) -> TopicLogDirs:
        return topic_dirs((0, topic("a", self.hw)))

    async def log_dirs(
        self, topics: Sequence[str] | None = None, brokers: Sequence[int] | None = None
    ) -> LogDirs:
        self.asked.append((topics, brokers))
        if "log dirs" in self.fail:
            raise NetworkError("proxy down")
        return dirs(
            (0, replica("a", 0, self.hw, leader=True)), (1, replica("a", 1, 5, leader=True))
        )

    async def list_groups(self) -> GroupList:
        return GroupList(groups=[])

    async def describe_group(self, name: str) -> GroupDescription:
        raise AssertionError(name)


async def test_refresh_wakes_waiters_and_keeps_the_last_good_part() -> None:
    admin = FakeAdmin()
    sampler = Sampler(admin, interval_s=60, history=3)  # type: ignore[arg-type]
    waiter = asyncio.create_task(sampler.wait_next(0, timeout_s=5))
    await asyncio.sleep(0)
    first = await sampler.refresh()
    assert await waiter is first
    assert first.under_replicated == 1

    admin.fail.add("cluster")
    admin.hw = 10
    second = await sampler.refresh()
    assert second.cluster == first.cluster  # the last good answer stays on the page
    assert second.errors == ("cluster: proxy down",)
    assert second.topics["a"].high_watermark_sum == 10

    for _ in range(3):
        await sampler.refresh()
    assert [s.seq for s in sampler.history] == [3, 4, 5]
    assert await sampler.wait_next(5, timeout_s=0.01) is None


async def test_the_loop_samples_and_stops() -> None:
    sampler = Sampler(FakeAdmin(), interval_s=0.01, history=10)  # type: ignore[arg-type]
    sampler.start()
    assert await sampler.wait_next(2, timeout_s=5) is not None
    await sampler.stop()
    assert sampler.latest is not None


class _Monotonic:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _watchable(admin: FakeAdmin, clock: _Monotonic) -> Sampler:
    return Sampler(
        admin,  # type: ignore[arg-type]
        interval_s=2,
        idle_interval_s=30,
        watch_s=60,
        history=10,
        monotonic=clock,
    )


async def test_samples_often_only_while_someone_looks() -> None:
    clock = _Monotonic()
    sampler = _watchable(FakeAdmin(), clock)
    assert not sampler.watched()
    assert sampler.pause() == 30  # nobody looking: the idle interval
    await sampler.current()  # a page looks
    assert sampler.watched()
    assert sampler.pause() == 2
    clock.now += 59
    assert sampler.pause() == 2
    clock.now += 2  # a minute without a page or an event stream
    assert sampler.pause() == 30
    waiting = asyncio.create_task(sampler.wait_next(99, timeout_s=0.01))  # an event stream
    await waiting
    assert sampler.pause() == 2


async def test_a_slow_sampling_spaces_the_next_ones_out() -> None:
    clock = _Monotonic()

    class SlowAdmin(FakeAdmin):
        async def log_dir_topics(self) -> TopicLogDirs:
            clock.now += 0.5  # the sampling takes half a second (a big cluster)
            return await super().log_dir_topics()

    sampler = _watchable(SlowAdmin(), clock)
    await sampler.current()
    assert sampler.pause() == pytest.approx(5.0)  # ten times the duration, over the 2 s


async def test_a_page_after_a_quiet_spell_gets_a_fresh_sample() -> None:
    clock = _Monotonic()
    admin = FakeAdmin()
    sampler = _watchable(admin, clock)
    first = await sampler.current()
    assert (await sampler.current()) is first  # fresh enough: no new sampling
    clock.now += 3  # past the interval, within twice the pause: the loop's job
    assert (await sampler.current()) is first
    clock.now += 120  # nobody looked for two minutes
    admin.hw = 42
    fresh = await sampler.current()
    assert fresh.seq == first.seq + 1
    assert fresh.topics["a"].high_watermark_sum == 42


async def test_the_idle_loop_wakes_when_a_page_looks() -> None:
    sampler = Sampler(
        FakeAdmin(),  # type: ignore[arg-type]
        interval_s=0.01,
        idle_interval_s=3600,
        watch_s=0.05,
        history=10,
    )
    sampler.start()
    assert await sampler.wait_next(0, timeout_s=5) is not None  # looked at for 50 ms
    await asyncio.sleep(0.1)  # nobody since: the loop sleeps for an hour
    quiet = sampler.latest
    assert quiet is not None
    await asyncio.sleep(0.1)
    assert sampler.latest is quiet  # no sampling while unwatched
    assert await sampler.wait_next(quiet.seq + 2, timeout_s=5) is not None  # watched again
    await sampler.stop()


async def test_samples_ask_for_per_topic_sums_and_pages_for_one_topic_or_broker() -> None:
    admin = FakeAdmin()
    admin.hw = 9
    sampler = Sampler(admin, interval_s=60)  # type: ignore[arg-type]
    await sampler.refresh()
    assert admin.asked == []  # sampling never lists every replica
    logs = await sampler.topic_logs("a")
    assert {p: log.high_watermark for p, log in logs.items()} == {0: 9, 1: 5}
    found = await sampler.broker_log_dir(1)
    assert found is not None
    assert [r.partition for r in found.replicas] == [1]
    assert admin.asked == [(["a"], None), (None, [1])]
    admin.fail.add("log dirs")
    assert await sampler.topic_logs("a") == {}  # the page shows no offsets, not an error
    assert await sampler.broker_log_dir(1) is None
