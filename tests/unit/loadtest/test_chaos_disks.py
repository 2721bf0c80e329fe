"""The chaos disks' filler: allocated in 1 MiB steps, then 4 KiB ones, until the file system
answers ENOSPC (here a fake one of 3 MiB + 8 KiB); freeing removes it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from loadtest.chaos import disks
from loadtest.chaos.disks import FILLER


def test_fill_takes_every_byte_left_then_free_gives_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = 3 * (1 << 20) + 2 * 4096
    calls: list[tuple[int, int]] = []

    def fallocate(fd: int, offset: int, length: int) -> None:
        calls.append((offset, length))
        if offset + length > room:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    assert disks.fill(tmp_path) == room
    assert [length for _, length in calls].count(1 << 20) == 4  # 3 taken, the 4th refused
    assert (tmp_path / FILLER).exists()
    disks.free(tmp_path)
    assert not (tmp_path / FILLER).exists()
    disks.free(tmp_path)  # twice: nothing to remove


def test_fill_raises_what_is_not_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "posix_fallocate", broken)
    with pytest.raises(OSError, match="Input/output"):
        disks.fill(tmp_path)
