"""Tests for yak_broker.storage.time_index."""

from __future__ import annotations

from pathlib import Path

import pytest

from yak_broker.storage.index_file import CorruptIndexError
from yak_broker.storage.time_index import NO_TIMESTAMP, TimeIndex


def test_maybe_append_only_when_the_timestamp_grows(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 1000, 1200)
    assert index.last_timestamp == NO_TIMESTAMP
    assert index.maybe_append(50, 1003)
    assert not index.maybe_append(50, 1004)
    assert not index.maybe_append(40, 1005)
    assert index.maybe_append(60, 1005)
    assert index.entries == 2
    assert (index.last_timestamp, index.last_offset) == (60, 1005)
    index.close()


def test_lookup_before_is_strictly_below(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 1000, 1200)
    index.maybe_append(50, 1003)
    index.maybe_append(60, 1007)
    assert index.lookup_before(50) == 1000
    assert index.lookup_before(51) == 1003
    assert index.lookup_before(60) == 1003
    assert index.lookup_before(61) == 1007
    index.close()


def test_layout_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, 1000, 1200)
    index.maybe_append(0x0102, 1003)
    index.close()
    assert path.read_bytes() == bytes.fromhex("0000000000000102 00000003")
    reopened = TimeIndex(path, 1000, 1200)
    assert (reopened.last_timestamp, reopened.last_offset) == (0x0102, 1003)
    reopened.close()


def test_truncate_to(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    for ts, offset in [(10, 1), (20, 5), (30, 9)]:
        index.maybe_append(ts, offset)
    index.truncate_to(5)
    assert (index.entries, index.last_timestamp) == (1, 10)
    index.close()


def test_offsets_must_not_decrease(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    index.maybe_append(10, 5)
    with pytest.raises(CorruptIndexError):
        index.maybe_append(20, 4)
    index.close()


def test_sanity_check(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    index.maybe_append(10, 5)
    index.sanity_check(6)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(5)
    index.close()
