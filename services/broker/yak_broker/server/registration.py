"""The broker's entry in the cluster registry: ``brokers/<id>`` on an etcd lease.

Registering: grant a lease of ``ttl_s`` seconds, then create the key *only if absent* (one etcd
transaction), and keep the lease alive with a ``LeaseKeeper``. The value is a
``BrokerRegistration`` with this process's random ``incarnation``.

A second broker with the same id never steals the key. If the key exists with another
incarnation — usually this broker's previous process, killed without deregistering, whose lease
has not expired yet — the registrar *waits* for the key to be deleted (a watch on it from the
revision of the read that found it, no polling), logging who holds it, for at most ``wait_s``
(default: the TTL + 5 s); then it fails with ``DuplicateBrokerRegistrationError`` and the
process exits. A live duplicate keeps its lease alive, so it is refused; a dead one's lease
expires within the TTL, so a quick restart after ``kill -9`` succeeds after at most one TTL.
The watch must not start at the holder's own ``mod_revision``: in a busy cluster etcd has
compacted past the revision at which a long-lived broker registered, and a watch from there
fails (``RevisionCompactedError``) — what made the soak's two failed kill -9 restarts exit
(docs/soak.md).

**A new data folder** (an empty-disk restart, docs/replication.md): before anything else, the
new process tells the cluster — ``announce_log_dir`` writes its new ``log_dir_id`` into the
registration its previous process left (compare-and-swap on that value, on that process's
lease, so it still expires as before), and the controller stops counting the old log at once
instead of after the lease: it takes the broker out of its ISRs and elects others where it led.
Nothing else of the old registration changes; the wait for its lease is unchanged.

**Fencing.** ``fence`` is a compare on the registration's value as this process last wrote
it; the leader's ISR changes carry it (``replication.isr_writer``), so that a previous process
of this id — still running after a pause, its place taken by a re-registration or a new data
folder announced — can no longer change an ISR.

**Rewrites** (``update``: ``shutting_down``; ``publish_load``: the load sample of
``load_sampler``; ``publish_offline_log_dirs``: a failed data folder, ``log_dir_monitor``)
are a compare-and-swap on the bytes this process last wrote, on the same lease: a process
fenced by a newer one (which re-registered, or announced a new data folder)
never overwrites what the newer one wrote. They hold a ``RewriteGate`` alone, which the ISR
writes share (``fenced_writes``), so that a rewrite never makes an ISR write's fence fail
(see ``registration_gate``); re-registering after a lease loss holds it alone too.

If the lease is lost while running (etcd unreachable for a TTL, or the lease revoked), the
registrar logs it and registers again with a new lease, retrying until it succeeds or the
broker stops. ``deregister`` revokes the lease: the key disappears at once, so the coordinator
moves leadership without waiting for the TTL.

Single event loop; ``register`` and ``deregister`` are called by the app's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import ClassVar

from yak.clock import Clock, SystemClock
from yak.errors import MetadataStoreError, RevisionCompactedError, YakError
from yak.metadata.keyspace import Keyspace
from yak.metadata.lease_keeper import LeaseKeeper
from yak.metadata.models import BrokerLoad, BrokerRegistration
from yak.metadata.store import (
    Compare,
    EventKind,
    GetOp,
    GetResponse,
    KeyValue,
    LeaseExpiredError,
    MetadataStore,
    PutOp,
)
from yak_broker.server.registration_gate import RewriteGate

__all__ = ["BrokerRegistrar", "DuplicateBrokerRegistrationError", "announce_log_dir"]

_log = logging.getLogger(__name__)
_RETRY_S = 1.0


class DuplicateBrokerRegistrationError(YakError):
    """Another live process holds this broker id's registration."""

    code: ClassVar[str] = "DUPLICATE_BROKER_REGISTRATION"
    kafka_code: ClassVar[int] = 101
    http_status: ClassVar[int] = 409


