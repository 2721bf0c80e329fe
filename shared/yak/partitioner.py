"""Choosing a partition for a record, the way Kafka's Java producer does.

Keyed records: ``(murmur2(key) & 0x7fffffff) % num_partitions`` — Kafka's
``BuiltInPartitioner.partitionForKey``, so a key lands on the same partition as with the Java
client (and kafka-python/aiokafka). ``murmur2`` is Kafka's 32-bit MurmurHash2 with seed
0x9747b28c over the serialized key bytes; ``& 0x7fffffff`` is Kafka's ``toPositive`` (not
``abs``); ``num_partitions`` counts every partition of the topic, available or not. An empty
key is a key: it is hashed (to partition 9 of 16); only ``None`` is keyless.

Keyless records, three strategies behind one ``Partitioner`` protocol:

* ``StickyPartitioner`` (KIP-480 / KIP-794): all keyless records of a topic go to one
  partition until ``batch_bytes`` bytes were sent there (or the caller ends the batch with
  ``next_batch``); then it moves to another partition chosen at random, never the same one
  twice in a row when there is a choice. Fewer, fuller batches; uniform over time.
* ``RoundRobinPartitioner``: partition 0, 1, 2 ... per topic. Unlike Java's
  ``RoundRobinPartitioner`` keyed records are still hashed, and there is no KAFKA-9965 skew
  because nothing calls ``partition`` twice per record.
* ``LoadAwarePartitioner``: sticky batches like ``StickyPartitioner``, but each new batch's
  partition is drawn with a weight that falls with the load of the partition's leader
  (``leader_scores``, ``load_weights``): records are steered away from the busiest leaders.
  The scoring is a pure function of (partitions' leaders, the brokers' load samples, now);
  the partitioner reads both through a ``ClusterLoad`` its user provides (the proxy's
  metadata cache, the SDK's metadata), so this module knows nothing of either. See
  docs/partitioning.md for the weights, staleness and why batches stay sticky.

State (sticky partition, bytes, counters) is kept per topic in the instance. Instances are not
thread-safe: use one per event loop or thread. Randomness comes from an injectable
``random.Random`` so tests are deterministic.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from yak.errors import InvalidConfigError, InvalidPartitionsError

#: The strategies for keyless records, by the name a setting or a request gives.
PartitionerName = Literal["sticky", "round_robin", "load_aware"]
PARTITIONERS: tuple[PartitionerName, ...] = ("sticky", "round_robin", "load_aware")

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "PARTITIONERS",
    "ClusterLoad",
    "LoadAwarePartitioner",
    "LoadSample",
    "Partitioner",
    "PartitionerName",
    "RoundRobinPartitioner",
    "StickyPartitioner",
    "choose_partition",
    "leader_scores",
    "load_weights",
    "murmur2",
    "partition_for_key",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
DEFAULT_BATCH_BYTES = 16_384  # the Java producer's default batch.size


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: 32-bit MurmurHash2 (seed 0x9747b28c) as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    words = length >> 2
    # Little-endian 4-byte words, as Java assembles them byte by byte.
    for k in struct.unpack_from(f"<{words}I", data) if words else ():
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _check_count(num_partitions: int) -> None:
    if num_partitions <= 0:
        raise InvalidPartitionsError(
            f"a topic has at least one partition, not {num_partitions}",
            num_partitions=num_partitions,
        )


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition of a keyed record: ``toPositive(murmur2(key)) % num_partitions``."""
    _check_count(num_partitions)
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class Partitioner(Protocol):
    """Picks the partition of each record sent to a topic."""

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, record_size: int = 0
    ) -> int:
        """The partition for one record; ``record_size`` (bytes) feeds sticky batching."""
        ...


