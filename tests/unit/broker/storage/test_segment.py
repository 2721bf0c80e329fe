"""Tests for yak_broker.storage.segment: append, index rule, reads, recover, truncate, roll."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.broker.storage.batches import make_batch
from yak.record.batch_header import iter_batches, parse_header
from yak_broker.storage.index_file import CorruptIndexError
from yak_broker.storage.log_config import LogConfig
from yak_broker.storage.segment import LogSegment, PendingBatch, segment_file

CONFIG = LogConfig(index_interval_bytes=1000, segment_bytes=100_000)
T0 = 1_700_000_000_000


def append(segment: LogSegment, batch: bytes, base_offset: int, epoch: int = 3) -> None:
    header = parse_header(batch)._replace(base_offset=base_offset, partition_leader_epoch=epoch)
    segment.append(memoryview(batch), [PendingBatch(0, header)], patch=True, size=len(batch))


def fill(segment: LogSegment, count: int, records: int = 2, payload: int = 300) -> list[bytes]:
    batches = []
    for i in range(count):
        batch = make_batch(records, payload, timestamp=T0 + i)
        append(segment, batch, segment.next_offset)
        batches.append(batch)
    return batches


def test_file_names_are_twenty_digit_base_offsets(tmp_path: Path) -> None:
    assert segment_file(tmp_path, 42, ".log").name == "00000000000000000042.log"
    segment = LogSegment(tmp_path, 42, CONFIG, T0)
    segment.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]


def test_append_patches_offsets_and_epoch_and_keeps_the_rest(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 100, CONFIG, T0)
    batch = make_batch(3, 50)
    append(segment, batch, 100, epoch=7)
    append(segment, batch, 103, epoch=7)
    assert segment.next_offset == 106
    data = segment.log_path.read_bytes()
    found = list(iter_batches(data))  # CRC still valid: the patched fields are outside it
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in found] == [(100, 7), (103, 7)]
    assert data[16:].startswith(batch[16:])
    assert len(data) == 2 * len(batch)
    segment.close()


def test_index_entry_after_more_than_interval_bytes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    fill(segment, 10, records=2, payload=339)  # each batch is 400 bytes
    # entries when > 1000 bytes accumulated: before batches 3, 6 and 9 (positions 1200, ...)
    index = segment.offset_index
    assert [index.entry(i) for i in range(index.entries)] == [(7, 1200), (13, 2400), (19, 3600)]
    assert segment.time_index.entries == 3
    segment.close()


def test_find_batch_and_read_whole_batches(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    batches = fill(segment, 10, records=2, payload=339)
    size = len(batches[0])
    for offset in range(20):
        position, header = segment.find_batch(offset) or (-1, None)
        assert header is not None
        assert position == (offset // 2) * size
        assert header.base_offset <= offset <= header.last_offset
    assert segment.find_batch(20) is None
    read = segment.read(size * 2, size * 3 + 10, max_offset=10**9)
    assert len(read.records) == size * 3
    assert read.next_offset == 10
    segment.close()


def test_read_returns_one_whole_batch_even_if_larger_than_max_bytes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    batches = fill(segment, 2, payload=5000)
    read = segment.read(0, 100, max_offset=10**9)
    assert bytes(read.records)[16:] == batches[0][16:]
    assert read.next_offset == 2
    segment.close()


def test_read_stops_at_max_offset(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    batches = fill(segment, 5)
    read = segment.read(0, 10**6, max_offset=4)
    assert len(read.records) == 2 * len(batches[0])
    assert read.next_offset == 4
    assert len(segment.read(0, 10**6, max_offset=0).records) == 0
    segment.close()


def test_find_offset_for_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    fill(segment, 20, records=1)
    assert segment.find_offset_for_timestamp(T0 + 7) == 7
    assert segment.find_offset_for_timestamp(T0 - 100) == 0
    assert segment.find_offset_for_timestamp(T0 + 20) is None
    assert segment.largest_timestamp() == T0 + 19
    segment.close()


def test_clean_reopen_rebuilds_tail_state(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    fill(segment, 13)
    entries = segment.offset_index.entries
    segment.close()
    reopened = LogSegment(tmp_path, 0, CONFIG, T0)
    reopened.sanity_check()
    reopened.load_tail()
    assert reopened.next_offset == 26
    assert reopened.max_timestamp == T0 + 12
    assert reopened.offset_index.entries == entries
    reopened.close()


def test_sanity_check_catches_an_index_that_disagrees_with_the_log(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    fill(segment, 13)
    segment.close()
    index_path = segment.offset_index.path
    data = bytearray(index_path.read_bytes())
    data[-5] ^= 0x01  # last entry: relative offset no longer matches the batch at its position
    index_path.write_bytes(bytes(data))
    reopened = LogSegment(tmp_path, 0, CONFIG, T0)
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()
    reopened.close()


def test_recover_rebuilds_identical_indexes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    fill(segment, 25)
    segment.on_become_inactive()
    segment.close()
    index_bytes = segment.offset_index.path.read_bytes()
    time_bytes = segment.time_index.path.read_bytes()
    reopened = LogSegment(tmp_path, 0, CONFIG, T0)
    assert reopened.recover() == 0
    reopened.on_become_inactive()
    reopened.close()
    assert segment.offset_index.path.read_bytes() == index_bytes
    assert segment.time_index.path.read_bytes() == time_bytes


@pytest.mark.parametrize("cut", [1, 7, 60, 61, 200])
def test_recover_truncates_a_torn_tail(tmp_path: Path, cut: int) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    batches = fill(segment, 4)
    segment.close()
    full = segment.log_path.stat().st_size
    os.truncate(segment.log_path, full - cut)
    reopened = LogSegment(tmp_path, 0, CONFIG, T0)
    assert reopened.recover() == len(batches[0]) - cut
    assert reopened.size == 3 * len(batches[0])
    assert reopened.next_offset == 6
    reopened.close()


def test_recover_stops_at_a_crc_failure_and_at_zero_fill(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    batches = fill(segment, 4)
    segment.close()
    data = bytearray(segment.log_path.read_bytes())
    data[len(batches[0]) * 2 + 100] ^= 0xFF
    segment.log_path.write_bytes(bytes(data) + bytes(4096))
    reopened = LogSegment(tmp_path, 0, CONFIG, T0)
    reopened.recover()
    assert reopened.size == 2 * len(batches[0])
    assert reopened.next_offset == 4
    reopened.close()


def test_recover_rejects_offsets_going_backwards(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    append(segment, make_batch(2), 0)
    append(segment, make_batch(2), 5)
    append(segment, make_batch(2), 3)  # a follower would never write this
    segment.close()
    reopened = LogSegment(tmp_path, 0, CONFIG, T0)
    assert reopened.recover() > 0
    assert reopened.next_offset == 7
    reopened.close()


def test_truncate_to_removes_the_batch_holding_the_offset(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    batches = fill(segment, 12)  # offsets 0..23, two per batch
    removed = segment.truncate_to(9)  # batch 8..9 goes
    assert removed == 8 * len(batches[0])
    assert segment.next_offset == 8
    assert segment.size == 4 * len(batches[0])
    assert segment.offset_index.last_position < segment.size
    assert segment.max_timestamp == T0 + 3
    append(segment, make_batch(2, 300), 8)
    found = segment.find_batch(9)
    assert found is not None
    assert found[0] == 4 * len(batches[0])
    assert (found[1].base_offset, found[1].last_offset) == (8, 9)
    segment.close()


def test_should_roll(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2000, segment_ms=1000, segment_index_bytes=16)
    segment = LogSegment(tmp_path, 0, config, T0)
    assert not segment.should_roll(10**6, T0, 0, T0, config)  # empty: never
    fill(segment, 1)
    size = segment.size
    assert not segment.should_roll(2000 - size, T0, 2, T0, config)
    assert segment.should_roll(2001 - size, T0, 2, T0, config)
    assert not segment.should_roll(10, T0 + 1000, 2, T0, config)  # by record time
    assert segment.should_roll(10, T0 + 1001, 2, T0, config)
    assert segment.should_roll(10, T0 + 600, 2, T0, config, jitter_ms=500)
    assert segment.should_roll(10, T0, 2**31, T0, config)  # relative offset overflow
    segment.close()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 700)), min_size=1, max_size=30),
    interval=st.sampled_from([0, 200, 1000, 4096]),
    data=st.data(),
)
def test_read_agrees_with_a_naive_walk(
    tmp_path: Path, sizes: list[tuple[int, int]], interval: int, data: st.DataObject
) -> None:
    directory = tmp_path / uuid.uuid4().hex
    directory.mkdir()
    segment = LogSegment(directory, 0, LogConfig(index_interval_bytes=interval), T0)
    spans = []  # (position, size, base, next)
    for records, payload in sizes:
        batch = make_batch(records, payload)
        spans.append((segment.size, len(batch), segment.next_offset, segment.next_offset + records))
        append(segment, batch, segment.next_offset)
    start = data.draw(st.integers(0, len(spans) - 1))
    max_bytes = data.draw(st.integers(1, 5000))
    max_offset = data.draw(st.integers(spans[start][2] + 1, spans[-1][3] + 1))
    expected_end, expected_next = spans[start][0], -1
    for position, size, base, next_offset in spans[start:]:
        too_big = position + size - spans[start][0] > max_bytes and position != spans[start][0]
        if base >= max_offset or too_big:
            break
        expected_end, expected_next = position + size, next_offset
    read = segment.read(spans[start][0], max_bytes, max_offset)
    assert len(read.records) == expected_end - spans[start][0]
    assert read.next_offset == expected_next
    segment.close()


def test_a_failed_write_leaves_the_segment_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC after half a batch reached the file: the half is cut off, nothing is indexed,
    and the next append lands where the failed one would have."""
    segment = LogSegment(tmp_path, 0, CONFIG, T0)
    first = fill(segment, 1)[0]
    real_pwritev = os.pwritev

    def half_then_full(fd: int, iov: list[bytes | memoryview], offset: int) -> int:
        data = b"".join(bytes(part) for part in iov)
        real_pwritev(fd, [data[: len(data) // 2]], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", half_then_full)
    with pytest.raises(OSError, match="No space"):
        append(segment, make_batch(2, 300), segment.next_offset)
    monkeypatch.undo()
    assert segment.log_path.stat().st_size == segment.size == len(first)
    assert segment.next_offset == 2
    second = make_batch(2, 300, timestamp=T0 + 1)
    append(segment, second, 2)
    found = list(iter_batches(segment.log_path.read_bytes()))  # CRCs checked
    assert [h.base_offset for _, h in found] == [0, 2]
    assert segment.recover() == 0  # nothing torn to cut
    segment.close()
