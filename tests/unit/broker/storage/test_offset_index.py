"""Tests for yak_broker.storage.offset_index (and the shared index_file behaviour)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yak_broker.storage.index_file import CorruptIndexError
from yak_broker.storage.offset_index import OffsetIndex, OffsetPosition


def test_lookup_finds_the_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100, 1024)
    assert index.lookup(150) == OffsetPosition(100, 0)
    for offset, position in [(110, 4000), (120, 9000), (135, 13000)]:
        index.append(offset, position)
    assert index.lookup(100) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 4000)
    assert index.lookup(134) == (120, 9000)
    assert index.lookup(10**9) == (135, 13000)
    assert index.last_offset == 135
    assert index.last_position == 13000


def test_entries_are_buffered_until_flush_and_then_persisted(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 1024)
    index.append(5, 100)
    index.append(9, 200)
    assert path.stat().st_size == 0
    index.flush()
    assert path.read_bytes() == bytes.fromhex("00000005 00000064 00000009 000000c8")
    index.close()
    reopened = OffsetIndex(path, 0, 1024)
    assert reopened.entries == 2
    assert reopened.lookup(7) == (5, 100)
    reopened.close()


def test_append_must_increase(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 1024)
    index.append(5, 100)
    with pytest.raises(CorruptIndexError):
        index.append(5, 200)
    with pytest.raises(CorruptIndexError):
        index.append(6, 100)
    index.close()


def test_full_is_counted_in_entries(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 8 * 3)
    for i in range(3):
        assert not index.is_full()
        index.append(i + 1, (i + 1) * 10)
    assert index.is_full()
    index.append(10, 1000)  # skipped: a sparse index may miss entries, appends never fail
    assert index.entries == 3
    assert index.lookup(10) == (3, 30)
    index.close()


def test_truncate_to_drops_entries_at_or_above(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 1024)
    for offset in (10, 20, 30):
        index.append(offset, offset * 10)
    index.flush()
    index.truncate_to(20)
    assert index.entries == 1
    assert index.lookup(25) == (10, 100)
    assert path.stat().st_size == 8
    index.append(22, 220)
    index.close()
    assert OffsetIndex(path, 0, 1024).lookup(25) == (22, 220)


def test_torn_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(bytes(8 * 2 + 3))
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(path, 0, 1024)


def test_unordered_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(bytes.fromhex("00000005 00000064 00000004 000000c8"))
    with pytest.raises(CorruptIndexError, match="increasing"):
        OffsetIndex(path, 0, 1024)


def test_sanity_check_against_log_size(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 1024)
    index.append(5, 500)
    index.sanity_check(501)
    with pytest.raises(CorruptIndexError, match="beyond"):
        index.sanity_check(500)
    index.close()
