"""``SequenceNumbers``: stamps, acknowledgements, give-backs and ended sessions."""

from __future__ import annotations

import pytest

from yak.sdk.idempotence import SEQUENCE_LIMIT, BatchStamp, SequenceNumbers
from yak.types import TopicPartition

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_sequences_advance_per_partition_on_acknowledgement() -> None:
    numbers = SequenceNumbers()
    numbers.start_session(7, 0)
    first = numbers.stamp(P0)
    assert first == BatchStamp(7, 0, 0)
    assert numbers.in_flight(P0)
    numbers.acknowledge(P0, first, 5)
    assert not numbers.in_flight(P0)
    assert numbers.stamp(P0) == BatchStamp(7, 0, 5)
    assert numbers.stamp(P1) == BatchStamp(7, 0, 0)  # partitions count separately


def test_one_batch_in_flight_per_partition() -> None:
    numbers = SequenceNumbers()
    numbers.start_session(1, 0)
    numbers.stamp(P0)
    with pytest.raises(RuntimeError, match="in flight"):
        numbers.stamp(P0)


def test_a_released_batch_gives_its_numbers_to_the_next() -> None:
    numbers = SequenceNumbers()
    numbers.start_session(1, 0)
    numbers.acknowledge(P0, numbers.stamp(P0), 3)
    numbers.stamp(P0)
    numbers.release(P0)  # refused by validation: not written
    assert numbers.stamp(P0).base_sequence == 3


def test_an_ended_session_restarts_every_partition_at_zero() -> None:
    numbers = SequenceNumbers()
    numbers.start_session(1, 0)
    old = numbers.stamp(P0)
    numbers.acknowledge(P0, old, 4)
    in_flight = numbers.stamp(P1)
    lost = numbers.stamp(P0)
    numbers.end_session(lost)  # fate unknown
    assert not numbers.session
    with pytest.raises(RuntimeError, match="no producer session"):
        numbers.stamp(TopicPartition("t", 2))
    numbers.release(P0)
    numbers.start_session(2, 0)
    # The batch still in flight under the old session finishes without touching the new one.
    numbers.acknowledge(P1, in_flight, 10)
    numbers.end_session(in_flight)  # a stale stamp ends nothing
    assert numbers.next_sequence(P1) == 0
    assert numbers.stamp(P1) == BatchStamp(2, 0, 0)
    assert numbers.stamp(P0) == BatchStamp(2, 0, 0)


def test_sequences_wrap_after_the_largest_int32() -> None:
    numbers = SequenceNumbers()
    numbers.start_session(1, 0)
    numbers.acknowledge(P0, BatchStamp(1, 0, SEQUENCE_LIMIT - 2), 5)
    assert numbers.next_sequence(P0) == 3
