"""WatchedPrefix never stops following by itself: a failure nobody expected is logged, and the
prefix is loaded again and followed on, instead of a cache frozen without a word."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.unit.shared.metadata.test_watched import Copy as WatchedCopy
from yak.clock import FakeClock
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.store import KeyLike, Watch, WatchEvent, as_key


class Copy(WatchedCopy):
    """test_watched's copy of the prefix, whose ``apply`` raises once on ``fail_on``."""

    def __init__(self, store: MemoryMetadataStore, clock: FakeClock) -> None:
        super().__init__(store, clock)
        self.fail_on: bytes | None = None

    def apply(self, event: WatchEvent) -> None:
        if event.key == self.fail_on:
            self.fail_on = None
            raise RuntimeError("a listener's bug")
        super().apply(event)


async def _advance_until(clock: FakeClock, done: asyncio.Future[None]) -> None:
    for _ in range(100):
        if done.done():
            return
        await asyncio.sleep(0.01)
        clock.advance(0.1)


async def test_a_failing_apply_is_logged_and_the_prefix_loaded_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    copy = Copy(store, clock)
    await copy.watched.start()
    try:
        copy.fail_on = b"p/bad"
        await store.put("p/bad", b"1")
        revision = await store.put("p/after", b"2")
        waiting = asyncio.ensure_future(copy.watched.wait_for_revision(revision, timeout_s=5))
        await _advance_until(clock, waiting)
        await waiting
        assert copy.keys == {b"p/bad": b"1", b"p/after": b"2"}  # the reload has the lost one
        assert copy.loads == 2
        assert "test watch broke" in caplog.text
        assert "a listener's bug" in caplog.text
        later = await store.put("p/later", b"3")  # and it follows on
        await copy.watched.wait_for_revision(later, timeout_s=5)
        assert copy.keys[b"p/later"] == b"3"
    finally:
        await copy.watched.stop()


class BrokenWatchStore(MemoryMetadataStore):
    """Its first watch breaks with an error that is no ``MetadataStoreError``."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.broken = False

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        if not self.broken:
            self.broken = True
            return _BrokenWatch(as_key(prefix), start_revision)
        return super().watch_prefix(prefix, start_revision)


class _BrokenWatch(Watch):
    async def _start(self) -> None:
        raise RuntimeError("a bug in the watch")

    async def _stop(self) -> None:
        pass


async def test_a_watch_that_breaks_unexpectedly_is_opened_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="yak.metadata.watched")
    clock = FakeClock()
    store = BrokenWatchStore(clock)
    copy = Copy(store, clock)
    await copy.watched.start()
    try:
        revision = await store.put("p/k", b"v")
        waiting = asyncio.ensure_future(copy.watched.wait_for_revision(revision, timeout_s=5))
        await _advance_until(clock, waiting)
        await waiting
        assert copy.keys == {b"p/k": b"v"}
        assert copy.watched.connected
        assert copy.watched.started
        assert "test watch reopened at revision" in caplog.text
    finally:
        await copy.watched.stop()
