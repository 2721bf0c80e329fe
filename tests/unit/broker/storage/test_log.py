"""Tests for yak_broker.storage.log: the partition log facade."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from yak.record.batch_header import iter_batches
from yak_broker.storage.leader_epoch_cache import EpochEntry
from yak_broker.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchIsolation,
    Log,
)
from yak_broker.storage.log_config import LogConfig

T0 = 1_700_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def open_log(path: Path, clock: FakeClock, **config: Any) -> Log:
    return Log(path / "topic-0", LogConfig(**config), clock)


def offsets_of(records: memoryview | bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(records)]


def test_append_assigns_offsets_and_read_returns_them(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    assert log.append(make_batch(3), leader_epoch=0).first_offset == 0
    info = log.append(make_batch(2) + make_batch(1), leader_epoch=0)
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 5, 3)
    assert log.log_end_offset == 6
    log.update_high_watermark(6)
    fetched = log.read(4, 10_000)
    assert offsets_of(fetched.records) == [(3, 4), (5, 5)]
    assert (fetched.next_offset, fetched.high_watermark, fetched.log_end_offset) == (6, 6, 6)
    log.close()


def test_reads_stop_at_the_high_watermark_unless_log_end(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    for _ in range(4):
        log.append(make_batch(1), leader_epoch=0)
    assert log.high_watermark == 0
    assert len(log.read(0, 10_000).records) == 0
    log.update_high_watermark(2)
    assert offsets_of(log.read(0, 10_000).records) == [(0, 0), (1, 1)]
    assert len(log.read(2, 10_000).records) == 0
    assert offsets_of(log.read(2, 10_000, FetchIsolation.LOG_END).records) == [(2, 2), (3, 3)]
    assert len(log.read(4, 10_000, FetchIsolation.LOG_END).records) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 10_000)
    assert log.update_high_watermark(99) == 4
    log.close()


def test_rejected_request_writes_nothing(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(1), leader_epoch=0)
    bad = bytearray(make_batch(1))
    bad[70] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(1) + bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 1
    assert log.size == len(make_batch(1))
    log.close()


def test_roll_by_size_and_read_across_segments(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=1000, index_interval_bytes=200)
    for _ in range(30):
        log.append(make_batch(2, 100), leader_epoch=0)
    assert len(log.segments) == 5  # 6 batches of 161 bytes per 1000-byte segment
    assert all(segment.size <= 1000 for segment in log.segments)
    log.update_high_watermark(log.log_end_offset)
    offset, seen = 0, []
    while offset < log.log_end_offset:
        fetched = log.read(offset, 500)
        seen += offsets_of(fetched.records)
        offset = fetched.next_offset
    assert seen == [(i, i + 1) for i in range(0, 60, 2)]
    for segment in log.segments[1:]:
        assert offsets_of(log.read(segment.base_offset, 1).records)[0][0] == segment.base_offset
    log.close()


def test_roll_by_time_uses_record_timestamps(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_ms=1000)
    log.append(make_batch(1, timestamp=T0), leader_epoch=0)
    log.append(make_batch(1, timestamp=T0 + 1000), leader_epoch=0)
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=T0 + 1001), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_offset_for_timestamp(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=600)
    for i in range(20):
        log.append(make_batch(2, timestamp=T0 + 10 * i), leader_epoch=0)
    log.update_high_watermark(30)
    assert log.offset_for_timestamp(T0 + 55) == 12
    assert log.offset_for_timestamp(T0 + 50) == 10
    assert log.offset_for_timestamp(T0 - 1) == 0
    assert log.offset_for_timestamp(T0 + 150) is None  # only above the high watermark
    assert log.offset_for_timestamp(T0 + 150, FetchIsolation.LOG_END) == 30
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == 30
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == 0
    log.close()


def test_truncate_to_across_segments(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=600)
    for epoch in (1, 1, 1, 2, 2, 2, 3, 3):
        log.append(make_batch(2, 100), leader_epoch=epoch)
    log.update_high_watermark(16)
    log.flush()
    segments_before = len(log.segments)
    assert log.truncate_to(7)  # the batch 6..7 goes too
    assert log.log_end_offset == 6
    assert len(log.segments) < segments_before
    assert (log.high_watermark, log.recovery_point) == (6, 6)
    assert log.leader_epochs.entries == (EpochEntry(1, 0),)
    assert not log.truncate_to(6)
    assert log.append(make_batch(1), leader_epoch=4).first_offset == 6
    log.close()
    reopened = open_log(tmp_path, clock, segment_bytes=600)
    assert reopened.log_end_offset == 7
    assert reopened.leader_epochs.entries == (EpochEntry(1, 0), EpochEntry(4, 6))
    reopened.close()


def test_leader_epoch_cache_is_fed_by_appends(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(2), leader_epoch=1)
    log.append(make_batch(2), leader_epoch=1)
    log.append(make_batch(2), leader_epoch=3)
    assert log.leader_epochs.entries == (EpochEntry(1, 0), EpochEntry(3, 4))
    assert log.leader_epochs.end_offset_for(1, log.log_end_offset) == (1, 4)
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 4\n"
    log.close()


def test_follower_append_keeps_leader_offsets(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_follower(
        make_batch(2, base_offset=0, epoch=4) + make_batch(3, base_offset=2, epoch=5)
    )
    assert log.log_end_offset == 5
    assert log.leader_epochs.entries == (EpochEntry(4, 0), EpochEntry(5, 2))
    log.close()


def idempotent(seq: int, count: int = 2, epoch: int = 0) -> bytes:
    return make_batch(count, producer_id=77, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_producer_duplicates_gaps_and_fencing(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(1), leader_epoch=0)
    first = log.append(idempotent(0), leader_epoch=0)
    log.append(idempotent(2), leader_epoch=0)
    retry = log.append(idempotent(0), leader_epoch=0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(7), leader_epoch=0)
    log.append(idempotent(0, epoch=1), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(idempotent(4, epoch=0), leader_epoch=0)
    assert log.log_end_offset == 7
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_a_restart(tmp_path: Path, clock: FakeClock, clean: bool) -> None:
    log = open_log(tmp_path, clock, segment_bytes=400)
    for seq in range(0, 12, 2):
        log.append(idempotent(seq), leader_epoch=0)
    if clean:
        log.close()
    else:
        log.close_without_marker()
    reopened = open_log(tmp_path, clock, segment_bytes=400)
    assert reopened.had_clean_shutdown is clean
    retry = reopened.append(idempotent(10), leader_epoch=0)
    assert retry.duplicate
    assert retry.first_offset == 10
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(idempotent(13), leader_epoch=0)
    assert reopened.append(idempotent(12), leader_epoch=0).first_offset == 12
    reopened.close()


def test_flush_policy(tmp_path: Path, clock: FakeClock) -> None:
    lazy = open_log(tmp_path / "a", clock)
    lazy.append(make_batch(5), leader_epoch=0)
    assert lazy.recovery_point == 0  # Kafka's default: no fsync on the write path
    assert not lazy.flush_due()
    lazy.close()
    eager = open_log(tmp_path / "b", clock, flush_messages=3)
    eager.append(make_batch(2), leader_epoch=0)
    assert eager.recovery_point == 0
    eager.append(make_batch(1), leader_epoch=0)
    assert eager.recovery_point == 3
    eager.close()
    timed = open_log(tmp_path / "c", clock, flush_ms=1000)
    timed.append(make_batch(1), leader_epoch=0)
    assert not timed.flush_due()
    clock.advance(1.0)
    assert timed.flush_due()
    timed.close()


def test_clean_close_and_reopen(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=500)
    for i in range(10):
        log.append(make_batch(1, 100, timestamp=T0 + i), leader_epoch=2)
    log.update_high_watermark(8)
    log.close()
    assert (log.directory / ".clean-shutdown").exists()
    reopened = open_log(tmp_path, clock, segment_bytes=500)
    assert reopened.had_clean_shutdown
    assert not (log.directory / ".clean-shutdown").exists()
    assert (reopened.log_end_offset, reopened.high_watermark, reopened.recovery_point) == (
        10,
        8,
        10,
    )
    assert reopened.append(make_batch(1), leader_epoch=2).first_offset == 10
    assert reopened.offset_for_timestamp(T0 + 5) == 5
    reopened.close()


def test_retention_by_size_respects_the_high_watermark(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300, retention_bytes=600)
    batch = make_batch(1, 150)  # 211 bytes: one batch per segment
    for _ in range(8):
        log.append(batch, leader_epoch=0)
    assert len(log.segments) == 8
    log.update_high_watermark(3)
    assert log.delete_old_segments() == 3  # segments 0..2 end at or below the HW
    assert log.log_start_offset == 3
    log.update_high_watermark(8)
    assert log.delete_old_segments() == 2  # 5 x 211 bytes; deleting a third leaves < 600
    assert log.size == 3 * len(batch)
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000)
    log.close()
    assert sorted(p.name for p in log.directory.glob("*.log"))[0] == "00000000000000000005.log"


def test_retention_by_time_never_deletes_the_active_segment(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300, retention_ms=10_000)
    for i in range(4):
        log.append(make_batch(1, 150, timestamp=T0 + i * 1000), leader_epoch=0)
    log.update_high_watermark(4)
    clock.advance(10.5)  # now = T0 + 10_500: only the first segment (T0) is older than 10 s
    assert log.delete_old_segments() == 1
    clock.advance(100)
    assert log.delete_old_segments() == 2
    assert len(log.segments) == 1
    assert log.log_start_offset == 3
    log.close()


def test_delete_records(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=300)
    for _ in range(6):
        log.append(make_batch(1, 150), leader_epoch=0)
    log.update_high_watermark(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(5)
    assert log.delete_records(3) == 3
    assert [s.base_offset for s in log.segments] == [3, 4, 5]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert offsets_of(log.read(3, 100).records) == [(3, 3)]
    log.close_without_marker()
    reopened = open_log(tmp_path, clock, segment_bytes=300)
    assert reopened.log_start_offset == 3
    reopened.close()


def test_leader_epoch_accessors_for_replication(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    assert log.end_offset_for_epoch(0) == (-1, -1)  # no epoch known
    for epoch, count in ((0, 3), (2, 2)):
        for _ in range(count):
            log.append(make_batch(1), leader_epoch=epoch)
    assert log.latest_epoch == 2
    # KIP-279: the largest epoch <= the one asked, and where the next one starts (or the LEO).
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(1) == (0, 3)
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(3) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    log.close()
    empty = open_log(tmp_path / "empty", clock)
    assert empty.latest_epoch is None
    empty.close()


def epoch_entries(log: Log) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in log.leader_epochs.entries]


def test_assign_epoch_stamps_a_new_leader_epoch_before_any_append(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(2), leader_epoch=0)
    log.assign_epoch(3, log.log_end_offset)
    assert log.latest_epoch == 3
    assert log.end_offset_for_epoch(0) == (0, 2)  # epoch 0 ended where epoch 3 starts
    assert log.end_offset_for_epoch(3) == (3, 2)
    log.append(make_batch(1), leader_epoch=3)  # the stamp stands: the epoch started at 2
    assert epoch_entries(log) == [(0, 0), (3, 2)]
    # A follower's copy keeps the leader's epochs: the cache learns them from the batches.
    log.append_as_follower(make_batch(1, base_offset=3, epoch=4))
    assert epoch_entries(log) == [(0, 0), (3, 2), (4, 3)]
    log.truncate_to(3)
    assert log.latest_epoch == 3
    log.close_without_marker()
    reopened = open_log(tmp_path, clock)
    assert epoch_entries(reopened) == [(0, 0), (3, 2)]
    reopened.close()


def test_a_stamp_without_records_does_not_survive_a_restart(
    tmp_path: Path, clock: FakeClock
) -> None:
    """As Kafka's loader: epochs starting at or past the log end are dropped on load (the new
    leader stamps its epoch again when it leads)."""
    log = open_log(tmp_path, clock)
    log.append(make_batch(1), leader_epoch=0)
    log.assign_epoch(1, 1)
    log.close_without_marker()
    reopened = open_log(tmp_path, clock)
    assert reopened.latest_epoch == 0
    reopened.close()


def test_truncate_fully_and_start_at_moves_the_high_watermark_to_the_new_start(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(1), leader_epoch=0)
    log.truncate_fully_and_start_at(40)
    try:
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (40, 40, 40)
    finally:
        log.close()


def test_truncate_to_the_log_end_drops_an_empty_epoch_stamped_there(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Kafka's ``truncateTo`` always truncates the epoch cache from the LEO: a broker that led an
    epoch without appending must not keep answering for it once it follows (KIP-279)."""
    log = open_log(tmp_path, clock)
    log.append(make_batch(1), leader_epoch=0)
    log.assign_epoch(5, 1)
    log.truncate_to(1)
    try:
        assert log.latest_epoch == 0
    finally:
        log.close()


