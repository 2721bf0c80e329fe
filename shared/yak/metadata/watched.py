"""``WatchedPrefix``: following one etcd prefix — a range read, then a watch from its revision.

Three caches keep a local copy of part of etcd: the cluster metadata
(``yak.metadata.cache.MetadataCache``), the users and ACLs (``yak.security.cache``) and the
rest-proxy's quota overrides. This is their one lifecycle; each cache supplies what a key means:

- ``start`` reads the prefix (``MetadataStoreError`` if etcd is down: a service does not start
  blind) and hands every key to ``load``, which replaces the cache's contents; then a task
  watches from the read's revision + 1, so no change falls between the two, and hands each
  event to ``apply``.
- If the watch falls behind etcd's compaction the prefix is loaded again; while etcd is
  unreachable the task retries with backoff (0.1 s doubling to 5 s, on the injected clock) and
  the cache keeps serving what it has (``connected`` says which; ``… watch reopened at
  revision N`` is logged when it is back).
- The task never ends by itself: any other failure — a bug in the watch or in ``apply`` — is
  logged with its traceback and, after the same backoff, the prefix is loaded again (an event
  may have been lost with it) and followed anew. A cache frozen without a word is the failure
  this rules out.
- ``revision`` is the last etcd revision applied (set before ``apply`` runs, so the cache sees
  it); after each load and event every ``next_change`` waiter wakes, and ``wait_for_revision``
  lets a writer see its own write.

Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.store import KeyLike, KeyValue, MetadataStore, WatchEvent

__all__ = ["RETRY_MAX_S", "RETRY_MIN_S", "WatchedCopy", "WatchedPrefix"]

log = logging.getLogger(__name__)

RETRY_MIN_S = 0.1
RETRY_MAX_S = 5.0


class WatchedPrefix:
    """Feeds one cache from ``prefix`` (see the module docstring); ``what`` names it in logs."""

    def __init__(
        self,
        store: MetadataStore,
        prefix: KeyLike,
        *,
        what: str,
        load: Callable[[Sequence[KeyValue]], None],
        apply: Callable[[WatchEvent], None],
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._prefix = prefix
        self._what = what
        self._load_keys = load
        self._apply = apply
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.revision = 0
        self.connected = False

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        """Load the prefix (raises ``MetadataStoreError`` if etcd is down), then follow it."""
        await self._load()
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def next_change(self) -> None:
        """Return after the next load or event."""
        await self._changed.wait()

    async def wait_for_revision(self, revision: int, timeout_s: float) -> None:
        """Wait until ``revision`` is applied; ``TimeoutError`` after ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            while self.revision < revision:
                await self._changed.wait()

    async def _load(self) -> None:
        result = await self._store.range_prefix(self._prefix)
        self.revision = result.revision
        self._load_keys(result.kvs)
        self.connected = True
        self._wake()

    async def _follow(self) -> None:
        delay = RETRY_MIN_S
        reload = failed = False
        while True:
            try:
                if reload:
                    await self._load()
                    reload = False
                watch = self._store.watch_prefix(self._prefix, self.revision + 1)
                async with watch:
                    _raise_if_cancelling(None)  # a cancel may have been lost inside the open
                    if failed:
                        log.info("%s watch reopened at revision %d", self._what, self.revision + 1)
                        failed = False
                    self.connected = True
                    delay = RETRY_MIN_S
                    async for event in watch:
                        self.revision = max(self.revision, event.mod_revision)
                        self._apply(event)
                        self._wake()
            except RevisionCompactedError:
                log.warning("%s watch fell behind compaction; reloading", self._what)
                reload = failed = True
            except MetadataStoreError as exc:
                _raise_if_cancelling(exc)
                self.connected, failed = False, True
                log.warning("%s watch failed (%s); retrying in %.1f s", self._what, exc, delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            except Exception:
                _raise_if_cancelling(None)
                self.connected, failed = False, True
                log.exception("%s watch broke; loading again in %.1f s", self._what, delay)
                reload = True
                await self._clock.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


class WatchedCopy:
    """What a cache fed by one ``WatchedPrefix`` (its ``_watched``) offers its users: start,
    stop, the revision it reflects, and waiting for one's own write."""

    _watched: WatchedPrefix

    @property
    def revision(self) -> int:
        return self._watched.revision

    @property
    def started(self) -> bool:
        return self._watched.started

    async def start(self) -> None:
        """Load (raises MetadataStoreError if etcd is down), then follow in the background."""
        await self._watched.start()

    async def stop(self) -> None:
        await self._watched.stop()

    async def wait_for_revision(self, revision: int, timeout_s: float = 10.0) -> None:
        """Wait until the copy reflects etcd ``revision`` (e.g. this process's own write)."""
        await self._watched.wait_for_revision(revision, timeout_s)


def _raise_if_cancelling(exc: BaseException | None) -> None:
    """A retry loop must not outlive a cancel that surfaced as a store error."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc
