"""Tests for yak_broker.storage.log_cleaner: compaction rules, swap protocol, crash recovery."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from yak.record.batch import decode_batch, encode_batch
from yak.record.batch_header import CompressionType, parse_header
from yak.record.record import Record, RecordInput
from yak_broker.storage.log_cleaner import (
    Cleaner,
    CleanerConfig,
    SwapPlan,
    complete_swap,
    read_segment_batches,
    recover_interrupted_clean,
)
from yak_broker.storage.producer_state import ProducerStateManager

NOW = 1_700_000_000_000
DAY = 86_400_000

KV = tuple[bytes | None, bytes | None]


class Batch:
    """A batch to write: records (key, value), optional producer fields and codec."""

    def __init__(
        self,
        records: Sequence[KV],
        pid: int = -1,
        epoch: int = -1,
        seq: int = -1,
        codec: CompressionType = CompressionType.NONE,
    ) -> None:
        self.records = records
        self.pid, self.epoch, self.seq, self.codec = pid, epoch, seq, codec


def write_log(directory: Path, segments: Sequence[Sequence[Batch]]) -> list[int]:
    """Write consecutive-offset segments; return their base offsets (plus the log end)."""
    offset = 0
    bases = []
    for segment in segments:
        bases.append(offset)
        with (directory / f"{offset:020d}.log").open("wb") as f:
            for batch in segment:
                f.write(
                    encode_batch(
                        [
                            RecordInput(k, v, timestamp=NOW + offset + i)
                            for i, (k, v) in enumerate(batch.records)
                        ],
                        base_offset=offset,
                        producer_id=batch.pid,
                        producer_epoch=batch.epoch,
                        base_sequence=batch.seq,
                        compression=batch.codec,
                        partition_leader_epoch=3,
                    )
                )
                offset += len(batch.records)
        (directory / f"{bases[-1]:020d}.index").write_bytes(b"")
        (directory / f"{bases[-1]:020d}.timeindex").write_bytes(b"")
    bases.append(offset)
    return bases


def read_log(directory: Path) -> list[Record]:
    """Every record of the log, checking that batches never overlap or go backwards."""
    records: list[Record] = []
    next_offset = 0
    for path in sorted(directory.glob("*.log")):
        base = int(path.name[:20])
        assert base >= next_offset or base == 0, f"segment {base} overlaps {next_offset}"
        for raw in read_segment_batches(path):
            batch = decode_batch(raw)
            assert batch.header.base_offset >= max(base, next_offset)
            next_offset = batch.header.next_offset
            records.extend(batch.records)
    return records


def latest(records: Sequence[Record]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for r in records:
        if r.key is not None:
            out[r.key] = r.value
    return out


def assert_valid_compaction(before: Sequence[Record], after: Sequence[Record]) -> None:
    """Offsets and contents unchanged, every key's latest record still there."""
    original = {r.offset: r for r in before}
    for r in after:
        assert original[r.offset] == r
    kept = {r.offset for r in after}
    last_offset: dict[bytes, int] = {}
    for r in before:
        if r.key is not None:
            last_offset[r.key] = r.offset
    for key, offset in last_offset.items():
        if original[offset].value is not None:
            assert offset in kept, f"latest record of {key!r} lost"


def kv(i: int, version: int) -> KV:
    return (f"k{i}".encode(), f"v{i}.{version}".encode())


@pytest.fixture
def sample(tmp_path: Path) -> tuple[list[int], list[Record]]:
    segments = [
        [Batch([kv(0, 0), kv(1, 0), kv(2, 0)]), Batch([kv(3, 0), kv(0, 1)])],
        [Batch([kv(1, 1), kv(4, 0)]), Batch([(b"k2", None), kv(5, 0)])],
        [Batch([kv(0, 2), kv(6, 0)]), Batch([kv(3, 1)])],
        [Batch([kv(0, 3), kv(1, 2)])],  # the active segment
    ]
    bases = write_log(tmp_path, segments)
    return bases, read_log(tmp_path)


def clean(directory: Path, bases: list[int], first_dirty: int = 0, **kwargs: Any) -> Any:
    closed = bases[:-2]  # the last listed segment is active, bases[-1] is the log end
    return Cleaner(CleanerConfig(**kwargs)).clean(
        directory, closed, bases[-2], first_dirty, {}, NOW
    )


