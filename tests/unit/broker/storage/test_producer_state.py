"""Tests for yak_broker.storage.producer_state: dedupe window, sequence rules, snapshots."""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yak.clock import FakeClock
from yak.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from yak.record.batch_header import BatchHeader
from yak_broker.storage.producer_state import (
    BATCHES_TO_RETAIN,
    BatchMetadata,
    CorruptSnapshotError,
    DuplicateBatch,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    snapshot_path,
)

INT32_MAX = 2**31 - 1
CONTROL = 0x20


def hdr(
    pid: int,
    epoch: int,
    seq: int,
    count: int = 1,
    offset: int = 0,
    ts: int = 1000,
    attributes: int = 0,
) -> BatchHeader:
    """A batch header as the log holds it (offsets assigned)."""
    return BatchHeader(
        base_offset=offset,
        batch_length=49 + 10 * count,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=ts,
        max_timestamp=ts + count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=count,
    )


class Log:
    """A fake partition log driving the manager the way the real one will."""

    def __init__(self, manager: ProducerStateManager, clock: FakeClock) -> None:
        self.manager = manager
        self.clock = clock
        self.end = 0
        self.headers: list[BatchHeader] = []

    def produce(
        self, pid: int, epoch: int, seq: int, count: int = 1, control: bool = False
    ) -> DuplicateBatch | BatchHeader:
        ts = self.clock.time_ms()
        attributes = CONTROL if control else 0
        incoming = hdr(pid, epoch, seq, count, offset=-1, ts=ts, attributes=attributes)
        duplicate = self.manager.check(incoming)
        if duplicate is not None:
            return duplicate
        appended = incoming._replace(base_offset=self.end)
        self.end = appended.next_offset
        self.headers.append(appended)
        self.manager.update(appended, self.clock.time_ms())
        return appended


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log(tmp_path: Path, clock: FakeClock) -> Log:
    return Log(ProducerStateManager(tmp_path), clock)


def test_new_producer_accepts_any_sequence(log: Log) -> None:
    assert log.manager.check(hdr(7, 0, 12345)) is None
    assert log.manager.check(hdr(7, 3, INT32_MAX)) is None
    first = log.produce(7, 0, 42, count=3)
    assert isinstance(first, BatchHeader)
    assert log.manager.last_entry(7) is not None
    assert log.manager.last_entry(7).last_seq == 44  # type: ignore[union-attr]


def test_in_sequence_batches_are_accepted(log: Log) -> None:
    for seq in range(0, 30, 3):
        assert isinstance(log.produce(1, 0, seq, count=3), BatchHeader)
    assert log.end == 30
    assert log.manager.map_end_offset == 30


def test_duplicate_of_each_of_the_last_five_returns_original_offsets(log: Log) -> None:
    appended = []
    for i in range(8):
        log.clock.advance(1)
        batch = log.produce(1, 0, 2 * i, count=2)
        assert isinstance(batch, BatchHeader)
        appended.append(batch)
    for original in appended[-BATCHES_TO_RETAIN:]:
        result = log.produce(1, 0, original.base_sequence, count=2)
        assert result == DuplicateBatch(
            original.base_offset, original.last_offset, original.max_timestamp
        )
    assert log.end == 16  # nothing was appended twice
    # The sixth-newest fell out of the window: it is now just an old sequence.
    with pytest.raises(OutOfOrderSequenceError) as info:
        log.produce(1, 0, appended[-6].base_sequence, count=2)
    assert info.value.details["expected_sequence"] == 16


def test_partial_overlap_is_not_a_duplicate(log: Log) -> None:
    log.produce(1, 0, 0, count=4)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 0, 0, count=2)  # same first seq, different last seq


@pytest.mark.parametrize("seq", [6, 100, 4, INT32_MAX, 0])
def test_gap_or_old_sequence_is_out_of_order(log: Log, seq: int) -> None:
    log.produce(1, 0, 0, count=2)
    log.produce(1, 0, 2, count=3)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 0, seq)
    assert isinstance(log.produce(1, 0, 5), BatchHeader)  # the expected one still works


def test_new_epoch_must_start_at_zero(log: Log) -> None:
    log.produce(1, 0, 0, count=5)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 1, 5)
    assert isinstance(log.produce(1, 1, 0, count=2), BatchHeader)
    entry = log.manager.last_entry(1)
    assert entry is not None
    assert entry.epoch == 1
    assert [b.first_seq for b in entry.batches] == [0]  # the window restarted


