"""The load-aware partitioner: scores, weights, staleness and sticky batches, on a fake clock
and a seeded random source."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from yak.errors import InvalidConfigError
from yak.metadata.models import BrokerLoad
from yak.partitioner import (
    MIN_SCORE,
    NO_LEADER,
    LoadAwarePartitioner,
    LoadSample,
    choose_partition,
    leader_scores,
    load_weights,
    partition_for_key,
)

NOW = 1_700_000_000_000
INTERVAL = 5_000


def load(
    cpu: float = 0.5,
    rate: float = 1_000.0,
    memory: int = 100_000_000,
    disk: float = 0.5,
    age_ms: int = 0,
) -> BrokerLoad:
    return BrokerLoad(
        cpu=cpu,
        memory_bytes=memory,
        disk_used_ratio=disk,
        records_per_second=rate,
        sampled_at_ms=NOW - age_ms,
        publish_interval_ms=INTERVAL,
    )


class FakeCluster:
    """A ``ClusterLoad`` over fixed leaders and loads, on a clock the test moves."""

    def __init__(self, leaders: Sequence[int], loads: Mapping[int, LoadSample | None]) -> None:
        self.leader_list = list(leaders)
        self.load_map = dict(loads)
        self.now = NOW
        self.asked = 0

    def leaders(self, topic: str, num_partitions: int) -> Sequence[int]:
        self.asked += 1
        return self.leader_list

    def loads(self) -> Mapping[int, LoadSample | None]:
        return self.load_map

    def now_ms(self) -> int:
        return self.now


def test_equal_loads_score_one_each() -> None:
    scores = leader_scores({0: load(), 1: load(), 2: load()}, NOW)
    assert scores == pytest.approx({0: 1.0, 1: 1.0, 2: 1.0})


def test_each_figure_is_normalised_against_the_mean_and_weighted() -> None:
    # Broker 0 has twice the mean CPU and rate of the cluster; memory and disk are equal.
    loads = {0: load(cpu=1.0, rate=3_000.0), 1: load(cpu=0.25, rate=0.0), 2: load(cpu=0.25)}
    scores = leader_scores(loads, NOW)
    # mean cpu 0.5, mean rate 4000/3; broker 0: 0.4*2 + 0.3*2.25 + 0.15 + 0.15.
    assert scores[0] == pytest.approx(0.4 * 2 + 0.3 * 2.25 + 0.3)
    assert scores[1] == pytest.approx(0.4 * 0.5 + 0.3 * 0.0 + 0.3)
    assert sum(scores.values()) / 3 == pytest.approx(1.0)  # the average broker scores 1


def test_a_stale_or_missing_sample_counts_as_the_average_never_as_idle() -> None:
    stale = load(cpu=0.0, rate=0.0, age_ms=3 * INTERVAL + 1)
    scores = leader_scores({0: load(cpu=2.0), 1: stale, 2: None}, NOW)
    assert scores[1] == 1.0
    assert scores[2] == 1.0
    # Only broker 0 is fresh: the mean is its own figures, it scores 1 too.
    assert scores[0] == pytest.approx(1.0)
    # Three intervals old is still fresh (the boundary).
    assert leader_scores({0: load(cpu=0.0, age_ms=3 * INTERVAL), 1: load()}, NOW)[0] < 1.0


def test_a_figure_that_is_zero_everywhere_tells_nothing_apart() -> None:
    scores = leader_scores({0: load(rate=0.0), 1: load(rate=0.0)}, NOW)
    assert scores == pytest.approx({0: 1.0, 1: 1.0})


def test_weights_fall_with_the_square_of_the_score_and_skip_leaderless_partitions() -> None:
    weights = load_weights([0, 1, NO_LEADER, 2, 9], {0: 2.0, 1: 0.5, 2: 0.0})
    assert weights == pytest.approx([0.25, 4.0, 0.0, MIN_SCORE**-2, 1.0])


def test_choose_avoids_the_loaded_leader() -> None:
    rng = random.Random(7)
    leaders = [0, 1, 2, 0, 1, 2]
    loads = {0: load(cpu=1.8, rate=9_000.0), 1: load(cpu=0.1, rate=500.0), 2: load(cpu=0.1)}
    picks = Counter(leaders[choose_partition(leaders, loads, NOW, rng)] for _ in range(3_000))
    assert picks[0] / 3_000 < 0.08  # round robin would give it a third
    assert picks[1] > 1_000
    assert picks[2] > 1_000


def test_choose_is_uniform_when_every_sample_is_stale() -> None:
    rng = random.Random(3)
    leaders = [0, 1, 2]
    loads = {0: load(cpu=1.8, age_ms=60_000), 1: load(age_ms=60_000), 2: None}
    picks = Counter(choose_partition(leaders, loads, NOW, rng) for _ in range(3_000))
    assert all(800 < picks[p] < 1_200 for p in range(3))


def test_choose_without_any_leader_still_picks_a_partition() -> None:
    rng = random.Random(1)
    picks = {choose_partition([NO_LEADER] * 4, {}, NOW, rng) for _ in range(100)}
    assert picks == {0, 1, 2, 3}


def test_keyed_records_still_go_by_murmur2() -> None:
    cluster = FakeCluster([0, 1, 2], {0: load(cpu=5.0), 1: load(), 2: load()})
    partitioner = LoadAwarePartitioner(cluster, rng=random.Random(0))
    for key in (b"", b"a", b"order-17"):
        assert partitioner.partition("t", key, 3) == partition_for_key(key, 3)
    assert cluster.asked == 0


def test_keyless_records_stick_to_one_partition_per_batch() -> None:
    cluster = FakeCluster([0, 1, 2], {0: load(), 1: load(), 2: load()})
    partitioner = LoadAwarePartitioner(cluster, batch_bytes=100, rng=random.Random(5))
    first = [partitioner.partition("t", None, 3, 10) for _ in range(10)]
    assert len(set(first)) == 1
    assert cluster.asked == 1
    partitioner.partition("t", None, 3, 10)
    assert cluster.asked == 2  # 100 bytes sent: a new batch, a new draw
    partitioner.next_batch("t", 3)
    partitioner.partition("t", None, 3, 10)
    assert cluster.asked == 3


def test_batches_follow_the_loads_as_they_change() -> None:
    loads: dict[int, LoadSample | None] = {0: load(cpu=2.0, rate=9_000.0), 1: load(), 2: load()}
    cluster = FakeCluster([0, 1, 2], loads)
    partitioner = LoadAwarePartitioner(cluster, batch_bytes=1, rng=random.Random(11))

    def share_of_0() -> float:
        picks = [partitioner.partition("t", None, 3, 1) for _ in range(2_000)]
        return picks.count(0) / len(picks)

    assert share_of_0() < 0.1
    # The loaded broker's sample goes stale (no newer one arrived): it counts as average.
    cluster.now += 3 * INTERVAL + 1
    cluster.load_map = {0: loads[0], 1: load(age_ms=-3 * INTERVAL - 1), 2: None}
    assert 0.2 < share_of_0() < 0.45


def test_a_topic_that_shrank_draws_again_and_leaders_are_padded() -> None:
    cluster = FakeCluster([0], {0: load()})  # knows one leader of four partitions
    partitioner = LoadAwarePartitioner(cluster, rng=random.Random(2))
    assert partitioner.partition("t", None, 4) == 0  # the only partition with a leader
    assert partitioner.partition("t", None, 1) == 0


def test_batch_bytes_must_be_positive() -> None:
    with pytest.raises(InvalidConfigError):
        LoadAwarePartitioner(FakeCluster([], {}), batch_bytes=0)
