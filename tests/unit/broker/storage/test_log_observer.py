"""Tests for yak_broker.storage.log: the observer hooks and the broker's control-batch append."""

from __future__ import annotations

from pathlib import Path

import pytest

from yak.delays import cancel_batch
from yak.errors import InvalidRecordError
from yak.record import RecordInput, encode_batch
from yak.record.batch import decode_batch
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import LogConfig

NOW = 1_767_225_600_000


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def appended(self) -> None:
        self.events.append(("appended",))

    def truncated(self, log_end_offset: int, log_start_offset: int) -> None:
        self.events.append(("truncated", log_end_offset, log_start_offset))

    def log_start_moved(self, log_start_offset: int) -> None:
        self.events.append(("start", log_start_offset))

    def closed(self, clean: bool) -> None:
        self.events.append(("closed", clean))


def _records(count: int) -> bytes:
    return encode_batch([RecordInput(value=b"v")] * count, now_ms=NOW)


def _log(path: Path) -> tuple[Log, Recorder]:
    log = Log.open(path, LogConfig(segment_bytes=1 << 20))
    recorder = Recorder()
    log.observer = recorder
    return log, recorder


def test_appends_truncations_and_log_start_moves_are_told(tmp_path: Path) -> None:
    log, recorder = _log(tmp_path / "t-0")
    log.append(_records(3), 0)
    log.append(_records(2), 0)
    log.update_high_watermark(5)
    log.truncate_to(3)
    log.delete_records(2)
    assert recorder.events == [("appended",), ("appended",), ("truncated", 3, 0), ("start", 2)]
    log.truncate_fully_and_start_at(10)
    assert recorder.events[-1] == ("truncated", 10, 10)
    log.close()


def test_close_tells_once_and_lets_go(tmp_path: Path) -> None:
    log, recorder = _log(tmp_path / "t-0")
    log.close()
    log.close()
    assert recorder.events == [("closed", True)]
    assert log.observer is None


def test_delete_tells_an_unclean_close(tmp_path: Path) -> None:
    log, recorder = _log(tmp_path / "t-0")
    log.delete()
    assert recorder.events == [("closed", False)]


def test_append_control_writes_a_cancel_at_the_log_end_with_the_epoch(tmp_path: Path) -> None:
    log, recorder = _log(tmp_path / "t-0")
    log.append(_records(2), 4)
    info = log.append_control(cancel_batch(1, NOW + 60_000, NOW), 4)
    assert (info.first_offset, info.last_offset) == (2, 2)
    assert log.log_end_offset == 3
    read = log.read(2, 1 << 16, FetchIsolation.LOG_END)
    batch = decode_batch(read.records)
    assert batch.header.is_control
    assert batch.header.partition_leader_epoch == 4
    assert [record.offset for record in batch.records] == [2]
    assert recorder.events[-1] == ("appended",)
    log.close()


def test_append_control_refuses_data_and_clients_cannot_write_control(tmp_path: Path) -> None:
    log, _ = _log(tmp_path / "t-0")
    with pytest.raises(ValueError, match="control"):
        log.append_control(_records(1), 0)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append(cancel_batch(0, NOW, NOW), 0)
    assert log.log_end_offset == 0
    log.close()
