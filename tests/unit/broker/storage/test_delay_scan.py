"""Tests for yak_broker.storage.delay_scan: delayed records and cancels found in log bytes."""

from __future__ import annotations

import struct

from yak.delays import CANCEL_CONTROL_TYPE, DELIVER_AT_HEADER, cancel_batch, delay_header
from yak.record import CompressionType, RecordInput, encode_batch
from yak.record.batch_header import patch_offset_and_epoch
from yak_broker.storage.delay_scan import Cancellation, scan_delays

NOW = 1_767_225_600_000


def _batch(base_offset: int, *records: RecordInput, **kwargs: object) -> bytes:
    return encode_batch(list(records), base_offset=base_offset, now_ms=NOW, **kwargs)  # type: ignore[arg-type]


def _delayed(due: int, value: bytes = b"v") -> RecordInput:
    return RecordInput(value=value, headers=(delay_header(due),))


def _at(raw: bytes, base_offset: int) -> bytes:
    patched = bytearray(raw)
    patch_offset_and_epoch(patched, 0, base_offset, 0)
    return bytes(patched)


def test_delayed_records_in_offset_order_with_their_due_times() -> None:
    log = _batch(0, RecordInput(value=b"plain"), _delayed(NOW + 5), _delayed(NOW + 1)) + _batch(
        3, _delayed(NOW + 3), compression=CompressionType.GZIP
    )
    scan = scan_delays(log)
    assert list(scan.offsets) == [1, 2, 3]
    assert list(scan.deliver_at) == [NOW + 5, NOW + 1, NOW + 3]
    assert scan.cancels == ()
    assert scan.next_offset == 4


def test_records_below_the_cursor_are_left_out() -> None:
    log = _batch(10, _delayed(NOW + 1), _delayed(NOW + 2), _delayed(NOW + 3))
    scan = scan_delays(log, from_offset=12)
    assert list(scan.offsets) == [12]
    assert scan.next_offset == 13
    assert len(scan_delays(log, from_offset=13).offsets) == 0


def test_malformed_and_absent_headers_are_not_delays() -> None:
    log = _batch(
        0,
        RecordInput(value=b"mentions yak-deliver-at in its value"),
        RecordInput(value=b"x", headers=((DELIVER_AT_HEADER, b"tomorrow"),)),
        RecordInput(value=b"x", headers=(("yak-deliver-at-not", b"5"),)),
    )
    scan = scan_delays(log)
    assert len(scan.offsets) == 0
    assert scan.next_offset == 3


def test_cancels_are_found_and_transaction_markers_skipped() -> None:
    marker = _batch(
        4,
        RecordInput(key=struct.pack(">hh", 0, 1), value=struct.pack(">hi", 0, 0)),
        is_control=True,
        is_transactional=True,
        producer_id=7,
        producer_epoch=0,
    )
    log = _batch(0, _delayed(NOW + 9)) + _at(cancel_batch(0, NOW + 9, NOW), 1) + marker
    scan = scan_delays(log)
    assert list(scan.offsets) == [0]
    assert scan.cancels == (Cancellation(at_offset=1, offset=0, deliver_at=NOW + 9),)
    assert scan.next_offset == 5
    assert scan.skipped_cancels == 0


def test_a_damaged_cancel_is_counted_not_fatal() -> None:
    bad = RecordInput(key=struct.pack(">hh", 0, CANCEL_CONTROL_TYPE), value=b"\x00")
    log = _batch(0, bad, is_control=True) + _batch(1, _delayed(NOW))
    scan = scan_delays(log)
    assert scan.cancels == ()
    assert scan.skipped_cancels == 1
    assert list(scan.offsets) == [1]


def test_an_empty_read_has_no_next_offset() -> None:
    scan = scan_delays(b"")
    assert scan.next_offset is None
    assert len(scan.offsets) == len(scan.deliver_at) == 0
