"""The disk fault classes' pure parts: listed with what they need, and the bit flip that
damages one record byte of a sealed segment (framing intact, CRC broken), never the active
segment."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.chaos.disk_faults import flip_sealed_batch
from loadtest.chaos.faults import CLASSES
from tests.unit.broker.storage.batches import make_batch
from yak.errors import CorruptRecordError
from yak.record.batch_header import iter_batches, patch_offset_and_epoch


def stamped(offset: int) -> bytes:
    batch = bytearray(make_batch(1, 30))
    patch_offset_and_epoch(batch, 0, offset, 0)
    return bytes(batch)


def test_the_disk_classes_are_listed_with_what_they_need() -> None:
    by_name = {c.name: c for c in CLASSES}
    assert by_name["disk-full"].shim
    assert not by_name["disk-full"].partitions
    assert ("segment.bytes", "8192") in by_name["bit-rot"].topic_configs
    assert [c.name for c in CLASSES][-1] == "empty-disk"  # still last


def test_flip_sealed_batch_damages_one_batch_of_a_sealed_segment_only(tmp_path: Path) -> None:
    assert flip_sealed_batch(tmp_path, 0) is None  # no segment at all
    sealed = b"".join(stamped(offset) for offset in (0, 1, 2))
    (tmp_path / f"{0:020d}.log").write_bytes(sealed)
    active = stamped(3)
    (tmp_path / f"{3:020d}.log").write_bytes(active)
    assert flip_sealed_batch(tmp_path, 1) in (0, 1, 2)
    after = (tmp_path / f"{0:020d}.log").read_bytes()
    assert len(after) == len(sealed)
    framed = [h.base_offset for _, h in iter_batches(after, check_crc=False)]
    assert framed == [0, 1, 2]  # framing intact: only a record byte changed
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(after))
    assert (tmp_path / f"{3:020d}.log").read_bytes() == active  # the active segment untouched
