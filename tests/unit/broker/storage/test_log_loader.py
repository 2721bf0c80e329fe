"""Tests for yak_broker.storage.log_loader: recovery after clean and unclean stops.

The property tests append random batches across several segments, stop without the clean
marker, damage the files (cut a ``.log`` at a random byte, or flip a random CRC-covered byte),
reopen, and check that exactly the intact prefix survives, that the indexes agree with the
log, and that appends continue at the right offset.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import NamedTuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.broker.storage.batches import make_batch
from yak.clock import FakeClock
from yak.record.batch_header import iter_batches, parse_header
from yak_broker.storage.log import FetchIsolation, Log
from yak_broker.storage.log_config import LogConfig

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=300)


class StoredBatch(NamedTuple):
    path: Path
    start: int
    data: bytes


def stored_batches(directory: Path) -> list[StoredBatch]:
    """Every batch on disk, in log order."""
    found = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for position, header in iter_batches(data):
            found.append(StoredBatch(path, position, data[position : position + header.size]))
    return found


def read_all(log: Log) -> list[bytes]:
    batches, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 1500, FetchIsolation.LOG_END)
        data = bytes(fetched.records)
        batches += [data[p : p + h.size] for p, h in iter_batches(data)]
        offset = fetched.next_offset
    return batches


def assert_indexes_agree(log: Log) -> None:
    for segment in log.segments:
        index = segment.offset_index
        for i in range(index.entries):
            relative, position = index.entry(i)
            assert segment.read_header(position).last_offset == segment.base_offset + relative
        times = segment.time_index
        for i in range(times.entries):
            timestamp, relative = times.entry(i)
            assert segment.base_offset <= segment.base_offset + relative < segment.next_offset
            assert timestamp <= segment.max_timestamp
    for offset in range(log.log_start_offset, log.log_end_offset):
        records = log.read(offset, 1, FetchIsolation.LOG_END).records
        header = parse_header(records)
        assert header.base_offset <= offset <= header.last_offset


def write_log(directory: Path, sizes: list[tuple[int, int]]) -> list[StoredBatch]:
    log = Log(directory, CONFIG, FakeClock(T0))
    for i, (records, payload) in enumerate(sizes):
        log.append(make_batch(records, payload, timestamp=T0 + i), leader_epoch=i // 5)
    log.close_without_marker()  # as a crash leaves it: no marker, recovery point 0
    return stored_batches(directory)


def reopen_and_check(directory: Path, expected: list[StoredBatch]) -> None:
    log = Log(directory, CONFIG, FakeClock(T0))
    assert not log.had_clean_shutdown
    assert read_all(log) == [b.data for b in expected]
    end = parse_header(expected[-1].data).next_offset if expected else 0
    assert log.log_end_offset == end
    assert_indexes_agree(log)
    latest = log.leader_epochs.latest_entry
    assert latest is None or latest.start_offset < end
    assert log.append(make_batch(2), leader_epoch=99).first_offset == end
    assert_indexes_agree(log)
    log.close()
    again = Log(directory, CONFIG, FakeClock(T0))
    assert again.log_end_offset == end + 2
    again.close()


BATCH_SIZES = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 400)), min_size=1, max_size=25)
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(sizes=BATCH_SIZES, where=st.floats(0, 1, exclude_max=True))
def test_cut_at_a_random_byte_keeps_the_intact_prefix(
    tmp_path: Path, sizes: list[tuple[int, int]], where: float
) -> None:
    directory = tmp_path / uuid.uuid4().hex
    batches = write_log(directory, sizes)
    victim = batches[int(where * len(batches))]
    cut = victim.start + int((where * len(batches)) % 1 * len(victim.data))
    os.truncate(victim.path, cut)
    expected = [
        b
        for b in batches
        if b.path < victim.path or (b.path == victim.path and b.start + len(b.data) <= cut)
    ]
    reopen_and_check(directory, expected)


def crc_covered(batch: bytes, byte: int) -> bool:
    """Bytes 0-8 (base offset) and 12-16 (leader epoch) lie outside the CRC, as in Kafka."""
    return not (byte < 8 or 12 <= byte < 16)


@SETTINGS
@given(
    sizes=BATCH_SIZES,
    which=st.integers(0, 10**6),
    byte=st.integers(0, 10**6),
    bit=st.integers(0, 7),
)
def test_a_flipped_byte_keeps_the_batches_before_it(
    tmp_path: Path, sizes: list[tuple[int, int]], which: int, byte: int, bit: int
) -> None:
    directory = tmp_path / uuid.uuid4().hex
    batches = write_log(directory, sizes)
    index = which % len(batches)
    victim = batches[index]
    offset = byte % len(victim.data)
    if not crc_covered(victim.data, offset):
        offset = 16 + offset % (len(victim.data) - 16)
    data = bytearray(victim.path.read_bytes())
    data[victim.start + offset] ^= 1 << bit
    victim.path.write_bytes(bytes(data))
    reopen_and_check(directory, batches[:index])


def test_clean_start_rebuilds_a_damaged_or_missing_index(tmp_path: Path) -> None:
    batches = write_log(tmp_path / "p", [(2, 200)] * 20)
    log = Log(tmp_path / "p", CONFIG, FakeClock(T0))
    log.close()
    indexes = sorted((tmp_path / "p").glob("*.index"))
    indexes[0].write_bytes(b"\x00\x00\x00\x09\x00\x10\x00\x00")  # points past the end
    indexes[1].write_bytes(b"garbage")
    indexes[2].unlink()
    reopened = Log(tmp_path / "p", CONFIG, FakeClock(T0))
    assert reopened.had_clean_shutdown
    assert read_all(reopened) == [b.data for b in batches]
    assert_indexes_agree(reopened)
    reopened.close()


def test_clean_marker_with_a_torn_tail_still_recovers(tmp_path: Path) -> None:
    batches = write_log(tmp_path / "p", [(1, 100)] * 5)
    Log(tmp_path / "p", CONFIG, FakeClock(T0)).close()
    last = batches[-1]
    with last.path.open("ab") as f:
        f.write(b"\x00" * 30)
    reopened = Log(tmp_path / "p", CONFIG, FakeClock(T0))
    assert reopened.log_end_offset == 5
    assert last.path.stat().st_size == last.start + len(last.data)
    reopened.close()


def test_unclean_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    log = Log(directory, CONFIG, FakeClock(T0))
    for _ in range(20):
        log.append(make_batch(1, 300), leader_epoch=0)
    log.flush()
    log.write_checkpoint()
    for _ in range(3):
        log.append(make_batch(1, 300), leader_epoch=0)
    log.close_without_marker()
    segments = sorted(directory.glob("*.log"))
    first = bytearray(segments[0].read_bytes())
    first[100] ^= 0xFF  # below the recovery point: a flushed segment is trusted, not rescanned
    segments[0].write_bytes(bytes(first))
    os.truncate(segments[-1], segments[-1].stat().st_size - 10)
    reopened = Log(directory, CONFIG, FakeClock(T0))
    assert reopened.log_end_offset == 22
    assert reopened.recovery_point == 20
    assert reopened.recovered_truncated_bytes > 0
    reopened.close()


def test_leftovers_are_removed_and_segments_below_log_start_dropped(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    log = Log(directory, LogConfig(segment_bytes=300), FakeClock(T0))
    for _ in range(4):
        log.append(make_batch(1, 150), leader_epoch=0)
    log.update_high_watermark(4)
    log.close()
    (directory / "00000000000000000000.log.deleted").write_bytes(b"x")
    (directory / "partition.checkpoint.tmp").write_bytes(b"x")
    (directory / "00000000000000000099.index").write_bytes(b"")
    from yak_broker.storage import checkpoint

    saved = checkpoint.read(directory / checkpoint.CHECKPOINT_FILE_NAME)
    assert saved is not None
    checkpoint.write(
        directory / checkpoint.CHECKPOINT_FILE_NAME,
        checkpoint.PartitionCheckpoint(saved.recovery_point, 2, saved.high_watermark),
    )
    reopened = Log(directory, LogConfig(segment_bytes=300), FakeClock(T0))
    assert reopened.log_start_offset == 2
    assert [s.base_offset for s in reopened.segments] == [2, 3]
    names = {p.name for p in directory.iterdir()}
    assert not any(
        n.endswith((".deleted", ".tmp")) or n.startswith("000000000000000000099") for n in names
    )
    reopened.close()


def test_producer_state_is_rebuilt_from_both_trusted_and_recovered_segments(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "p"
    config = LogConfig(segment_bytes=400)

    def idempotent(seq: int) -> bytes:
        return make_batch(2, producer_id=5, producer_epoch=0, base_sequence=seq)

    log = Log(directory, config, FakeClock(T0))
    for seq in range(0, 16, 2):
        log.append(idempotent(seq), leader_epoch=0)
    log.flush()
    log.write_checkpoint()  # the recovery point is in the last segment: earlier ones trusted
    for seq in range(16, 24, 2):
        log.append(make_batch(1), leader_epoch=0)
        log.append(idempotent(seq), leader_epoch=0)
    log.close_without_marker()
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()  # force a replay from the log start over both kinds of segment
    reopened = Log(directory, config, FakeClock(T0))
    assert reopened.producers.map_end_offset == reopened.log_end_offset
    assert reopened.append(idempotent(22), leader_epoch=0).duplicate
    assert reopened.append(idempotent(24), leader_epoch=0).first_offset == 28
    reopened.close()


def _checkpoint_written(log_dir: Path) -> int:
    """The checkpoint file's inode: a rewrite (temp file + rename) gives it a new one."""
    return (log_dir / "partition.checkpoint").stat().st_ino


