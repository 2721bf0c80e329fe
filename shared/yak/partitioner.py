"""Choosing a partition for a record, the way Kafka's Java producer does.

Keyed records: ``(murmur2(key) & 0x7fffffff) % num_partitions`` — Kafka's
``BuiltInPartitioner.partitionForKey``, so a key lands on the same partition as with the Java
client (and kafka-python/aiokafka). ``murmur2`` is Kafka's 32-bit MurmurHash2 with seed
0x9747b28c over the serialized key bytes; ``& 0x7fffffff`` is Kafka's ``toPositive`` (not
``abs``); ``num_partitions`` counts every partition of the topic, available or not. An empty
key is a key: it is hashed (to partition 9 of 16); only ``None`` is keyless.

Keyless records, two strategies behind one ``Partitioner`` protocol:

* ``StickyPartitioner`` (KIP-480 / KIP-794): all keyless records of a topic go to one
  partition until ``batch_bytes`` bytes were sent there (or the caller ends the batch with
  ``next_batch``); then it moves to another partition chosen at random, never the same one
  twice in a row when there is a choice. Fewer, fuller batches; uniform over time.
* ``RoundRobinPartitioner``: partition 0, 1, 2 ... per topic. Unlike Java's
  ``RoundRobinPartitioner`` keyed records are still hashed, and there is no KAFKA-9965 skew
  because nothing calls ``partition`` twice per record.

State (sticky partition, bytes, counters) is kept per topic in the instance. Instances are not
thread-safe: use one per event loop or thread. Randomness comes from an injectable
``random.Random`` so tests are deterministic.
"""

from __future__ import annotations

import random
import struct
from typing import Protocol

from yak.errors import InvalidConfigError, InvalidPartitionsError

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "Partitioner",
    "RoundRobinPartitioner",
    "StickyPartitioner",
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