def test_older_epoch_is_fenced(log: Log) -> None:
    log.produce(1, 0, 0)
    log.produce(1, 2, 0)
    with pytest.raises(InvalidProducerEpochError) as info:
        log.produce(1, 1, 0)
    assert info.value.details == {"producer_id": 1, "epoch": 1, "current_epoch": 2}
    # Even an exact retry of a batch from the old epoch is fenced, not deduplicated.
    with pytest.raises(InvalidProducerEpochError):
        log.produce(1, 0, 0)


def test_producers_are_independent(log: Log) -> None:
    log.produce(1, 0, 0, count=3)
    log.produce(2, 5, 100)
    assert isinstance(log.produce(1, 0, 3), BatchHeader)
    assert isinstance(log.produce(2, 5, 101), BatchHeader)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(2, 5, 3)


def test_sequence_wraps_at_int32_max(log: Log) -> None:
    log.produce(1, 0, INT32_MAX - 1, count=2)  # last seq is INT32_MAX
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 0, INT32_MAX + 1)
    assert isinstance(log.produce(1, 0, 0), BatchHeader)


def test_batch_spanning_the_wrap(log: Log) -> None:
    log.produce(1, 0, INT32_MAX - 1, count=4)  # seqs MAX-1, MAX, 0, 1
    entry = log.manager.last_entry(1)
    assert entry is not None
    assert entry.last_seq == 1
    assert isinstance(log.manager.check(hdr(1, 0, INT32_MAX - 1, count=4)), DuplicateBatch)
    assert isinstance(log.produce(1, 0, 2), BatchHeader)


def test_last_batch_offsets(log: Log) -> None:
    log.produce(1, 0, 0, count=3)
    log.produce(2, 0, 0, count=2)
    log.produce(1, 0, 3, count=2)
    log.produce(3, 0, -1, control=True)  # an epoch without batches keeps nothing
    assert log.manager.last_batch_offsets() == {1: 6, 2: 4}


def test_batches_without_producer_id_are_not_tracked(log: Log) -> None:
    log.produce(-1, -1, -1, count=3)
    assert log.manager.producers == {}
    assert log.manager.map_end_offset == 3
    assert log.manager.check(hdr(-1, -1, -1)) is None


def test_control_batch_moves_epoch_and_is_fenced_when_old(log: Log) -> None:
    log.produce(1, 0, 0, count=2)
    log.produce(1, 1, -1, control=True)
    entry = log.manager.last_entry(1)
    assert entry is not None
    assert (entry.epoch, entry.batches) == (1, ())
    with pytest.raises(InvalidProducerEpochError):
        log.manager.check(hdr(1, 0, -1, attributes=CONTROL))
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(1, 1, 2)
    assert isinstance(log.produce(1, 1, 0), BatchHeader)


def test_update_never_validates_replicated_batches(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    manager.update(hdr(1, 3, 10, offset=0), 5)
    manager.update(hdr(1, 2, 99, count=2, offset=1), 6)  # a lower epoch from the leader
    entry = manager.last_entry(1)
    assert entry is not None
    assert entry.epoch == 2
    assert entry.batches == (BatchMetadata(99, 100, 1, 2, 1002),)
    assert entry.last_update_ms == 6


def test_remove_expired(tmp_path: Path, clock: FakeClock) -> None:
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)
    log = Log(manager, clock)
    log.produce(1, 0, 0)
    clock.advance(30)
    log.produce(2, 0, 0)
    clock.advance(29.999)
    assert manager.remove_expired(clock.time_ms()) == []
    clock.advance(0.001)
    assert manager.remove_expired(clock.time_ms()) == [1]
    assert set(manager.producers) == {2}
    assert manager.check(hdr(1, 0, 777)) is None  # forgotten: any sequence again
    clock.advance(30)
    assert manager.remove_expired(clock.time_ms()) == [2]


def test_default_expiration_is_one_day(log: Log, clock: FakeClock) -> None:
    log.produce(1, 0, 0)
    clock.advance(86_399.999)
    assert log.manager.remove_expired(clock.time_ms()) == []
    clock.advance(0.001)
    assert log.manager.remove_expired(clock.time_ms()) == [1]


# --- snapshots -------------------------------------------------------------------------------


def fill(log: Log) -> None:
    for i in range(7):
        log.produce(1, 0, i * 2, count=2)
    log.produce(2, 4, 0)
    log.produce(-1, -1, -1, count=2)
    log.produce(3, 0, INT32_MAX)


