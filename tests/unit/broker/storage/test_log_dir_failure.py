"""Which OSErrors take the data folder offline, the typed error each becomes, and the probe."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from yak.errors import KafkaStorageError, UnknownServerError
from yak_broker.storage.log_dir_failure import PROBE_FILE, LogDirFailureChannel, probe


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS])
def test_a_storage_failure_is_retriable_and_takes_the_folder_offline_once(code: int) -> None:
    channel = LogDirFailureChannel()
    told: list[bool] = []
    channel.subscribe(told.append)
    error = channel.fail(OSError(code, "failed"), "t-0")
    assert isinstance(error, KafkaStorageError)
    assert error.retriable
    channel.fail(OSError(code, "again"), "t-1")
    assert channel.offline
    assert told == [True]
    assert "t-0" in channel.reason  # the first failure is the one remembered
    with pytest.raises(KafkaStorageError, match="offline"):
        channel.check_online("t-2")
    channel.recover()
    channel.recover()
    assert told == [True, False]
    channel.check_online("t-2")


def test_other_os_errors_are_server_errors_and_leave_the_folder_online() -> None:
    channel = LogDirFailureChannel()
    error = channel.fail(OSError(errno.EMFILE, "Too many open files"), "t-0")
    assert isinstance(error, UnknownServerError)
    assert not channel.offline


def test_probe_writes_and_removes_its_file(tmp_path: Path) -> None:
    assert probe(tmp_path)
    assert not (tmp_path / PROBE_FILE).exists()
    assert not probe(tmp_path / "missing")
