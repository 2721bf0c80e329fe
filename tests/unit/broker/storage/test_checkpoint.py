"""Tests for yak_broker.storage.checkpoint: atomic writes and the partition checkpoint file."""

from __future__ import annotations

import os
from pathlib import Path

import crc32c
import pytest

from yak_broker.storage import checkpoint
from yak_broker.storage.checkpoint import (
    CHECKPOINT_FILE_NAME,
    CorruptCheckpointError,
    PartitionCheckpoint,
    temp_path,
    write_atomically,
)


def test_write_atomically_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomically(target, b"first")
    assert target.read_bytes() == b"first"
    write_atomically(str(target), b"second, longer")
    assert target.read_bytes() == b"second, longer"
    write_atomically(target, b"")
    assert target.read_bytes() == b""
    assert not temp_path(target).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_write_atomically_overwrites_a_stale_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    temp_path(target).write_bytes(b"x" * 1000)
    write_atomically(target, b"ok")
    assert target.read_bytes() == b"ok"
    assert not temp_path(target).exists()


def test_temp_path_is_a_sibling_with_suffix(tmp_path: Path) -> None:
    assert temp_path(tmp_path / "a.checkpoint") == tmp_path / "a.checkpoint.tmp"


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE_NAME
    cp = PartitionCheckpoint(recovery_point=1234, log_start_offset=7, high_watermark=1200)
    checkpoint.write(path, cp)
    assert checkpoint.read(path) == cp
    bigger = PartitionCheckpoint(2**62, 2**40, 2**41)
    checkpoint.write(path, bigger)
    assert checkpoint.read(path) == bigger


def test_text_layout_is_documented_format(tmp_path: Path) -> None:
    cp = PartitionCheckpoint(recovery_point=5, log_start_offset=1, high_watermark=4)
    lines = cp.encode().decode("ascii").splitlines()
    assert lines[:4] == ["0", "recovery_point 5", "log_start_offset 1", "high_watermark 4"]
    label, crc = lines[4].split(" ")
    assert label == "crc32c"
    assert len(crc) == 8
    assert int(crc, 16) == crc32c.crc32c("\n".join(lines[:4]).encode() + b"\n")


def test_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert checkpoint.read(tmp_path / CHECKPOINT_FILE_NAME) is None


def test_crash_before_rename_leaves_old_file(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE_NAME
    old = PartitionCheckpoint(10, 0, 9)
    checkpoint.write(path, old)
    # Simulate a crash after the temp write (complete or partial) but before the rename.
    new = PartitionCheckpoint(20, 0, 19)
    temp_path(path).write_bytes(new.encode()[:17])
    assert checkpoint.read(path) == old
    # The next write succeeds and cleans the temp file up.
    checkpoint.write(path, new)
    assert checkpoint.read(path) == new
    assert not temp_path(path).exists()


def test_crash_before_first_rename_reads_as_absent(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE_NAME
    temp_path(path).write_bytes(PartitionCheckpoint(1, 0, 1).encode())
    assert checkpoint.read(path) is None


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (b"\x00" * 64, "truncated"),
        (b"garbage\n", "checksum line"),
        (b"0\nrecovery_point 5\n", "checksum line"),
        (b"\xff\xfe\n\x01\n", "checksum line"),
    ],
)
def test_garbage_raises_corrupt_checkpoint(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / CHECKPOINT_FILE_NAME
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError, match=reason):
        checkpoint.read(path)


def test_every_truncation_of_a_valid_file_is_detected(tmp_path: Path) -> None:
    data = PartitionCheckpoint(99, 3, 98).encode()
    path = tmp_path / CHECKPOINT_FILE_NAME
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(CorruptCheckpointError):
            checkpoint.read(path)


def test_flipped_digit_fails_checksum(tmp_path: Path) -> None:
    data = bytearray(PartitionCheckpoint(99, 3, 98).encode())
    index = data.index(b"99")
    data[index] = ord("8")
    path = tmp_path / CHECKPOINT_FILE_NAME
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch"):
        checkpoint.read(path)


def _with_crc(body: bytes) -> bytes:
    return body + f"crc32c {crc32c.crc32c(body):08x}\n".encode()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"1\nrecovery_point 1\nlog_start_offset 0\nhigh_watermark 1\n", "unknown version"),
        (b"0\nrecovery_point 1\nlog_start_offset 0\n", "expected 3 fields"),
        (b"0\nrecovery_point 1\nhigh_watermark 0\nlog_start_offset 1\n", "expected 'log_start"),
        (b"0\nrecovery_point -1\nlog_start_offset 0\nhigh_watermark 1\n", "expected 'recovery"),
        (b"0\nrecovery_point x\nlog_start_offset 0\nhigh_watermark 1\n", "expected 'recovery"),
    ],
)
def test_well_checksummed_but_invalid_content(tmp_path: Path, body: bytes, reason: str) -> None:
    path = tmp_path / CHECKPOINT_FILE_NAME
    path.write_bytes(_with_crc(body))
    with pytest.raises(CorruptCheckpointError, match=reason):
        checkpoint.read(path)


def test_negative_offsets_are_rejected() -> None:
    with pytest.raises(ValueError, match="high_watermark"):
        PartitionCheckpoint(0, 0, -1)


def test_corrupt_error_is_a_typed_yak_error(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE_NAME
    path.write_bytes(b"junk")
    with pytest.raises(CorruptCheckpointError) as info:
        checkpoint.read(path)
    assert info.value.code == "KAFKA_STORAGE_ERROR"
    assert str(path) in info.value.message


def test_write_order_is_temp_fsync_rename_dirsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        assert Path(src).read_bytes() == b"payload"  # the temp file is complete before rename
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomically(tmp_path / "f", b"payload")
    assert events == ["fsync-file", "rename", "fsync-dir"]
