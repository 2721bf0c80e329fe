"""Acknowledgement rounds: a partition at most once per round, its entries in request order."""

from __future__ import annotations

from yak.protocol.kafka_share import AckBatch, AckType
from yak_rest_proxy.consume.share.acknowledgements import AckRange, plan_rounds


def test_one_entry_per_partition_is_one_round() -> None:
    entries = [AckRange("t", 0, 0, 9, AckType.ACCEPT), AckRange("t", 1, 3, 3, AckType.REJECT)]
    rounds = plan_rounds(entries)
    assert [[(r.position, r.entry) for r in round_] for round_ in rounds] == [
        [(0, entries[0]), (1, entries[1])]
    ]


def test_entries_of_one_partition_go_in_successive_rounds_in_order() -> None:
    entries = [
        AckRange("t", 0, 0, 1, AckType.ACCEPT),
        AckRange("u", 0, 5, 5, AckType.RELEASE),
        AckRange("t", 0, 3, 3, AckType.REJECT),
        AckRange("t", 0, 2, 2, AckType.RENEW),
        AckRange("t", 1, 0, 0, AckType.ACCEPT),
    ]
    rounds = plan_rounds(entries)
    assert [[r.position for r in round_] for round_ in rounds] == [[0, 1, 4], [2], [3]]
    for round_ in rounds:
        keys = [(r.entry.topic, r.entry.partition) for r in round_]
        assert len(keys) == len(set(keys))


def test_no_entries_no_rounds() -> None:
    assert plan_rounds([]) == []


def test_an_entry_is_one_batch_with_one_type() -> None:
    assert AckRange("t", 0, 4, 7, AckType.REJECT).batch == AckBatch(4, 7, (3,))
