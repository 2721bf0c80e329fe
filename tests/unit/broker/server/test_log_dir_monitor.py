"""The monitor publishes a failed data folder in the registration, probes it, and clears the
mark — in the registration first, then in memory — once a probe succeeds."""

from __future__ import annotations

import asyncio
import contextlib
import errno
from pathlib import Path

import pytest

from yak_broker.server import log_dir_monitor
from yak_broker.server.log_dir_monitor import LogDirMonitor
from yak_broker.storage.log_dir_failure import LogDirFailureChannel


class Registration:
    """Stands in for the registrar: records what was published, can refuse (etcd down)."""

    def __init__(self, failures: LogDirFailureChannel) -> None:
        self.published: list[tuple[tuple[str, ...], bool]] = []
        self.refuse = False
        self.changed = asyncio.Event()
        self._failures = failures

    async def publish(self, offline: tuple[str, ...]) -> bool:
        # Records whether the mark was still set in memory when it was cleared here.
        self.published.append((offline, self._failures.offline))
        self.changed.set()
        return not self.refuse


async def published(
    registration: Registration, wanted: tuple[tuple[str, ...], bool], after: int = 0
) -> int:
    """Wait until ``wanted`` is published (after the first ``after`` publishes); its index."""
    while wanted not in registration.published[after:]:
        registration.changed.clear()
        await asyncio.wait_for(registration.changed.wait(), 5)
    return registration.published.index(wanted, after)


async def back_online(failures: LogDirFailureChannel) -> bool:
    """Whether the mark is cleared in memory within a few event-loop turns (it follows the
    registration's clear at once)."""
    for _ in range(100):
        if not failures.offline:
            return True
        await asyncio.sleep(0)
    return False


def monitor_of(
    failures: LogDirFailureChannel, tmp_path: Path, registration: Registration
) -> LogDirMonitor:
    return LogDirMonitor(failures, tmp_path, "dir-1", registration.publish, probe_interval_s=0.01)


async def test_a_failed_folder_is_published_probed_and_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = LogDirFailureChannel()
    registration = Registration(failures)
    usable = False
    monkeypatch.setattr(log_dir_monitor, "probe", lambda _d: usable)
    task = asyncio.create_task(monitor_of(failures, tmp_path, registration).run())
    try:
        failures.fail(OSError(errno.ENOSPC, "No space left on device"), "t-0")
        assert await published(registration, (("dir-1",), True)) == 0
        await asyncio.sleep(0.05)  # probes fail meanwhile: nothing more is written
        assert len(registration.published) == 1
        usable = True
        assert await published(registration, ((), True)) == 1  # registration first
        assert await back_online(failures)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_mark_stays_while_the_registration_cannot_be_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = LogDirFailureChannel()
    registration = Registration(failures)
    monkeypatch.setattr(log_dir_monitor, "probe", lambda _d: True)
    task = asyncio.create_task(monitor_of(failures, tmp_path, registration).run())
    try:
        registration.refuse = True
        failures.fail(OSError(errno.EIO, "Input/output error"), "t-0")
        refused = await published(registration, ((), True))  # a clear, refused
        assert failures.offline  # a leader must not take it back while etcd says nothing
        registration.refuse = False
        await published(registration, ((), True), after=refused + 1)
        assert await back_online(failures)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
