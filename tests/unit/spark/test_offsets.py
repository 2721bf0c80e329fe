"""Offset arithmetic of the ``yak`` source: JSON offsets, splits, rate limits and data loss."""

from __future__ import annotations

import pytest

from yak.spark.offsets import (
    DataLossError,
    OffsetRange,
    check_end,
    check_start,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from yak.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_json_round_trip_uses_string_partition_keys():
    doc = offsets_to_json({A1: 5, A0: 3, B0: 0})
    assert doc == {"a": {"0": 3, "1": 5}, "b": {"0": 0}}
    assert offsets_from_json(doc) == {A0: 3, A1: 5, B0: 0}


@pytest.mark.parametrize(
    "doc", [[], {"a": 1}, {"a": {"x": 1}}, {"a": {"0": -1}}, {"a": {"0": "1"}}]
)
def test_bad_json_offsets(doc):
    with pytest.raises(ValueError, match="yak offset"):
        offsets_from_json(doc)


def test_split_by_max_records_covers_the_range_exactly():
    pieces = split_ranges([OffsetRange("a", 0, 10, 35), OffsetRange("a", 1, 5, 5)], max_records=10)
    assert pieces == [
        OffsetRange("a", 0, 10, 18),
        OffsetRange("a", 0, 18, 26),
        OffsetRange("a", 0, 26, 35),
    ]


def test_split_by_min_partitions_gives_big_ranges_more_pieces():
    pieces = split_ranges(
        [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 0, 10)], min_partitions=5
    )
    assert [(p.partition, p.start, p.end) for p in pieces] == [
        (0, 0, 22),
        (0, 22, 45),
        (0, 45, 67),
        (0, 67, 90),
        (1, 0, 10),
    ]


def test_ranges_from_the_log_start_are_kept_whole():
    whole = OffsetRange("a", 0, None, 100)
    assert split_ranges([whole], max_records=10, min_partitions=4) == [whole]


def test_rate_limit_shares_in_proportion_and_sums_to_the_limit():
    ends = rate_limit({A0: 0, A1: 10, B0: 0}, {A0: 60, A1: 40, B0: 1}, 10)
    assert ends == {A0: 7, A1: 13, B0: 0}  # 60:30:1 of 10 → 6.6, 3.3, 0.1
    assert sum(ends[tp] - s for tp, s in {A0: 0, A1: 10, B0: 0}.items()) == 10


def test_rate_limit_remainders_go_to_the_largest_fractions():
    ends = rate_limit({A0: 0, A1: 0, B0: 0}, {A0: 1, A1: 1, B0: 1}, 2)
    assert ends == {A0: 1, A1: 1, B0: 0}


def test_rate_limit_above_the_backlog_changes_nothing():
    assert rate_limit({A0: 3}, {A0: 5}, 100) == {A0: 5}


def test_check_start():
    assert check_start(A0, 10, 5, fail_on_data_loss=True) == 10
    assert check_start(A0, 3, 5, fail_on_data_loss=False) == 5
    with pytest.raises(DataLossError, match=r"a-0: offsets 3 to 4 were deleted.*failOnDataLoss"):
        check_start(A0, 3, 5, fail_on_data_loss=True)


def test_check_end():
    assert check_end(A0, 10, 10, 50, fail_on_data_loss=True) is False
    assert check_end(A0, 5, 10, 50, fail_on_data_loss=True) is True
    assert check_end(A0, 8, 10, 8, fail_on_data_loss=False) is False
    with pytest.raises(DataLossError, match="now ends at 8"):
        check_end(A0, 8, 10, 8, fail_on_data_loss=True)
