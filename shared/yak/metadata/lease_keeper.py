"""``LeaseKeeper``: keeps one metadata-store lease alive in the background.

Brokers (registration), coordinators (election) and consumer sessions hold etcd leases; losing
one means losing the keys on it, so the holder must learn of the loss at once and step down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Self

from yak.clock import Clock, SystemClock
from yak.closing import AsyncClosing
from yak.errors import MetadataStoreError
from yak.metadata.store import LeaseExpiredError, MetadataStore

__all__ = ["LeaseKeeper"]


class LeaseKeeper(AsyncClosing):
    """Keeps one lease alive in the background and reports when it is lost.

    Refreshes every ``ttl_s / 3`` counted from ``start()``. A refresh that fails for a
    transient reason is retried at the next tick; once no refresh has succeeded for ``ttl_s``
    the lease is presumed expired, and so it is when a refresh has not answered by then (one
    that hangs is abandoned at that moment, not awaited). When the store says the lease is
    gone, or it is presumed so, the keeper stops, ``lost`` becomes true, ``wait_lost()``
    returns the ``LeaseExpiredError`` and ``on_lost`` is called with it.
    """

    def __init__(
        self,
        store: MetadataStore,
        lease_id: int,
        ttl_s: float,
        *,
        clock: Clock | None = None,
        on_lost: Callable[[LeaseExpiredError], None] | None = None,
    ) -> None:
        self.store = store
        self.lease_id = lease_id
        self.ttl_s = ttl_s
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._on_lost = on_lost
        self._lost = asyncio.Event()
        self._error: LeaseExpiredError | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @property
    def error(self) -> LeaseExpiredError | None:
        return self._error

    def start(self) -> None:
        """Begin refreshing (needs a running event loop)."""
        if self._task is None:
            started_at = self._clock.monotonic()
            self._task = asyncio.get_running_loop().create_task(self._run(started_at))

    async def stop(self, *, revoke: bool = False) -> None:
        """Stop refreshing; with ``revoke`` also end the lease now (its keys vanish)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        if revoke and not self.lost:
            await self.store.revoke_lease(self.lease_id)

    async def wait_lost(self) -> LeaseExpiredError:
        """Wait until the lease is lost and return why."""
        await self._lost.wait()
        assert self._error is not None
        return self._error

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def aclose(self) -> None:
        """``stop``: what leaving ``async with`` does."""
        await self.stop()

    async def _run(self, started_at: float) -> None:
        interval = self.ttl_s / 3
        refreshed_at = next_at = started_at  # times the lease was last known to be renewed
        while True:
            next_at = max(next_at + interval, self._clock.monotonic())
            await self._clock.sleep(next_at - self._clock.monotonic())
            sent_at = self._clock.monotonic()
            try:
                answered = await self._refresh(refreshed_at + self.ttl_s - sent_at)
            except LeaseExpiredError as exc:
                self._declare_lost(exc)
                return
            except MetadataStoreError as exc:
                if self._clock.monotonic() - refreshed_at >= self.ttl_s:
                    self._declare_lost(
                        LeaseExpiredError(
                            f"lease {self.lease_id:#x} not refreshed for {self.ttl_s} s: "
                            f"{exc.message}",
                            lease_id=self.lease_id,
                        )
                    )
                    return
                continue
            if not answered:
                self._declare_lost(
                    LeaseExpiredError(
                        f"lease {self.lease_id:#x} not refreshed for {self.ttl_s} s: "
                        "its keep-alive did not answer",
                        lease_id=self.lease_id,
                    )
                )
                return
            refreshed_at = sent_at

    async def _refresh(self, budget_s: float) -> bool:
        """One keep-alive, given at most ``budget_s`` (what is left of the TTL since the last
        renewal); False when it did not answer in time. The store bounds its own calls, but
        the keeper does not rely on that: a call that hangs past the TTL (etcd-side, the lease
        has expired by then) must not leave the holder believing in it."""
        call = asyncio.ensure_future(self.store.keep_alive_once(self.lease_id))
        timer = asyncio.ensure_future(self._clock.sleep(max(budget_s, 0.0)))
        try:
            await asyncio.wait((call, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not call.done():
                call.cancel()
            await asyncio.wait((call, timer))
        if call.cancelled():
            return False
        call.result()  # raises what the store raised
        return True

    def _declare_lost(self, error: LeaseExpiredError) -> None:
        self._error = error
        self._lost.set()
        if self._on_lost is not None:
            self._on_lost(error)