def test_clean_keeps_latest_per_key_and_offsets(
    tmp_path: Path, sample: tuple[list[int], list[Record]]
) -> None:
    bases, before = sample
    active = (tmp_path / f"{bases[-2]:020d}.log").read_bytes()
    result = clean(tmp_path, bases)
    after = read_log(tmp_path)
    assert_valid_compaction(before, after)
    assert latest(after) == latest(before)
    assert result.first_dirty_offset == bases[-2]
    # Below the active segment each key appears once (k0 and k1 are newer in the active one,
    # so their older values are kept only until the next pass covers the active segment).
    cleaned = [(r.offset, r.key, r.value) for r in after if r.offset < bases[-2]]
    assert cleaned == [
        (5, b"k1", b"v1.1"),
        (6, b"k4", b"v4.0"),
        (7, b"k2", None),  # a tombstone stays until its delete horizon
        (8, b"k5", b"v5.0"),
        (9, b"k0", b"v0.2"),
        (10, b"k6", b"v6.0"),
        (11, b"k3", b"v3.1"),
    ]
    assert (tmp_path / f"{bases[-2]:020d}.log").read_bytes() == active  # untouched
    assert result.records_read == 12
    assert result.records_kept == 7


def test_segments_are_merged_into_one_and_old_files_removed(
    tmp_path: Path, sample: tuple[list[int], list[Record]]
) -> None:
    bases, _ = sample
    snapshot = tmp_path / f"{bases[1]:020d}.snapshot"
    snapshot.write_bytes(b"producer state")
    result = clean(tmp_path, bases)
    assert result.swaps == (SwapPlan(0, (0, 5, 9)),)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000000.log",
        f"{bases[1]:020d}.snapshot",
        f"{bases[-2]:020d}.index",
        f"{bases[-2]:020d}.log",
        f"{bases[-2]:020d}.timeindex",
    ]


def test_small_segment_bytes_keeps_groups_apart(
    tmp_path: Path, sample: tuple[list[int], list[Record]]
) -> None:
    bases, before = sample
    result = clean(tmp_path, bases, max_segment_bytes=1)
    assert [plan.replaced_bases for plan in result.swaps] == [(0,), (5,), (9,)]
    assert_valid_compaction(before, read_log(tmp_path))


def test_segment_keeps_its_last_batch_so_its_range_is_whole(tmp_path: Path) -> None:
    bases = write_log(
        tmp_path,
        [
            [Batch([kv(0, 0)]), Batch([kv(1, 0)])],
            [Batch([kv(1, 1), kv(0, 1)])],
            [Batch([kv(9, 0)])],
        ],
    )
    clean(tmp_path, bases, max_segment_bytes=1)
    first = [parse_header(raw) for raw in read_segment_batches(tmp_path / f"{0:020d}.log")]
    # k0@0 and k1@1 are both obsolete; the last batch stays as an empty header.
    assert [(h.base_offset, h.last_offset_delta, h.record_count) for h in first] == [(1, 0, 0)]


def test_fully_retained_batches_are_copied_byte_for_byte(tmp_path: Path) -> None:
    bases = write_log(
        tmp_path, [[Batch([kv(0, 0), kv(1, 0)]), Batch([kv(2, 0)])], [Batch([kv(3, 0)])]]
    )
    original = (tmp_path / f"{0:020d}.log").read_bytes()
    clean(tmp_path, bases)
    assert (tmp_path / f"{0:020d}.log").read_bytes() == original


def test_partial_batch_keeps_header_fields_and_codec(tmp_path: Path) -> None:
    batch = Batch(
        [kv(0, 0), kv(1, 0), kv(2, 0)], pid=7, epoch=2, seq=40, codec=CompressionType.GZIP
    )
    bases = write_log(tmp_path, [[batch, Batch([kv(1, 1)])], [Batch([kv(9, 0)])]])
    before = parse_header(next(read_segment_batches(tmp_path / f"{0:020d}.log")))
    clean(tmp_path, bases)
    raw = next(read_segment_batches(tmp_path / f"{0:020d}.log"))
    after = decode_batch(raw)
    assert [r.offset for r in after.records] == [0, 2]
    h = after.header
    assert (h.base_offset, h.last_offset_delta, h.base_sequence, h.last_sequence) == (0, 2, 40, 42)
    assert (h.producer_id, h.producer_epoch, h.partition_leader_epoch) == (7, 2, 3)
    assert h.compression == CompressionType.GZIP
    assert h.base_timestamp == before.base_timestamp
    assert [r.timestamp for r in after.records] == [NOW, NOW + 2]


