"""Tests for yak_broker.storage.compaction: a cleaning pass run against a live ``Log``."""

from __future__ import annotations

from pathlib import Path

from yak.clock import FakeClock
from yak.record.batch import decode_batches, encode_batch
from yak.record.record import RecordInput
from yak_broker.storage.compaction import Compactor, cleanable_bases, compact
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import CleanupPolicy, LogConfig

T0 = 1_700_000_000_000
CONFIG = LogConfig(cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=400, delete_retention_ms=0)


def keyed(key: str, value: str | None, timestamp: int = T0) -> bytes:
    encoded = None if value is None else value.encode()
    return encode_batch([RecordInput(key.encode(), encoded, (), timestamp)], now_ms=timestamp)


def latest_values(log: Log) -> dict[bytes, bytes | None]:
    values: dict[bytes, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 100_000, FetchIsolation.LOG_END)
        for batch in decode_batches(fetched.records):
            for record in batch.records:
                assert record.key is not None
                values[record.key] = record.value
        offset = fetched.next_offset
    return values


def write(log: Log, count: int) -> None:
    for i in range(count):
        log.append(keyed(f"k{i % 3}", f"v{i}"), leader_epoch=0)


def test_cleanable_stops_at_the_high_watermark_and_the_active_segment(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CONFIG, FakeClock(T0))
    write(log, 12)
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    assert cleanable_bases(log, T0) == ([], 0)
    log.update_high_watermark(7)
    assert cleanable_bases(log, T0) == ([0], 5)
    log.update_high_watermark(log.log_end_offset)
    bases, end = cleanable_bases(log, T0)
    assert bases == [s.base_offset for s in log.segments[:-1]]
    assert end == log.active_segment.base_offset
    log.close()


def test_compact_keeps_the_latest_value_per_key_and_offsets(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CONFIG, FakeClock(T0))
    write(log, 30)
    log.update_high_watermark(log.log_end_offset)
    before = latest_values(log)
    size_before = log.size
    result = compact(log, T0 + 1000)
    assert result is not None
    assert result.swaps
    assert latest_values(log) == before
    assert log.size < size_before
    assert log.log_end_offset == 30
    assert log.append(keyed("k9", "new"), leader_epoch=0).first_offset == 30
    log.close()
    reopened = Log(tmp_path / "t-0", CONFIG, FakeClock(T0))
    assert latest_values(reopened)[b"k9"] == b"new"
    assert latest_values(reopened)[b"k0"] == before[b"k0"]
    reopened.close()


async def test_compactor_as_the_log_manager_callback(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    log = Log(tmp_path / "t-0", CONFIG, clock)
    write(log, 30)
    log.update_high_watermark(log.log_end_offset)
    compactor = Compactor(clock)
    await compactor(log)
    assert compactor.checkpoints[log.directory] > 0
    segments = len(log.segments)
    await compactor(log)  # nothing dirty since: no second pass
    assert len(log.segments) == segments
    log.close()