def test_snapshot_round_trip_keeps_the_whole_window(log: Log, tmp_path: Path) -> None:
    fill(log)
    path = log.manager.take_snapshot()
    assert path == tmp_path / f"{log.end:020d}.snapshot"
    assert path.name == "00000000000000000018.snapshot"
    reloaded = ProducerStateManager(tmp_path)
    assert reloaded.load(0, log.end) == log.end
    assert dict(reloaded.producers) == dict(log.manager.producers)
    assert len(reloaded.producers[1].batches) == BATCHES_TO_RETAIN
    # Dedupe survives the restart: the retry of a batch four back gets its offsets.
    assert reloaded.check(hdr(1, 0, 6, count=2)) == DuplicateBatch(
        6, 7, log.headers[3].max_timestamp
    )


def test_snapshot_layout(log: Log) -> None:
    log.produce(9, 2, 5, count=3)
    data = log.manager.take_snapshot().read_bytes()
    version, crc = struct.unpack_from(">hI", data)
    assert version == 1
    assert crc == crc32c.crc32c(data[6:])
    offset, count = struct.unpack_from(">qi", data, 6)
    assert (offset, count) == (3, 1)
    pid, epoch, updated, n = struct.unpack_from(">qhqb", data, 18)
    assert (pid, epoch, updated, n) == (9, 2, log.clock.time_ms(), 1)
    assert struct.unpack_from(">iiqqq", data, 37) == (5, 7, 0, 2, log.headers[0].max_timestamp)
    assert len(data) == 37 + 32


def test_take_snapshot_does_not_rewrite_existing(log: Log) -> None:
    log.produce(1, 0, 0)
    path = log.manager.take_snapshot()
    path.write_bytes(b"sentinel")
    assert log.manager.take_snapshot() == path
    assert path.read_bytes() == b"sentinel"


def test_load_without_snapshot_starts_empty_at_log_start(log: Log, tmp_path: Path) -> None:
    fill(log)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(5, log.end) == 5
    assert fresh.producers == {}


def test_load_picks_latest_in_range_and_deletes_out_of_range(log: Log, tmp_path: Path) -> None:
    log.produce(1, 0, 0)
    log.manager.take_snapshot()  # at 1
    log.produce(1, 0, 1)
    log.manager.take_snapshot()  # at 2
    log.produce(1, 0, 2)
    log.manager.take_snapshot()  # at 3
    (tmp_path / "00000000000000000009.snapshot.tmp").write_bytes(b"x")
    (tmp_path / "notes.snapshot").write_bytes(b"x")
    fresh = ProducerStateManager(tmp_path)
    assert fresh.snapshot_offsets() == [1, 2, 3]
    assert fresh.load(2, 2) == 2
    assert fresh.snapshot_offsets() == [2]  # 3 is above the log end, 1 below the log start
    entry = fresh.last_entry(1)
    assert entry is not None
    assert entry.last_seq == 1


def test_corrupt_latest_snapshot_falls_back_to_older(log: Log, tmp_path: Path) -> None:
    log.produce(1, 0, 0)
    log.manager.take_snapshot()
    log.produce(1, 0, 1)
    newest = log.manager.take_snapshot()
    newest.write_bytes(newest.read_bytes()[:-3])
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, log.end) == 1
    assert not newest.exists()
    # The caller replays from offset 1 and gets the same state as before.
    for header in log.headers[1:]:
        fresh.update(header, log.clock.time_ms())
    assert dict(fresh.producers) == dict(log.manager.producers)


def test_truncate_to(log: Log, tmp_path: Path) -> None:
    for seq in range(6):
        log.produce(1, 0, seq)
        if seq in (1, 3):
            log.manager.take_snapshot()  # at 2 and 4
    assert log.manager.truncate_to(0, 6) == 6  # nothing to do
    replay_from = log.manager.truncate_to(0, 3)
    assert replay_from == 2
    assert log.manager.snapshot_offsets() == [2]
    for header in log.headers[2:3]:
        log.manager.update(header, 0)
    entry = log.manager.last_entry(1)
    assert entry is not None
    assert entry.last_seq == 2
    assert log.manager.check(hdr(1, 0, 3)) is None  # 3..5 were truncated away: seq 3 is next


def test_delete_snapshots_below(log: Log) -> None:
    for seq in range(4):
        log.produce(1, 0, seq)
        log.manager.take_snapshot()
    log.manager.delete_snapshots_below(3)
    assert log.manager.snapshot_offsets() == [3, 4]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d[:10], "truncated"),
        (lambda d: b"\x00\x02" + d[2:], "unknown version"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "checksum mismatch"),
    ],
)
def test_decode_snapshot_rejects_damage(mutate: Callable[[bytes], bytes], reason: str) -> None:
    data = encode_snapshot(5, [])
    with pytest.raises(CorruptSnapshotError, match=reason):
        decode_snapshot(mutate(data), 5)


