"""Controller election: exactly one active coordinator per cluster, through an etcd lease.

Campaign: grant a lease of ``ttl_s`` seconds, then one transaction "``controller`` key absent →
put my ``ControllerRecord`` on my lease". The winner's **controller epoch** is the key's
``create_revision`` (etcd's revision counter only grows, so every election has a larger epoch;
no extra key is needed). The winner then rewrites the record with ``epoch`` filled in (fenced
on that create revision) and keeps the lease alive with a ``LeaseKeeper``.

Standbys watch the key from the revision of their failed campaign and campaign again as soon as
it is deleted: at once when the active one resigns (``stop(resign=True)`` revokes the lease,
e.g. on SIGTERM), within the lease TTL when it dies (kill -9) or loses etcd.

A ``Term`` is one period as active controller. It ends when the lease is lost (the keeper's
``on_lost``), when a fenced write finds another epoch (``Term.end``), or on ``stop``; the
election then campaigns again. Fencing: every controller write carries ``term.fence`` — a
compare of the controller key's create_revision with the term's epoch — so a deposed
controller's writes fail even before it learns it was deposed.

Single event loop; one background task drives the campaign loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError, NotControllerError
from yak.metadata.keyspace import Keyspace
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.models import ControllerRecord
from yak.metadata.store import (
    Compare,
    EventKind,
    GetOp,
    GetResponse,
    MetadataStore,
    Op,
    PutOp,
    TxnResult,
)

__all__ = ["Candidate", "Election", "Term"]

log = logging.getLogger(__name__)

_RETRY_MIN_S = 0.2
_RETRY_MAX_S = 2.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """Who campaigns: the coordinator's id and the address its admin API is reachable at."""

    coordinator_id: str
    host: str
    port: int
    scheme: Literal["http", "https"] = "http"


@dataclass(eq=False)
class Term:
    """One period as active controller; ``epoch`` fences every write made in it."""

    epoch: int
    lease_id: int
    fence: Compare
    _ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def end(self, reason: str) -> None:
        """Step down (idempotent): the election campaigns again."""
        if not self._ended.is_set():
            log.warning("controller epoch %d ends: %s", self.epoch, reason)
            self._ended.set()

    async def wait_ended(self) -> None:
        await self._ended.wait()


async def fenced_txn(
    store: MetadataStore,
    keyspace: Keyspace,
    term: Term,
    compares: Sequence[Compare],
    ops: Sequence[Op],
) -> TxnResult | None:
    """Run ``ops`` if ``term``'s fence and ``compares`` hold: the result, or None when a compare
    failed — and when it was the fence (another coordinator holds the controller key), the
    term ends first (``term.ended``)."""
    result = await store.txn([term.fence, *compares], ops, [GetOp(keyspace.controller)])
    if result.succeeded:
        return result
    controller = result.responses[0]
    assert isinstance(controller, GetResponse)
    if not controller.kvs or not term.fence.holds(controller.kvs[0]):
        term.end("another coordinator holds the controller key")
    return None


class Election:
    """Campaigns for the ``controller`` key of one cluster; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        candidate: Candidate,
        *,
        ttl_s: int = 5,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._key = keyspace.controller
        self._candidate = candidate
        self._ttl_s = ttl_s
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._term: Term | None = None
        self._keeper: LeaseKeeper | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def term(self) -> Term | None:
        """The current term while this coordinator is the active controller, else None."""
        term = self._term
        return term if term is not None and not term.ended else None

    def require_term(self) -> Term:
        """The current term, or NotControllerError on a standby."""
        term = self.term
        if term is None:
            raise NotControllerError(
                f"coordinator {self._candidate.coordinator_id} is not the active controller"
            )
        return term

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, *, resign: bool = True) -> None:
        """Stop campaigning; an active controller resigns (revokes its lease) unless told not to."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close_term("coordinator stopping", revoke=resign)

    async def wait_elected(self) -> Term:
        """Wait until this coordinator is the active controller; return its term."""
        while True:
            term = self.term
            if term is not None:
                return term
            changed = self._changed
            await changed.wait()

    # -- the campaign loop --------------------------------------------------------------------

    async def _run(self) -> None:
        delay = _RETRY_MIN_S
        while True:
            try:
                outcome = await self._campaign()
                delay = _RETRY_MIN_S
                if isinstance(outcome, Term):
                    await self._serve(outcome)
                else:
                    await self._wait_vacant(outcome)
            except MetadataStoreError as exc:
                await self._close_term(f"metadata store error: {exc}", revoke=False)
                log.warning("election: %s; retrying in %.1f s", exc, delay)
                await self._clock.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)

    async def _campaign(self) -> Term | int:
        """Try to become controller: the new term, or the revision to watch the key from."""
        lease_id = await self._store.grant_lease(self._ttl_s)
        try:
            result = await self._store.txn(
                [Compare.absent(self._key)],
                [PutOp(self._key, self._record(epoch=0), lease_id)],
            )
            if not result.succeeded:
                await self._store.revoke_lease(lease_id)
                return result.revision
            epoch = result.revision  # the controller key's create_revision
            fence = Compare.create_revision(self._key, epoch)
            stamped = await self._store.txn(
                [fence], [PutOp(self._key, self._record(epoch=epoch), lease_id)]
            )
        except BaseException:
            with contextlib.suppress(MetadataStoreError):
                await self._store.revoke_lease(lease_id)
            raise
        if not stamped.succeeded:
            return stamped.revision
        return Term(epoch=epoch, lease_id=lease_id, fence=fence)

    async def _serve(self, term: Term) -> None:
        log.info(
            "coordinator %s is the active controller (epoch %d)",
            self._candidate.coordinator_id,
            term.epoch,
        )
        self._keeper = LeaseKeeper(
            self._store,
            term.lease_id,
            self._ttl_s,
            clock=self._clock,
            on_lost=lambda exc: term.end(f"lease lost: {exc.message}"),
        )
        self._keeper.start()
        self._term = term
        self._notify()
        await term.wait_ended()
        await self._close_term("term ended", revoke=True)

    async def _close_term(self, reason: str, *, revoke: bool) -> None:
        term, self._term = self._term, None
        keeper, self._keeper = self._keeper, None
        if term is None:
            return
        term.end(reason)
        self._notify()
        if keeper is not None:
            await keeper.stop(revoke=False)
        if revoke:  # resign: the key vanishes now, a standby takes over without waiting
            with contextlib.suppress(MetadataStoreError):
                await self._store.revoke_lease(term.lease_id)

    async def _wait_vacant(self, revision: int) -> None:
        """Wait until the controller key is deleted after ``revision``."""
        async with self._store.watch_prefix(self._key, start_revision=revision + 1) as watch:
            async for event in watch:
                if event.key == self._key.encode() and event.kind is EventKind.DELETE:
                    return
        raise MetadataStoreError("controller watch ended")

    def _record(self, *, epoch: int) -> bytes:
        return ControllerRecord(
            coordinator_id=self._candidate.coordinator_id,
            host=self._candidate.host,
            port=self._candidate.port,
            epoch=epoch,
            elected_at_ms=self._clock.time_ms(),
            scheme=self._candidate.scheme,
        ).encode()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