def test_an_unchanged_checkpoint_is_not_rewritten_at_load(tmp_path: Path) -> None:
    log = Log.open(tmp_path, CONFIG, FakeClock(T0))
    log.append(make_batch(3), 0)
    log.update_high_watermark(3)
    log.close()  # clean: the checkpoint says everything is flushed
    written = _checkpoint_written(tmp_path)
    again = Log.open(tmp_path, CONFIG, FakeClock(T0))
    assert again.had_clean_shutdown
    assert not (tmp_path / ".clean-shutdown").exists()
    assert _checkpoint_written(tmp_path) == written
    again.append(make_batch(1), 0)
    again.close_without_marker()  # a crash: the appended batch is past the recovery point
    third = Log.open(tmp_path, CONFIG, FakeClock(T0))
    assert third.log_end_offset == 4
    assert _checkpoint_written(tmp_path) == written  # recovery point, start, HW as they were
    assert third.write_checkpoint() is False  # and the log knows the file holds them


def test_a_moved_or_damaged_checkpoint_is_rewritten_at_load(tmp_path: Path) -> None:
    log = Log.open(tmp_path, CONFIG, FakeClock(T0))
    log.append(make_batch(3), 0)
    log.close()
    written = _checkpoint_written(tmp_path)
    (tmp_path / "00000000000000000000.log").write_bytes(b"")  # the data is gone
    again = Log.open(tmp_path, CONFIG, FakeClock(T0))
    assert again.log_end_offset == 0
    assert _checkpoint_written(tmp_path) != written
    again.close_without_marker()
    (tmp_path / "partition.checkpoint").write_bytes(b"garbage")
    Log.open(tmp_path, CONFIG, FakeClock(T0)).close_without_marker()
    assert (tmp_path / "partition.checkpoint").read_bytes().startswith(b"0\nrecovery_point 0\n")


def test_the_loader_trims_epochs_at_the_log_end_without_rewriting_the_file(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path, CONFIG, FakeClock(T0))
    log.assign_epoch(5, 0)  # led epoch 5 and appended nothing (an idle partition)
    log.close_without_marker()
    epoch_file = tmp_path / "leader-epoch-checkpoint"
    written = epoch_file.stat().st_ino
    for _ in range(2):  # each load trims the same entry again; the file stays as it was
        again = Log.open(tmp_path, CONFIG, FakeClock(T0))
        assert again.leader_epochs.entries == ()
        assert again.end_offset_for_epoch(5) == (-1, -1)
        again.close_without_marker()
        assert epoch_file.stat().st_ino == written
    third = Log.open(tmp_path, CONFIG, FakeClock(T0))
    third.append(make_batch(2), 6)  # the next change writes the whole list
    third.assign_epoch(7, 2)
    third.close()
    assert epoch_file.read_text() == "0\n2\n6 0\n7 2\n"
    written = epoch_file.stat().st_ino
    clean = Log.open(tmp_path, CONFIG, FakeClock(T0))  # a clean start: no recovery either
    assert [tuple(e) for e in clean.leader_epochs.entries] == [(6, 0)]
    assert epoch_file.stat().st_ino == written
