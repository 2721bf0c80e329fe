"""A data folder that failed: which errors say so, the broker's mark, and the probe that
clears it (Kafka's ``LogDirFailureChannel``, KIP-112).

A write that fails with ``ENOSPC``, ``EDQUOT``, ``EIO`` or ``EROFS`` (or a read with ``EIO``)
is no fault of the request: the folder under the log failed. ``LogDirFailureChannel.fail``
turns such an ``OSError`` into ``KafkaStorageError`` (retriable; other ``OSError``\\ s stay
``UnknownServerError``) and, the first time, marks the folder offline and tells its listeners
(the broker's ``LogDirMonitor`` writes the mark into its registration so that the controller
moves the folder's leaderships to in-sync replicas and drops this broker from their ISRs;
the replica fetchers stop following). While offline, appends are refused before they touch
the disk (``check_online``). ``probe`` writes, fsyncs and removes a small file in the folder:
when it succeeds again (space came back) ``recover`` clears the mark and tells the listeners.

The logs themselves stay open and consistent while offline: a failed append cut its bytes
off again (``LogSegment.append``), so the log in memory is the log on disk. Coming back, the
broker follows as any replica whose leader changed: it asks the leader for its divergence
point (OffsetsForLeaderEpoch) and truncates there — what a restarting replica does.

Thread-safety: ``fail``, ``check_online``, ``recover`` and the listeners run on the broker's
event loop; ``probe`` is blocking file work, meant for a worker thread (it touches no state).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

from yak.errors import KafkaStorageError, UnknownServerError, YakError

__all__ = ["PROBE_FILE", "STORAGE_ERRNOS", "LogDirFailureChannel", "is_storage_failure", "probe"]

_log = logging.getLogger(__name__)

#: The errors that mean the folder failed, not the request: no space (or quota) left, an I/O
#: error of the device, a file system remounted read-only.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
#: The probe's scratch file, in the data folder (never a log's name: no ``-<partition>``).
PROBE_FILE = ".yak-disk-probe"
_PROBE_BYTES = 64 * 1024


def is_storage_failure(exc: OSError) -> bool:
    """Whether ``exc`` says the folder failed (``STORAGE_ERRNOS``)."""
    return exc.errno in STORAGE_ERRNOS


def probe(directory: Path) -> bool:
    """Write, fsync and remove a small file in ``directory``; whether all of it worked."""
    path = directory / PROBE_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            written = os.write(fd, b"\0" * _PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
        return written == _PROBE_BYTES
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


class LogDirFailureChannel:
    """The broker's data folder: online, or offline since a storage failure (module doc)."""

    def __init__(self) -> None:
        #: Why the folder went offline ("" while online).
        self.reason = ""
        self._listeners: list[Callable[[bool], None]] = []

    @property
    def offline(self) -> bool:
        return bool(self.reason)

    def subscribe(self, listener: Callable[[bool], None]) -> None:
        """Call ``listener(offline)`` on every change of the mark."""
        self._listeners.append(listener)

    def fail(self, exc: OSError, where: str) -> YakError:
        """The typed error of ``exc`` met on ``where`` (a partition's folder name); a storage
        failure marks the folder offline (once) and is ``KafkaStorageError``."""
        if not is_storage_failure(exc):
            return UnknownServerError(f"storage error on {where}: {exc}")
        if not self.offline:
            self.reason = f"{where}: {exc}"
            _log.error("data folder offline after a storage error on %s", self.reason)
            self._tell(offline=True)
        return KafkaStorageError(f"storage error on {where}: {exc}")

    def check_online(self, where: str) -> None:
        """Raise ``KafkaStorageError`` while the folder is offline."""
        if self.reason:
            raise KafkaStorageError(f"{where}: the data folder is offline ({self.reason})")

    def recover(self) -> None:
        """The probe succeeded: the folder is online again."""
        if self.offline:
            _log.warning("data folder online again (was offline after %s)", self.reason)
            self.reason = ""
            self._tell(offline=False)

    def _tell(self, *, offline: bool) -> None:
        for listener in self._listeners:
            listener(offline)
