"""Async front of one partition log: serialised appends and group commit (``GroupCommitter``).

The ``Log`` is synchronous and single-writer; the broker is asyncio. ``GroupCommitter.append``
runs the log append on the event loop (a page-cache write: no await inside, so appends are
serialised by construction) and, in ``flush.mode=sync``, then waits until an fsync covers the
appended offsets. At most one fsync per log is in flight, run in the default executor's worker
thread on duplicated descriptors. Every appender that arrives while it runs waits for the next
one, which starts as soon as it completes and covers all of them: with N concurrent producers
one fsync acknowledges up to N appends (group commit), and no acknowledgement precedes its
fsync. The descriptors the worker fsyncs are duplicates owned by the round
(``Log.prepare_flush``): the bounded file cache may evict and close the segment's own
descriptors meanwhile, never these (see ``file_handles``).

Crash behaviour: an acknowledged sync-mode append was fsynced: its ``.log`` bytes, and the
segment's directory entry (fsynced at roll). The active segment's indexes are not synced on
this path; recovery always rebuilds them (see ``Log.prepare_flush``). An fsync error fails
every waiting append with that error and leaves the recovery point where it was (Kafka would
take the log dir offline).

Concurrency: use from one event loop; the log must not be used from other threads.
"""

from __future__ import annotations

import asyncio
from functools import partial

from yak.errors import NotLeaderOrFollowerError
from yak_broker.storage.log import FlushTicket, Log, LogAppendInfo
from yak_broker.storage.segment import sync_and_close

__all__ = ["GroupCommitter"]


class GroupCommitter:
    """Appends to ``log`` and, in sync mode, acknowledges them after a shared fsync."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._in_flight: asyncio.Future[None] | None = None
        self.fsyncs = 0  # number of completed fsync rounds (for tests and metrics)

    async def append(self, records: bytes | memoryview, leader_epoch: int) -> LogAppendInfo:
        """``Log.append``; in sync mode return only once the batches are fsynced."""
        info = self.log.append(records, leader_epoch)
        if self.log.config.sync:
            await self.wait_durable(info.last_offset + 1)
        return info

    async def append_as_follower(self, records: bytes | memoryview) -> LogAppendInfo:
        info = self.log.append_as_follower(records)
        if self.log.config.sync:
            await self.wait_durable(info.last_offset + 1)
        return info

    async def flush(self) -> None:
        """fsync everything appended so far (off the event loop)."""
        await self.wait_durable(self.log.log_end_offset)

    async def wait_durable(self, offset: int) -> None:
        """Return once the recovery point is at or above ``offset``."""
        if self.log.recovery_point >= offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        if self._in_flight is None:
            self._schedule_round()
        await future  # a cancelled waiter only cancels its own future; the round goes on

    def truncate_to(self, offset: int) -> bool:
        """``Log.truncate_to``; appends waiting for an fsync of truncated offsets fail with
        NotLeaderOrFollowerError (their batches are gone), the others keep waiting."""
        if not self.log.truncate_to(offset):
            return False
        end = self.log.log_end_offset
        lost = [(o, f) for o, f in self._waiters if o > end]
        self._waiters = [(o, f) for o, f in self._waiters if o <= end]
        for _, future in lost:
            if not future.done():
                future.set_exception(
                    NotLeaderOrFollowerError(f"the log was truncated to {end} before the fsync")
                )
        return True

    def fail_pending(self, error: BaseException) -> None:
        """Fail every waiting append (e.g. the log was truncated on losing leadership)."""
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(error)

    def _start_deferred(self) -> None:
        assert self._in_flight is not None
        placeholder, self._in_flight = self._in_flight, None
        placeholder.set_result(None)
        if self._waiters:
            self._start_round()

    def _start_round(self) -> None:
        ticket = self.log.prepare_flush()
        loop = asyncio.get_running_loop()
        self._in_flight = loop.run_in_executor(None, sync_and_close, ticket.fds)
        self._in_flight.add_done_callback(partial(self._round_done, ticket))

    def _round_done(self, ticket: FlushTicket, done: asyncio.Future[None]) -> None:
        self._in_flight = None
        error = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if error is not None:
            self.fail_pending(error)
            return
        self.log.mark_flushed(ticket.target, ticket.generation)
        self.fsyncs += 1
        durable = self.log.recovery_point
        pending: list[tuple[int, asyncio.Future[None]]] = []
        for offset, future in self._waiters:
            if offset > durable:
                pending.append((offset, future))
            elif not future.done():
                future.set_result(None)
        self._waiters = pending
        if pending:
            self._start_round()

    def _schedule_round(self) -> None:
        """Start a round once the callbacks ready now have run: appenders woken by the last
        round (or started together) append first, so one fsync covers all of them."""
        loop = asyncio.get_running_loop()
        self._in_flight = loop.create_future()  # a placeholder: a round is pending
        loop.call_soon(self._start_deferred)

    async def close(self) -> None:
        """Let the fsyncs in flight finish (their waiters are answered)."""
        while self._in_flight is not None:
            await asyncio.wait([self._in_flight])
            await asyncio.sleep(0)  # let the done callback run (it may start another round)
