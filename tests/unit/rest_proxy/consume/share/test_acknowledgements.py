"""Acknowledgement entries by partition, and each entry's result from its partition's answer."""

from __future__ import annotations

from yak.errors import InvalidRecordStateError, NotLeaderOrFollowerError
from yak.protocol.kafka_share import AckBatch, AckType
from yak_rest_proxy.consume.share.acknowledgements import (
    AckRange,
    RoundEntry,
    by_partition,
    entry_results,
)


def test_entries_are_grouped_by_partition_in_request_order() -> None:
    entries = [
        AckRange("t", 0, 0, 1, AckType.ACCEPT),
        AckRange("u", 0, 5, 5, AckType.RELEASE),
        AckRange("t", 0, 3, 3, AckType.REJECT),
        AckRange("t", 0, 2, 2, AckType.RENEW),
        AckRange("t", 1, 0, 0, AckType.ACCEPT),
    ]
    grouped = by_partition([RoundEntry(i, e) for i, e in enumerate(entries)])
    assert list(grouped) == [("t", 0), ("u", 0), ("t", 1)]
    assert [r.position for r in grouped[("t", 0)]] == [0, 2, 3]
    assert [r.position for r in grouped[("u", 0)]] == [1]


def test_no_entries_no_partitions() -> None:
    assert by_partition([]) == {}


def _items(*positions: int) -> list[RoundEntry]:
    return [RoundEntry(p, AckRange("t", 0, p, p, AckType.ACCEPT)) for p in positions]


def test_an_answer_without_error_applies_every_entry() -> None:
    assert entry_results(_items(4, 7, 9), None, ()) == {4: None, 7: None, 9: None}


def test_only_the_listed_batches_get_the_error() -> None:
    error = InvalidRecordStateError("not held")
    results = entry_results(_items(4, 7, 9), error, (0, 2))
    assert results == {4: error, 7: None, 9: error}


def test_an_error_without_indices_is_every_entrys() -> None:
    error = NotLeaderOrFollowerError("moved")
    assert entry_results(_items(1, 2), error, ()) == {1: error, 2: error}


def test_an_entry_is_one_batch_with_one_type() -> None:
    assert AckRange("t", 0, 4, 7, AckType.REJECT).batch == AckBatch(4, 7, (3,))