def _reframe(body: bytes) -> bytes:
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_decode_snapshot_checks_structure() -> None:
    with pytest.raises(CorruptSnapshotError, match="expected 5"):
        decode_snapshot(encode_snapshot(4, []), 5)
    with pytest.raises(CorruptSnapshotError, match="past the end"):
        decode_snapshot(_reframe(struct.pack(">qi", 5, 1)), 5)
    with pytest.raises(CorruptSnapshotError, match="trailing"):
        decode_snapshot(_reframe(struct.pack(">qi", 5, 0) + b"\x00"), 5)
    with pytest.raises(CorruptSnapshotError, match="has 6 batches"):
        decode_snapshot(_reframe(struct.pack(">qi", 5, 1) + struct.pack(">qhqb", 1, 0, 0, 6)), 5)


def test_snapshot_path() -> None:
    assert snapshot_path(Path("/d"), 42) == Path("/d/00000000000000000042.snapshot")


# --- rebuild from headers equals live state ----------------------------------------------------

_op = st.tuples(
    st.integers(0, 2),  # producer
    st.sampled_from(["next", "next", "next", "retry", "bump", "plain"]),
    st.integers(1, 4),  # record count
    st.integers(0, 6),  # how far back a retry goes
)


def _drive(
    log: Log,
    ops: list[tuple[int, str, int, int]],
    epochs: dict[int, int],
    sent: dict[int, list[tuple[int, int]]],
) -> None:
    """Produce like well-behaved idempotent clients; retries hit the dedupe window or fail."""
    for pid, kind, count, back in ops:
        log.clock.advance(0.001)
        epoch = epochs.setdefault(pid, 0)
        history = sent.setdefault(pid, [])
        if kind == "plain":
            log.produce(-1, -1, -1, count)
            continue
        if kind == "bump":
            epochs[pid] = epoch = epoch + 1
            history.clear()
        if kind == "retry" and history:
            index = max(0, len(history) - 1 - back)
            seq, n = history[index]
            if len(history) - 1 - index < BATCHES_TO_RETAIN:
                assert isinstance(log.produce(pid, epoch, seq, n), DuplicateBatch)
            else:
                with pytest.raises(OutOfOrderSequenceError):
                    log.produce(pid, epoch, seq, n)
            continue
        seq = (history[-1][0] + history[-1][1]) % 2**31 if history else 0
        result = log.produce(pid, epoch, seq, count)
        assert isinstance(result, BatchHeader)
        history.append((seq, count))


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(_op, min_size=20, max_size=80), cut=st.floats(0, 1), snap_at=st.floats(0, 1))
def test_rebuild_from_headers_equals_live_state(
    ops: list[tuple[int, str, int, int]], cut: float, snap_at: float
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        clock = FakeClock()
        log = Log(ProducerStateManager(directory), clock)
        snap_index = int(snap_at * len(ops))
        epochs: dict[int, int] = {}
        sent: dict[int, list[tuple[int, int]]] = {}
        _drive(log, ops[:snap_index], epochs, sent)
        log.manager.take_snapshot()
        _drive(log, ops[snap_index:], epochs, sent)
        live = dict(log.manager.producers)

        # 1. Replay every header into a fresh manager.
        rebuilt = ProducerStateManager(directory / "none")
        for header in log.headers:
            rebuilt.update(header, header.max_timestamp)
        assert _comparable(rebuilt) == _comparable(log.manager)

        # 2. Load the snapshot, replay the rest (the recovery path).
        recovered = ProducerStateManager(directory)
        start = recovered.load(0, log.end)
        for header in log.headers:
            if header.base_offset >= start:
                recovered.update(header, header.max_timestamp)
        assert _comparable(recovered) == _comparable(log.manager)
        assert recovered.map_end_offset == log.manager.map_end_offset

        # 3. Truncate the log and compare with a replay of the surviving prefix.
        kept = log.headers[: int(cut * len(log.headers))]
        end = kept[-1].next_offset if kept else 0
        start = log.manager.truncate_to(0, end)
        for header in kept:
            if header.base_offset >= start:
                log.manager.update(header, header.max_timestamp)
        prefix = ProducerStateManager(directory / "none")
        for header in kept:
            prefix.update(header, header.max_timestamp)
        assert _comparable(log.manager) == _comparable(prefix)
        assert live.keys() >= log.manager.producers.keys()


def _comparable(manager: ProducerStateManager) -> dict[int, tuple[int, tuple[BatchMetadata, ...]]]:
    """Producer state without the update time (replay uses batch time, live uses the clock)."""
    return {pid: (e.epoch, e.batches) for pid, e in manager.producers.items()}