def test_keyless_records_are_dropped(tmp_path: Path) -> None:
    bases = write_log(tmp_path, [[Batch([(None, b"x"), kv(0, 0)])], [Batch([kv(1, 0)])]])
    clean(tmp_path, bases)
    assert [(r.offset, r.key) for r in read_log(tmp_path)] == [(1, b"k0"), (2, b"k1")]


def test_tombstone_lives_delete_retention_ms_after_entering_clean_portion(tmp_path: Path) -> None:
    bases = write_log(
        tmp_path,
        [[Batch([kv(0, 0), kv(1, 0)]), Batch([(b"k0", None), kv(2, 0)])], [Batch([kv(3, 0)])]],
    )
    cleaner = Cleaner(CleanerConfig(delete_retention_ms=DAY))
    closed, active = bases[:1], bases[1]
    cleaner.clean(tmp_path, closed, active, 0, {}, NOW)
    records = read_log(tmp_path)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (1, b"k1", b"v1.0"),
        (2, b"k0", None),
        (3, b"k2", b"v2.0"),
        (4, b"k3", b"v3.0"),
    ]
    header = decode_batch(list(read_segment_batches(tmp_path / f"{0:020d}.log"))[-1]).header
    assert header.has_delete_horizon
    assert header.base_timestamp == NOW + DAY
    assert [r.timestamp for r in records[1:3]] == [NOW + 2, NOW + 3]  # timestamps unchanged
    # A pass before the horizon keeps the tombstone (and does not move the horizon).
    cleaner.clean(tmp_path, closed, active, active, {}, NOW + DAY - 1)
    assert (2, b"k0") in [(r.offset, r.key) for r in read_log(tmp_path)]
    header = decode_batch(list(read_segment_batches(tmp_path / f"{0:020d}.log"))[-1]).header
    assert header.base_timestamp == NOW + DAY
    # At the horizon it goes.
    cleaner.clean(tmp_path, closed, active, active, {}, NOW + DAY)
    assert [(r.offset, r.key) for r in read_log(tmp_path)] == [(1, b"k1"), (3, b"k2"), (4, b"k3")]


def test_producer_last_batch_survives_as_empty_header(tmp_path: Path) -> None:
    bases = write_log(
        tmp_path,
        [
            [
                Batch([kv(0, 0)], pid=5, epoch=1, seq=0),
                Batch([kv(0, 1)], pid=5, epoch=1, seq=1),
                Batch([kv(1, 0)], pid=6, epoch=0, seq=0),
                Batch([kv(0, 2), kv(1, 1)]),
            ],
            [Batch([kv(2, 0)])],
        ],
    )
    states = ProducerStateManager(tmp_path / "none")
    for raw in read_segment_batches(tmp_path / f"{0:020d}.log"):
        states.update(parse_header(raw), NOW)
    expected = {pid: (e.epoch, e.last_seq) for pid, e in states.producers.items()}
    Cleaner().clean(tmp_path, bases[:1], bases[1], 0, states.last_batch_offsets(), NOW)
    headers = [parse_header(raw) for raw in read_segment_batches(tmp_path / f"{0:020d}.log")]
    # pid 5's first batch is gone; its last one and pid 6's remain, empty, with their sequences.
    assert [(h.base_offset, h.producer_id, h.base_sequence, h.record_count) for h in headers] == [
        (1, 5, 1, 0),
        (2, 6, 0, 0),
        (3, -1, -1, 2),
    ]
    replayed = ProducerStateManager(tmp_path / "none")
    for h in headers:
        replayed.update(h, NOW)
    assert {pid: (e.epoch, e.last_seq) for pid, e in replayed.producers.items()} == expected


def test_map_cap_cleans_a_prefix_and_leaves_the_rest(tmp_path: Path) -> None:
    bases = write_log(
        tmp_path,
        [
            [Batch([kv(0, 0), kv(1, 0)])],
            [Batch([kv(0, 1), kv(1, 1)])],
            [Batch([kv(0, 2), kv(2, 0)])],
            [Batch([kv(3, 0)])],
        ],
    )
    third = (tmp_path / f"{bases[2]:020d}.log").read_bytes()
    result = Cleaner(CleanerConfig(max_map_entries=1)).clean(
        tmp_path, bases[:3], bases[3], 0, {}, NOW
    )
    assert result.first_dirty_offset == bases[1]  # one segment's keys filled the map
    assert (tmp_path / f"{bases[2]:020d}.log").read_bytes() == third