class BrokerRegistrar:
    """Keeps ``brokers/<id>`` registered on a lease; see the module doc."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        registration: BrokerRegistration,
        *,
        ttl_s: int,
        wait_s: float,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._key = keyspace.broker(registration.broker_id)
        self.registration = registration
        self._ttl_s = ttl_s
        self._wait_s = wait_s
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._keeper: LeaseKeeper | None = None
        self._retry_task: asyncio.Task[None] | None = None
        self._stopping = False
        #: The value this process last wrote at ``brokers/<id>`` (None before it registered).
        self._held: bytes | None = None
        self._gate = RewriteGate()

    @property
    def registered(self) -> bool:
        return self._keeper is not None and not self._keeper.lost

    def fence(self) -> Compare | None:
        """The compare that holds while the registration is this process's, as it wrote it
        (see the module doc); None while it is not registered."""
        if self._held is None or not self.registered:
            return None
        return Compare.value(self._key, self._held)

    @contextlib.asynccontextmanager
    async def fenced_writes(self) -> AsyncIterator[None]:
        """Hold this around a write fenced by ``fence`` (from before the fence is read until
        the write is answered): no rewrite of the registration overlaps it."""
        async with self._gate.shared():
            yield

    @property
    def lease_id(self) -> int | None:
        return self._keeper.lease_id if self._keeper is not None else None

    async def register(self) -> None:
        """Register, waiting up to ``wait_s`` for an older holder of the id to expire."""
        deadline = self._clock.monotonic() + self._wait_s
        while True:
            taken = await self._try_register()
            if taken is None:
                return
            holder, revision = taken
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0 or not await self._wait_for_release(holder, revision, remaining):
                raise DuplicateBrokerRegistrationError(
                    f"broker id {self.registration.broker_id} is registered by another live "
                    f"process ({_describe(holder)}); waited {self._wait_s:.0f} s for it to expire",
                    broker_id=self.registration.broker_id,
                )

    async def update(self, registration: BrokerRegistration) -> bool:
        """Rewrite the registration as ``registration`` (see the module doc); whether it did
        (False: not registered, fenced, or etcd failed)."""
        return await self._rewrite(lambda _current: registration)

    async def publish_load(self, load: BrokerLoad) -> bool:
        """Rewrite the registration with ``load`` as its sample, the rest as it is."""
        return await self._rewrite(lambda current: current.model_copy(update={"load": load}))

    async def publish_offline_log_dirs(self, offline: tuple[str, ...]) -> bool:
        """Rewrite the registration with ``offline`` as its failed data folders (the broker's
        ``LogDirMonitor``), the rest as it is."""
        return await self._rewrite(
            lambda current: current.model_copy(update={"offline_log_dirs": offline})
        )

    async def _rewrite(self, change: Callable[[BrokerRegistration], BrokerRegistration]) -> bool:
        async with self._gate.alone():
            lease, held = self.lease_id, self._held
            if lease is None or held is None or not self.registered:
                return False
            registration = change(self.registration)
            value = registration.encode()
            try:
                result = await self._store.txn(
                    [Compare.value(self._key, held)], [PutOp(self._key, value, lease)]
                )
            except MetadataStoreError as exc:
                _log.warning("could not update the registration: %s", exc)
                return False
            if not result.succeeded:
                _log.warning(
                    "registration of broker %d not rewritten: it is no longer as this process "
                    "wrote it (a newer process of this id, or a new data folder)",
                    self.registration.broker_id,
                )
                return False
            self.registration = registration
            self._held = value
            return True

    async def deregister(self) -> None:
        """Stop keeping the registration and revoke the lease (the key goes at once)."""
        self._stopping = True
        if self._retry_task is not None:
            self._retry_task.cancel()
            await asyncio.gather(self._retry_task, return_exceptions=True)
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            try:
                await keeper.stop(revoke=True)
            except MetadataStoreError as exc:
                _log.warning("could not revoke the registration lease (%s); it will expire", exc)
        _log.info("broker %d deregistered", self.registration.broker_id)

    async def _try_register(self) -> tuple[KeyValue, int] | None:
        """One attempt; when the id is taken, the other holder's key and the store revision at
        which it was read."""
        async with self._gate.alone():
            return await self._try_register_alone()

    async def _try_register_alone(self) -> tuple[KeyValue, int] | None:
        lease = await self._store.grant_lease(self._ttl_s)
        value = self.registration.encode()
        try:
            result = await self._store.txn(
                [Compare.absent(self._key)], [PutOp(self._key, value, lease)], [GetOp(self._key)]
            )
            if not result.succeeded:
                response = result.responses[0]
                holder = response.kvs[0] if isinstance(response, GetResponse) else None
                if holder is not None and not self._is_mine(holder):
                    await self._store.revoke_lease(lease)
                    return holder, result.revision
                # Our own key on a lease presumed lost: take it over with the new lease.
                expected = holder.value if holder is not None else value
                taken = await self._store.txn(
                    [Compare.value(self._key, expected)], [PutOp(self._key, value, lease)]
                )
                if not taken.succeeded:
                    await self._store.revoke_lease(lease)
                    return await self._try_register_alone()
        except BaseException:
            with contextlib.suppress(MetadataStoreError):
                await self._store.revoke_lease(lease)
            raise
        self._held = value
        self._keeper = LeaseKeeper(
            self._store, lease, self._ttl_s, clock=self._clock, on_lost=self._on_lost
        )
        self._keeper.start()
        _log.info(
            "broker %d registered at %s (lease %#x, ttl %d s, incarnation %s)",
            self.registration.broker_id,
            self.registration.url,
            lease,
            self._ttl_s,
            self.registration.incarnation,
        )
        return None

    def _is_mine(self, holder: KeyValue) -> bool:
        try:
            other = BrokerRegistration.decode(holder.value)
        except ValueError:
            return False
        return other.incarnation == self.registration.incarnation

    async def _wait_for_release(self, holder: KeyValue, seen_at: int, timeout_s: float) -> bool:
        """Wait until ``holder``'s key, present at revision ``seen_at``, is deleted; False
        after ``timeout_s``. True also when the watch ends or its revision is compacted
        meanwhile: the next attempt reads the key again."""
        _log.warning(
            "broker id %d is still registered by %s; waiting up to %.0f s for its lease to expire",
            self.registration.broker_id,
            _describe(holder),
            timeout_s,
        )
        watch = self._store.watch_prefix(self._key, seen_at + 1)
        try:
            async with asyncio.timeout(timeout_s), watch:
                async for event in watch:
                    if event.key == holder.key and event.kind is EventKind.DELETE:
                        return True
        except TimeoutError:
            return False
        except RevisionCompactedError:
            return True
        return True  # the watch ended (store closing): let the next attempt find out

    def _on_lost(self, error: LeaseExpiredError) -> None:
        if self._stopping:
            return
        _log.warning(
            "broker %d lost its registration lease (%s); registering again",
            self.registration.broker_id,
            error.message,
        )
        self._retry_task = asyncio.get_running_loop().create_task(self._register_again())

    async def _register_again(self) -> None:
        while not self._stopping:
            try:
                await self.register()
                return
            except (MetadataStoreError, DuplicateBrokerRegistrationError) as exc:
                _log.error("re-registration failed (%s); retrying in %.0f s", exc, _RETRY_S)
                await self._clock.sleep(_RETRY_S)


async def announce_log_dir(
    store: MetadataStore, keyspace: Keyspace, broker_id: int, log_dir_id: str
) -> bool:
    """Write ``log_dir_id`` into the registration of this broker id that a previous process
    left, if it names another data folder (see the module doc); whether it did."""
    key = keyspace.broker(broker_id)
    holder = await store.get(key)
    if holder is None or not log_dir_id or not holder.lease:
        return False
    try:
        previous = BrokerRegistration.decode(holder.value)
    except ValueError:
        return False
    if not previous.log_dir_id or previous.log_dir_id == log_dir_id:
        return False  # the same folder (its logs are there), or a broker older than the ids
    announced = previous.model_copy(update={"log_dir_id": log_dir_id}).encode()
    result = await store.txn(
        [Compare.value(key, holder.value)], [PutOp(key, announced, holder.lease)]
    )
    if result.succeeded:
        _log.warning(
            "broker %d starts on a new data folder %s (was %s): announced on the registration "
            "its previous process left, whose logs are lost",
            broker_id,
            log_dir_id,
            previous.log_dir_id,
        )
    return result.succeeded


def _describe(holder: KeyValue) -> str:
    try:
        other = BrokerRegistration.decode(holder.value)
    except ValueError:
        return f"an unreadable value (lease {holder.lease:#x})"
    return f"{other.url}, incarnation {other.incarnation}, lease {holder.lease:#x}"