class StickyPartitioner:
    """Keyed records by murmur2; keyless ones stick to a random partition per batch.

    ``batch_bytes`` is the switch threshold (Java's ``batch.size``): after that many bytes of
    keyless records went to the sticky partition, the next keyless record starts a new batch
    on another partition.
    """

    def __init__(
        self, batch_bytes: int = DEFAULT_BATCH_BYTES, rng: random.Random | None = None
    ) -> None:
        if batch_bytes <= 0:
            raise InvalidConfigError(f"batch_bytes must be positive, not {batch_bytes}")
        self._batch_bytes = batch_bytes
        self._rng = rng if rng is not None else random.Random()
        # topic -> [sticky partition, bytes sent to it in the current batch]
        self._sticky: dict[str, list[int]] = {}

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, record_size: int = 0
    ) -> int:
        """The partition for one record (see the class docstring)."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        _check_count(num_partitions)
        state = self._sticky.get(topic)
        if state is None or state[0] >= num_partitions:
            state = self._sticky[topic] = [self._rng.randrange(num_partitions), 0]
        elif state[1] >= self._batch_bytes:
            state[0] = self._other_partition(state[0], num_partitions)
            state[1] = 0
        state[1] += record_size
        return state[0]

    def next_batch(self, topic: str, num_partitions: int) -> None:
        """End the current sticky batch of ``topic`` now (KIP-480's ``onNewBatch``)."""
        _check_count(num_partitions)
        state = self._sticky.get(topic)
        if state is not None:
            state[0] = self._other_partition(state[0], num_partitions)
            state[1] = 0

    def _other_partition(self, current: int, num_partitions: int) -> int:
        if current >= num_partitions:  # the topic has fewer partitions than it had
            return self._rng.randrange(num_partitions)
        if num_partitions == 1:
            return 0
        # Uniform over the partitions other than the current one.
        pick = self._rng.randrange(num_partitions - 1)
        return pick + 1 if pick >= current else pick


class RoundRobinPartitioner:
    """Keyed records by murmur2; keyless ones to partitions 0, 1, 2 ... in turn, per topic."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, record_size: int = 0
    ) -> int:
        """The partition for one record (see the class docstring)."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        _check_count(num_partitions)
        counter = self._next.get(topic, 0)
        self._next[topic] = counter + 1
        return counter % num_partitions


# --- load-aware ------------------------------------------------------------------------------

#: The weight of each figure of a leader's load in its score (they sum to 1): CPU first (what
#: a produce costs a broker), then the append rate (what it is already doing), then memory
#: and disk (slow to move, and on a shared host the same for every broker).
CPU_WEIGHT = 0.4
RATE_WEIGHT = 0.3
MEMORY_WEIGHT = 0.15
DISK_WEIGHT = 0.15
#: A sample older than this many of its broker's publish intervals is ignored.
STALE_INTERVALS = 3
#: A partition's weight is ``score ** -SKEW``: 2 sends a leader at twice the average a
#: sixteenth of what one at half the average gets.
SKEW = 2
#: The least score counted (an idle broker is not infinitely attractive).
MIN_SCORE = 0.05
#: No leader known (-1): the partition is chosen only when no partition has one.
NO_LEADER = -1


class LoadSample(Protocol):
    """What the partitioner reads of a broker's load (``yak.metadata.models.BrokerLoad``, or
    its API twin ``yak.api.admin.BrokerLoadInfo``)."""

    @property
    def cpu(self) -> float: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def disk_used_ratio(self) -> float: ...
    @property
    def records_per_second(self) -> float: ...
    @property
    def sampled_at_ms(self) -> int: ...
    @property
    def publish_interval_ms(self) -> int: ...


class ClusterLoad(Protocol):
    """Where a ``LoadAwarePartitioner`` reads the cluster: cached, never a request per call."""

    def leaders(self, topic: str, num_partitions: int) -> Sequence[int]:
        """The leader of each partition ``0..num_partitions-1`` (``NO_LEADER`` if unknown)."""
        ...

    def loads(self) -> Mapping[int, LoadSample | None]:
        """Each known broker's latest load sample (None: it published none)."""
        ...

    def now_ms(self) -> int:
        """Wall-clock time in ms (samples carry the broker's wall clock)."""
        ...


_WEIGHTS = (CPU_WEIGHT, RATE_WEIGHT, MEMORY_WEIGHT, DISK_WEIGHT)


def _figures(sample: LoadSample) -> tuple[float, float, float, float]:
    """A sample's figures in ``_WEIGHTS`` order."""
    return (
        sample.cpu,
        sample.records_per_second,
        float(sample.memory_bytes),
        sample.disk_used_ratio,
    )


def _fresh(sample: LoadSample, now_ms: int) -> bool:
    return now_ms - sample.sampled_at_ms <= STALE_INTERVALS * sample.publish_interval_ms


def leader_scores(loads: Mapping[int, LoadSample | None], now_ms: int) -> dict[int, float]:
    """Each broker's load score: its figures, each divided by the mean of the brokers with a
    fresh sample, weighted and summed. The cluster's average broker scores 1.0, and so does a
    broker whose sample is stale or missing (never idle: 0). A figure that is 0 on every
    broker counts 1 for each (it tells them apart in nothing)."""
    fresh = {b: _figures(s) for b, s in loads.items() if s is not None and _fresh(s, now_ms)}
    scores = dict.fromkeys(loads, 1.0)
    if not fresh:
        return scores
    means = [sum(column) / len(fresh) for column in zip(*fresh.values(), strict=True)]
    for broker, figures in fresh.items():
        scores[broker] = sum(
            weight * (figure / mean if mean > 0 else 1.0)
            for weight, figure, mean in zip(_WEIGHTS, figures, means, strict=True)
        )
    return scores


def load_weights(leaders: Sequence[int], scores: Mapping[int, float]) -> list[float]:
    """Each partition's chance weight: ``max(score, MIN_SCORE) ** -SKEW`` of its leader
    (a leader without a score counts 1.0), 0 for a partition without a leader."""
    return [
        0.0 if leader == NO_LEADER else max(scores.get(leader, 1.0), MIN_SCORE) ** -SKEW
        for leader in leaders
    ]


def choose_partition(
    leaders: Sequence[int],
    loads: Mapping[int, LoadSample | None],
    now_ms: int,
    rng: random.Random,
) -> int:
    """A partition drawn with ``load_weights`` (uniform when no partition has a leader)."""
    weights = load_weights(leaders, leader_scores(loads, now_ms))
    if not any(weights):
        return rng.randrange(len(leaders))
    return rng.choices(range(len(leaders)), weights)[0]


class LoadAwarePartitioner:
    """Keyed records by murmur2; keyless ones sticky per batch, each batch's partition drawn
    away from loaded leaders (``choose_partition``).

    Sticky, not a draw per record: one batch per partition at a time keeps the batching of
    KIP-480, and the loads move every few seconds, not per record. A draw, not always the best
    leader: every producer reads the same samples, and all of them piling onto the one idle
    leader until the next sample would make it the busiest (a herd); weights spread records in
    proportion instead.
    """

    def __init__(
        self,
        cluster: ClusterLoad,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        rng: random.Random | None = None,
    ) -> None:
        if batch_bytes <= 0:
            raise InvalidConfigError(f"batch_bytes must be positive, not {batch_bytes}")
        self._cluster = cluster
        self._batch_bytes = batch_bytes
        self._rng = rng if rng is not None else random.Random()
        # topic -> [sticky partition, bytes sent to it in the current batch]
        self._sticky: dict[str, list[int]] = {}

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, record_size: int = 0
    ) -> int:
        """The partition for one record (see the class docstring)."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        _check_count(num_partitions)
        state = self._sticky.get(topic)
        if state is None or state[0] >= num_partitions or state[1] >= self._batch_bytes:
            state = self._sticky[topic] = [self._choose(topic, num_partitions), 0]
        state[1] += record_size
        return state[0]

    def next_batch(self, topic: str, num_partitions: int) -> None:
        """End the current batch of ``topic`` now: the next keyless record draws again."""
        _check_count(num_partitions)
        self._sticky.pop(topic, None)

    def _choose(self, topic: str, num_partitions: int) -> int:
        cluster = self._cluster
        leaders = list(cluster.leaders(topic, num_partitions))[:num_partitions]
        leaders += [NO_LEADER] * (num_partitions - len(leaders))
        return choose_partition(leaders, cluster.loads(), cluster.now_ms(), self._rng)
