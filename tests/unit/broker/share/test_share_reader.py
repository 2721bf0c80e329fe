"""Reading the log for a share-partition: the scan ``admit`` is fed (control batches, delays,
filters, the log start), and the read-back of acquired records' whole batches."""

from __future__ import annotations

from tests.unit.broker.share.share_support import MemoryLog
from yak.delays import delay_header
from yak.filters import compile_filter
from yak.record import RecordInput
from yak_broker.share.share_reader import FIRST_READ_BACK_BYTES, find_records, read_back, scan
from yak_broker.share.state.records import LogRange, LogRecord, ReadRequest
from yak_broker.storage.log_info import FetchDataInfo


def _flat(records: list[LogRecord | LogRange]) -> list[LogRecord]:
    """The scan's records one by one (a ``LogRange`` as the records it stands for)."""
    out: list[LogRecord] = []
    for r in records:
        if isinstance(r, LogRange):
            out += [LogRecord(o, r.timestamp_ms) for o in range(r.first_offset, r.last_offset + 1)]
        else:
            out.append(r)
    return out


def _log() -> MemoryLog:
    log = MemoryLog()
    log.values("a", "b")  # 0-1
    log.append([RecordInput(None, b"ctl")], control=True)  # 2
    log.append([RecordInput(None, b"later", (delay_header(5_000),))])  # 3
    log.values('{"k": 1}', '{"k": 2}')  # 4-5
    return log


def test_scan_skips_control_batches_and_reads_due_times_on_delayed_topics() -> None:
    found = scan(_log(), ReadRequest(0, 100), None, delays=True)
    assert found.next_offset == 6
    assert [(r.offset, r.deliver_at_ms) for r in _flat(found.records)] == [
        (0, None), (1, None), (3, 5_000), (4, None), (5, None),
    ]  # fmt: skip
    plain = scan(_log(), ReadRequest(0, 100), None, delays=False)
    assert all(r.deliver_at_ms is None for r in _flat(plain.records))
    assert [r.offset for r in _flat(plain.records)] == [0, 1, 3, 4, 5]


def test_scan_marks_what_the_filter_rejects_and_starts_mid_batch() -> None:
    found = scan(_log(), ReadRequest(5, 100), compile_filter("value.k == 2"), delays=False)
    (record,) = _flat(found.records)
    assert record == LogRecord(5, record.timestamp_ms, None, True)
    found = scan(_log(), ReadRequest(4, 100), compile_filter("value.k == 2"), delays=False)
    assert [r.accepted for r in _flat(found.records)] == [False, True]


def test_scan_stops_at_the_high_watermark_and_jumps_to_the_log_start() -> None:
    log = _log()
    log.high_watermark = 2
    assert scan(log, ReadRequest(0, 100), None, delays=False).next_offset == 2
    log.log_start_offset = 4
    log.high_watermark = 6
    found = scan(log, ReadRequest(0, 100), None, delays=False)
    assert [r.offset for r in _flat(found.records)] == [4, 5]


def test_read_back_gives_whole_batches_and_names_missing_and_rejected_offsets() -> None:
    log = _log()
    back = read_back(log, [1, 2, 4, 5, 9], compile_filter("value.k == 2"))
    assert back.missing == [2, 9]  # a control record; past the end
    assert back.rejected == [1, 4]  # "b" has no JSON value; k == 1
    assert [bytes(b) for b in back.batches] == [log.batches[3]]
    log.log_start_offset = 3
    assert read_back(log, [0, 4], None).missing == [0]


def test_find_records_reads_the_originals() -> None:
    found = find_records(_log(), [1, 3, 5])
    assert {o: r.value for o, r in found.items()} == {1: b"b", 3: b"later", 5: b'{"k": 2}'}


def test_without_delays_or_filter_a_gapless_batch_is_taken_from_its_header() -> None:
    log = MemoryLog()
    log.append([RecordInput(None, b"a", (), 5_000), RecordInput(None, b"b", (), 7_000)])
    plain = scan(log, ReadRequest(0, 100), None, delays=False)
    assert plain.records == [LogRange(0, 1, 5_000)]  # one range, the batch's first timestamp
    assert plain.next_offset == 2
    assert scan(log, ReadRequest(1, 100), None, delays=False).records == [LogRange(1, 1, 5_000)]
    decoded = scan(log, ReadRequest(0, 100), None, delays=True)
    assert [r.timestamp_ms for r in _flat(decoded.records)] == [5_000, 7_000]  # their own


class _CountingLog(MemoryLog):
    """Records the ``max_bytes`` of each read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    def read(self, offset: int, max_bytes: int) -> FetchDataInfo:
        self.reads.append(max_bytes)
        return super().read(offset, max_bytes)


def test_read_back_starts_with_a_small_read_and_doubles_while_it_needs_more() -> None:
    log = _CountingLog()
    value = "v" * 1000
    for _ in range(300):
        log.values(value)  # one record a batch, ~1.1 KB each
    back = read_back(log, [0], None)
    assert len(back.batches) == 1
    assert log.reads == [FIRST_READ_BACK_BYTES]
    log.reads.clear()
    back = read_back(log, list(range(0, 300, 3)), None)
    assert len(back.batches) == 100
    assert log.reads[:3] == [
        FIRST_READ_BACK_BYTES,
        2 * FIRST_READ_BACK_BYTES,
        4 * FIRST_READ_BACK_BYTES,
    ]
    assert back.missing == []