# --- dirty tracking: the owner's hooks --------------------------------------------------------


def test_on_unflushed_fires_when_a_flushed_log_gets_data(tmp_path: Path, clock: FakeClock) -> None:
    log = open_log(tmp_path, clock)
    calls: list[str] = []
    log.on_unflushed = lambda: calls.append("unflushed")
    assert not log.has_unflushed
    log.append(make_batch(2), leader_epoch=0)
    log.append(make_batch(1), leader_epoch=0)  # already unflushed: no second call needed
    assert (calls, log.has_unflushed) == (["unflushed"], True)
    log.flush()
    assert not log.has_unflushed
    log.append_as_follower(make_batch(1, base_offset=3, epoch=0))
    assert (calls, log.has_unflushed) == (["unflushed"] * 2, True)
    log.close()


def test_on_unflushed_fires_after_a_truncation_below_the_recovery_point(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(4), leader_epoch=0)
    log.flush()
    log.truncate_to(2)  # the recovery point follows the LEO down: flushed still
    calls: list[str] = []
    log.on_unflushed = lambda: calls.append("unflushed")
    assert not log.has_unflushed
    log.append(make_batch(1), leader_epoch=0)
    assert calls == ["unflushed"]
    log.close()


def test_on_unflushed_fires_when_the_log_restarts_above_its_recovery_point(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    calls: list[str] = []
    log.on_unflushed = lambda: calls.append("unflushed")
    log.truncate_fully_and_start_at(100)
    assert (calls, log.has_unflushed, log.flush_due()) == (["unflushed"], True, True)
    log.flush()
    assert (log.recovery_point, log.has_unflushed) == (100, False)
    log.close()


def test_on_checkpoint_stale_fires_once_until_the_checkpoint_is_written(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    calls: list[str] = []
    log.on_checkpoint_stale = lambda: calls.append("stale")
    log.append(make_batch(3), leader_epoch=0)
    log.update_high_watermark(0)  # unchanged
    assert (calls, log.checkpoint_stale) == ([], False)
    log.update_high_watermark(2)
    log.update_high_watermark(3)
    assert (calls, log.checkpoint_stale) == (["stale"], True)
    assert log.write_checkpoint()
    assert not log.checkpoint_stale
    log.flush()  # the recovery point moves
    assert (calls, log.checkpoint_stale) == (["stale"] * 2, True)
    assert log.write_checkpoint()
    log.delete_records(2)  # writes the checkpoint itself
    assert not log.checkpoint_stale
    log.close()


def test_a_log_loaded_after_a_crash_reports_its_unflushed_data(
    tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append(make_batch(3), leader_epoch=0)
    log.close_without_marker()
    again = open_log(tmp_path, clock)
    assert (again.recovery_point, again.log_end_offset) == (0, 3)
    assert again.has_unflushed
    assert not again.checkpoint_stale
    again.close()
