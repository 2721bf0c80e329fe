"""Tells the cluster when the broker's data folder fails and when it is usable again (KIP-112).

``LogDirMonitor.run`` drives ``storage.log_dir_failure.LogDirFailureChannel``:

- the folder went offline (an append met ``ENOSPC``/``EIO``): the registration is rewritten
  with the folder's id in ``offline_log_dirs`` — the controller then moves the leaderships of
  this broker's replicas to in-sync replicas and drops it from their ISRs, as for a dead
  broker — and from then on every ``probe_interval_s`` a small file is written, fsynced and
  removed in the folder (on a worker thread);
- once a probe succeeds, the mark is cleared in the registration first, then in memory (the
  replica fetchers wake and follow again, each partition finding its divergence point with
  its leader first, as a restarting replica does; the leaders add the broker back to their
  ISRs once it caught up). Clearing the registration first keeps a leader from adding the
  broker back while the controller still counts its folder as offline.

A rewrite that fails (etcd unreachable, not registered yet) is tried again at the next probe
interval. The etcd write rate is bounded: one rewrite per change of the mark, and a change
back needs a probe, at most one every ``probe_interval_s``.

Single event loop: the channel's listeners run there; only ``probe`` runs on a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from yak_broker.storage.log_dir_failure import LogDirFailureChannel, probe

__all__ = ["LogDirMonitor"]

_log = logging.getLogger(__name__)

#: Rewrites the registration's ``offline_log_dirs``; whether it did.
Publish = Callable[[tuple[str, ...]], Awaitable[bool]]


class LogDirMonitor:
    """Publishes the data folder's failures and probes it back online (see the module doc)."""

    def __init__(
        self,
        failures: LogDirFailureChannel,
        directory: Path,
        log_dir_id: str,
        publish: Publish,
        *,
        probe_interval_s: float = 2.0,
    ) -> None:
        self._failures = failures
        self._directory = directory
        self._offline_value = (log_dir_id or str(directory),)
        self._publish = publish
        self._interval_s = probe_interval_s
        self._changed = asyncio.Event()
        #: What the registration says now (as far as this monitor wrote it).
        self._published: tuple[str, ...] = ()
        failures.subscribe(lambda _offline: self._changed.set())

    async def run(self) -> None:
        while True:
            self._changed.clear()
            if not self._failures.offline:
                if self._published and not await self._tell(()):
                    await self._pause()
                    continue
                await self._changed.wait()
                continue
            if not self._published:
                await self._tell(self._offline_value)
            await self._pause()  # only this loop clears the mark: still offline here
            usable: bool = await asyncio.to_thread(probe, self._directory)
            if usable and await self._tell(()):
                self._failures.recover()

    async def _tell(self, offline: tuple[str, ...]) -> bool:
        if await self._publish(offline):
            self._published = offline
            _log.warning("registration: offline data folders %s", list(offline) or "none")
            return True
        return False

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), self._interval_s)
