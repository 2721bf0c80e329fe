"""Bit rot on read: a sealed segment's damaged batch is never returned; the batches before it
are; the active segment is served as appended (checked on append)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.errors import KafkaStorageError
from yak.record.batch_header import iter_batches
from yak_broker.storage.damaged_batch import DamagedBatchError, intact_prefix
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import LogConfig

T0 = 1_700_000_000_000


def flip(buf: bytes, position: int) -> bytes:
    damaged = bytearray(buf)
    damaged[position] ^= 0x10
    return bytes(damaged)


def test_intact_prefix_stops_before_the_first_damaged_batch() -> None:
    a, b, c = make_batch(1, 20), make_batch(1, 20), make_batch(1, 20)
    whole = memoryview(a + b + c)
    assert intact_prefix(whole, "t-0", 0) is whole
    second_bad = memoryview(a + flip(b, len(b) - 1) + c)
    assert bytes(intact_prefix(second_bad, "t-0", 0)) == a
    with pytest.raises(DamagedBatchError, match="holding offset 7") as raised:
        intact_prefix(memoryview(flip(a, 70) + b), "t-0", 7)
    assert isinstance(raised.value, KafkaStorageError)
    assert raised.value.retriable
    assert raised.value.details == {"offset": 7}


def test_a_sealed_segment_never_serves_a_damaged_batch(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300), FakeClock(T0))
    for _ in range(6):
        log.append(make_batch(2, 100), leader_epoch=0)  # one batch per segment
    log.update_high_watermark(log.log_end_offset)
    sealed = log.directory / f"{4:020d}.log"
    sealed.write_bytes(flip(sealed.read_bytes(), 100))
    with pytest.raises(DamagedBatchError):
        log.read(4, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    with pytest.raises(DamagedBatchError):
        log.read(5, 1 << 20, FetchIsolation.LOG_END)  # the same batch
    before = log.read(2, 1 << 20)
    assert [h.base_offset for _, h in iter_batches(before.records)] == [2]
    active = log.directory / f"{10:020d}.log"
    active.write_bytes(flip(active.read_bytes(), 100))
    assert log.read(10, 1 << 20).records  # the active segment: checked on append only