def test_complete_false_stops_at_swap(
    tmp_path: Path, sample: tuple[list[int], list[Record]]
) -> None:
    bases, before = sample
    result = Cleaner().clean(tmp_path, bases[:-2], bases[-2], 0, {}, NOW, complete=False)
    (plan,) = result.swaps
    assert (tmp_path / f"{0:020d}.log.swap").exists()
    assert (tmp_path / f"{5:020d}.log").exists()
    assert read_log(tmp_path)[:5] == before[:5]  # readers still see the old segments
    complete_swap(tmp_path, plan)
    assert not (tmp_path / f"{0:020d}.log.swap").exists()
    assert_valid_compaction(before, read_log(tmp_path))


# --- crash recovery --------------------------------------------------------------------------


class SimulatedCrashError(Exception):
    pass


def crash_on_call(monkeypatch: pytest.MonkeyPatch, n: int) -> list[int]:
    """Make the n-th mutating file-system call (fsync, rename, unlink) raise a simulated crash."""
    calls = [0]

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] == n:
                raise SimulatedCrashError(f"crash at call {n}: {real.__name__}")
            return real(*args, **kwargs)

        return inner

    for name in ("replace", "unlink", "fsync"):
        monkeypatch.setattr(os, name, wrap(getattr(os, name)))
    return calls


@pytest.mark.parametrize("segment_bytes", [200, 1 << 30])
def test_crash_at_every_step_leaves_a_correct_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, segment_bytes: int
) -> None:
    segments = [
        [Batch([kv(0, 0), kv(1, 0), kv(2, 0)]), Batch([kv(3, 0), kv(0, 1)])],
        [Batch([kv(1, 1), kv(4, 0)]), Batch([(b"k2", None), kv(5, 0)])],
        [Batch([kv(0, 2), kv(6, 0)]), Batch([kv(3, 1)])],
        [Batch([kv(0, 3)])],
    ]
    crashed_at = []
    for n in range(1, 100):
        directory = tmp_path / f"run{n}"
        directory.mkdir()
        bases = write_log(directory, segments)
        before = read_log(directory)
        with monkeypatch.context() as patch:
            crash_on_call(patch, n)
            try:
                Cleaner(CleanerConfig(max_segment_bytes=segment_bytes)).clean(
                    directory, bases[:-2], bases[-2], 0, {}, NOW
                )
            except SimulatedCrashError:
                crashed_at.append(n)
            else:
                break
        recover_interrupted_clean(directory)
        after = read_log(directory)
        assert_valid_compaction(before, after)
        assert latest(after) == latest(before)
        leftovers = [p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap")]
        assert leftovers == []
    # At least: fsync, rename, dir fsync, 3 x 3 deletes, rename, dir fsync.
    assert len(crashed_at) >= 14


def test_recover_finishes_a_half_deleted_swap(tmp_path: Path) -> None:
    bases = write_log(
        tmp_path,
        [[Batch([kv(0, 0)])], [Batch([kv(0, 1)])], [Batch([kv(1, 0)])], [Batch([kv(2, 0)])]],
    )
    before = read_log(tmp_path)
    result = Cleaner().clean(tmp_path, bases[:3], bases[3], 0, {}, NOW, complete=False)
    assert result.swaps == (SwapPlan(0, (0, 1, 2)),)
    (tmp_path / f"{2:020d}.log").unlink()  # the crash hit while deleting, highest first
    (tmp_path / f"{2:020d}.index").unlink()
    (tmp_path / f"{0:020d}.log.cleaned").write_bytes(b"torn")
    (tmp_path / f"{7:020d}.index.swap").write_bytes(b"foreign")
    assert recover_interrupted_clean(tmp_path) == [0]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [f"{0:020d}.log", f"{3:020d}.log"]
    assert not list(tmp_path.glob("*.cleaned"))
    assert not list(tmp_path.glob("*.swap"))
    assert not (tmp_path / f"{1:020d}.index").exists()
    after = read_log(tmp_path)
    assert_valid_compaction(before, after)
    assert [r.offset for r in after] == [1, 2, 3]


def test_recover_on_a_clean_directory_does_nothing(
    tmp_path: Path, sample: tuple[list[int], list[Record]]
) -> None:
    names = sorted(p.name for p in tmp_path.iterdir())
    assert recover_interrupted_clean(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_nothing_to_clean(tmp_path: Path) -> None:
    result = Cleaner().clean(tmp_path, [], 0, 0, {}, NOW)
    assert result.swaps == ()
    assert result.first_dirty_offset == 0
