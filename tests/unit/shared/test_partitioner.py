import random
import warnings
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.errors import InvalidConfigError, InvalidPartitionsError
from yak.partitioner import (
    Partitioner,
    RoundRobinPartitioner,
    StickyPartitioner,
    murmur2,
    partition_for_key,
)

with warnings.catch_warnings():
    # kafka-python's package import uses a deprecated importlib API; not our code.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kp_murmur2

# Kafka's UtilsTest.testMurmur2 vectors, plus the empty key (see reference/kafka.md §6.1).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafkas_published_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(
    ("key", "partition"),
    [
        (b"21", 12),
        (b"foobar", 14),
        (b"a-little-bit-long-string", 0),
        (b"a-little-bit-longer-string", 3),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 13),
        (b"abc", 11),
        (b"", 9),
    ],
)
def test_partition_for_key_of_16_partitions(key: bytes, partition: int) -> None:
    assert partition_for_key(key, 16) == partition


@settings(max_examples=3000, deadline=None)
@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_murmur2_agrees_with_kafka_python(key: bytes, partitions: int) -> None:
    theirs = kp_murmur2(key)  # kafka-python returns the unsigned 32-bit value
    assert murmur2(key) & 0xFFFFFFFF == theirs
    assert partition_for_key(key, partitions) == (theirs & 0x7FFFFFFF) % partitions


def test_positive_mask_is_not_abs() -> None:
    # toPositive(-973932308) is 1173551340; abs() would give 973932308 and another partition.
    assert murmur2(b"21") & 0x7FFFFFFF == 1173551340
    assert partition_for_key(b"21", 7) == 1173551340 % 7 != 973932308 % 7


@pytest.mark.parametrize("partitioner", [StickyPartitioner(), RoundRobinPartitioner()])
def test_keyed_records_always_hash(partitioner: Partitioner) -> None:
    for key, _ in KAFKA_VECTORS:
        for _ in range(3):
            assert partitioner.partition("t", key, 16, 100) == partition_for_key(key, 16)


@pytest.mark.parametrize("count", [0, -1])
def test_a_topic_without_partitions_is_refused(count: int) -> None:
    with pytest.raises(InvalidPartitionsError):
        partition_for_key(b"k", count)
    with pytest.raises(InvalidPartitionsError):
        StickyPartitioner().partition("t", None, count)
    with pytest.raises(InvalidPartitionsError):
        RoundRobinPartitioner().partition("t", None, count)


def test_sticky_stays_until_the_byte_threshold_then_moves() -> None:
    sticky = StickyPartitioner(batch_bytes=1000, rng=random.Random(1))
    first = [sticky.partition("t", None, 8, 100) for _ in range(10)]
    assert len(set(first)) == 1  # 10 x 100 bytes fill exactly one batch
    moved = sticky.partition("t", None, 8, 100)
    assert moved != first[0]
    assert [sticky.partition("t", None, 8, 100) for _ in range(9)] == [moved] * 9


def test_sticky_switches_after_one_oversized_record() -> None:
    sticky = StickyPartitioner(batch_bytes=1000, rng=random.Random(2))
    a = sticky.partition("t", None, 8, 5000)
    b = sticky.partition("t", None, 8, 10)
    assert a != b


def test_sticky_keeps_one_partition_per_topic() -> None:
    sticky = StickyPartitioner(batch_bytes=10**9, rng=random.Random(3))
    picks = {t: {sticky.partition(t, None, 1000, 1) for _ in range(50)} for t in "abcdef"}
    assert all(len(p) == 1 for p in picks.values())
    assert len({next(iter(p)) for p in picks.values()}) > 1  # topics chose independently


def test_sticky_next_batch_moves_to_another_partition() -> None:
    sticky = StickyPartitioner(batch_bytes=10**9, rng=random.Random(4))
    current = sticky.partition("t", None, 4)
    for _ in range(50):
        sticky.next_batch("t", 4)
        following = sticky.partition("t", None, 4)
        assert following != current
        current = following


def test_sticky_batches_spread_uniformly() -> None:
    sticky = StickyPartitioner(batch_bytes=100, rng=random.Random(5))
    counts = Counter(sticky.partition("t", None, 10, 100) for _ in range(20_000))
    assert set(counts) == set(range(10))
    assert max(counts.values()) < 1.15 * min(counts.values())


def test_sticky_single_partition_and_shrinking_topics() -> None:
    sticky = StickyPartitioner(batch_bytes=1, rng=random.Random(6))
    assert {sticky.partition("t", None, 1, 10) for _ in range(5)} == {0}
    sticky = StickyPartitioner(batch_bytes=10**9, rng=random.Random(7))
    picks = [sticky.partition("t", None, 100) for _ in range(3)]
    assert all(sticky.partition("t", None, 2) in (0, 1) for _ in range(20))
    sticky.next_batch("t", 1)
    assert sticky.partition("t", None, 1) == 0
    assert len(set(picks)) == 1


def test_sticky_threshold_must_be_positive() -> None:
    with pytest.raises(InvalidConfigError):
        StickyPartitioner(batch_bytes=0)


def test_round_robin_cycles_per_topic() -> None:
    rr = RoundRobinPartitioner()
    assert [rr.partition("a", None, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [rr.partition("b", None, 2) for _ in range(3)] == [0, 1, 0]
    # Keyed records in between do not disturb the keyless cycle.
    rr.partition("a", b"key", 3)
    assert rr.partition("a", None, 3) == 1


def test_round_robin_spreads_exactly_evenly() -> None:
    rr = RoundRobinPartitioner()
    counts = Counter(rr.partition("t", None, 7) for _ in range(7000))
    assert set(counts.values()) == {1000}
