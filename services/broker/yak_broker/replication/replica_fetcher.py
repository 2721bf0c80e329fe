"""Followers pull from leaders: one long-poll fetch session per leader broker (Kafka's
``ReplicaFetcherThread``/``ReplicaFetcherManager``), as asyncio tasks.

The protocol lives in the pure ``replication.FetchSession`` (which partitions to ask for, from
which offset, what to truncate, how to apply an answer); this module only does the I/O around
it. One ``ReplicaFetcher`` per leader broker loops:

1. ``session.next_round()`` → epoch queries (partitions that must find their divergence point
   first) and, in the leader's incremental fetch session (KIP-227), the fetch positions that
   changed since the last round — none when idle — or every one in a full round;
2. ``POST /v1/offsets-for-leader-epoch`` for the queries, then ``session.on_epoch_answers``;
3. a Fetch with this broker's id as ``replica_id`` (a long poll: ``min_bytes`` 1,
   ``max_wait_ms`` 500) and the session fields, on the leader's internal listener (Kafka
   framing, one persistent connection; HTTP ``POST /v1/fetch`` for a leader without one,
   sessionless), then ``session.on_session_response`` (a refused session: a full round next)
   and ``session.on_fetch_answers`` — the session appends the batches to the follower logs and
   moves their high watermarks; the leader answers only partitions with something new;
4. on a network error, start the session over and back off ``fetch_backoff_ms`` (woken early
   by a change of the session); an answer of errors only backs off too, keeping the session.

While the data folder is offline (``storage.log_dir_failure``: a follower append met a full
disk, or an append as leader did) it fetches nothing, its session dropped, until the folder is
back; then it starts over with a full round, and the divergence check of each partition.

With nothing to fetch it sleeps on an event set by ``add``/``remove``. A partition added while a
long poll is in flight joins the next request (at most ``max_wait_ms`` later). The leader's URL
comes from the metadata snapshot on each round, so a restarted leader on a new port is found
(it knows no session: it answers ``FETCH_SESSION_ID_NOT_FOUND``, or the connection broke).

Single event loop: the session is only touched from this loop, between awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.metadata.snapshot import ClusterSnapshot
from yak.protocol.broker_models import OffsetForLeaderEpoch
from yak.protocol.broker_wire import FetchPartition, FetchRequest
from yak.types import TopicPartition
from yak_broker.replication.state.fetch_session import FetchRound, FetchSession
from yak_broker.replication.state.follower_partition import FollowerPartition
from yak_broker.replication.state.messages import EpochAnswer, FetchAnswer
from yak_broker.storage.log_dir_failure import LogDirFailureChannel

__all__ = ["ReplicaFetcher", "ReplicaFetcherManager"]

_log = logging.getLogger(__name__)

Now = Callable[[], int]
#: Told of the record bytes fetched for a topic (the replication bytes-in metric).
FetchedBytes = Callable[[str, int], None]


class ReplicaFetcher:
    """The fetch session of this broker with one leader broker, and the task driving it."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        snapshot: Callable[[], ClusterSnapshot],
        now_ms: Now,
        *,
        max_wait_ms: int,
        max_bytes: int,
        backoff_ms: int,
        on_fetched: FetchedBytes | None = None,
        log_dir_id: str = "",
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._failures = failures if failures is not None else LogDirFailureChannel()
        #: This broker's data folder id, sent with every fetch (the leader's ISR needs it).
        self.log_dir_id = log_dir_id
        self._on_fetched = on_fetched
        self.leader_id = leader_id
        self.session = FetchSession()
        self._snapshot = snapshot
        self._now_ms = now_ms
        self._max_wait_ms = max_wait_ms
        self._max_bytes = max_bytes
        self._backoff_s = backoff_ms / 1000
        self._changed = asyncio.Event()
        self._client: BrokerClient | None = None
        self._client_url = ""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def add(self, partition: FollowerPartition) -> None:
        self.session.add(partition)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.session.remove(tp.topic, tp.partition)
        self._changed.set()

    def wake(self) -> None:
        self._changed.set()

    def __len__(self) -> int:
        return len(self.session)

    async def _leader_client(self) -> BrokerClient | None:
        registration = self._snapshot().brokers.get(self.leader_id)
        if registration is None:
            return None
        url = f"{registration.url}#{registration.data_port}"
        if self._client is None or self._client_url != url:
            if self._client is not None:
                await self._client.aclose()
            # Generous timeout: a long poll lasts up to max_wait_ms by design.
            self._client = BrokerClient(
                registration.url,
                timeout_s=self._max_wait_ms / 1000 + 10,
                data_port=registration.data_port,
            )
            self._client_url = url
        return self._client

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            client = await self._leader_client()
            if client is None:
                # The leader is not registered (yet, or any more): its session is gone. Build
                # no round until it is back — a full round names every partition, and metadata
                # changes wake this loop by the thousand while a broker restarts.
                self.session.on_error()
                await self._changed.wait()
                continue
            if self._failures.offline:
                # The data folder failed: follow nothing until the probe finds it usable again
                # (the manager wakes this loop then); the leader's session is dropped.
                self.session.on_error()
                await self._changed.wait()
                continue
            round_ = self.session.next_round()
            if not round_:  # nothing to ask
                await self._changed.wait()
                continue
            try:
                await self._exchange(client, round_)
            except _EveryPartitionFailedError as exc:
                _log.info("fetch from broker %d: %s; backing off", self.leader_id, exc)
                await self._back_off()
            except OSError as exc:  # a follower append failed: maybe the folder (a full disk)
                self.session.on_error()
                error = self._failures.fail(exc, f"a follower append from {self.leader_id}")
                _log.warning("fetch from broker %d: %s; backing off", self.leader_id, error)
                await self._back_off()
            except YakError as exc:
                self.session.on_error()
                _log.info("fetch from broker %d failed: %s; backing off", self.leader_id, exc)
                await self._back_off()

    async def _back_off(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), self._backoff_s)

    async def _exchange(self, client: BrokerClient, round_: FetchRound) -> None:
        queries = round_.epoch_queries()
        if queries:
            answers = await client.offsets_for_leader_epoch(
                [
                    OffsetForLeaderEpoch(
                        topic=q.topic,
                        partition=q.partition,
                        current_leader_epoch=q.current_leader_epoch,
                        leader_epoch=q.leader_epoch,
                    )
                    for q in queries
                ],
                replica_id=self.broker_id,
            )
            self.session.on_epoch_answers(
                round_,
                (
                    EpochAnswer(
                        a.topic,
                        a.partition,
                        a.leader_epoch,
                        a.end_offset,
                        a.error.code if a.error is not None else None,
                    )
                    for a in answers
                ),
            )
        if not round_.has_fetch:
            return
        request = FetchRequest(
            tuple(
                FetchPartition(
                    p.topic, p.partition, p.fetch_offset, self._max_bytes, p.current_leader_epoch
                )
                for p in round_.fetch_positions()
            ),
            max_wait_ms=self._max_wait_ms,
            min_bytes=1,
            max_bytes=self._max_bytes,
            replica_id=self.broker_id,
            replica_log_dir_id=self.log_dir_id,
            session_id=round_.session_id,
            session_epoch=round_.session_epoch,
            forgotten=tuple(round_.forgotten),
        )
        response = await client.fetch_session(request)
        self.session.on_session_response(round_, response.session_id, response.error_code)
        if response.error_code:
            _log.info(
                "broker %d refused fetch session %d (error %d): a full fetch next",
                self.leader_id,
                round_.session_id,
                response.error_code,
            )
            return
        fetched = response.partitions
        if self._on_fetched is not None:
            for f in fetched:
                self._on_fetched(f.topic, len(memoryview(f.records)))
        failed = [f for f in fetched if f.error is not None]
        self.session.on_fetch_answers(
            round_,
            (
                FetchAnswer(
                    f.topic,
                    f.partition,
                    f.high_watermark,
                    f.log_start_offset,
                    f.records,
                    f.error.code if f.error is not None else None,
                )
                for f in fetched
            ),
        )
        if failed and len(failed) == len(fetched):
            # Nothing moved: do not spin on an error the leader answers at once.
            raise _EveryPartitionFailedError(
                f"every partition failed: {failed[0].error.code if failed[0].error else ''}"
            )


class _EveryPartitionFailedError(Exception):
    """A fetch answered only errors (the session stays: the leader answered it)."""


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader broker it follows partitions of."""

    def __init__(
        self,
        broker_id: int,
        snapshot: Callable[[], ClusterSnapshot],
        now_ms: Now,
        *,
        max_wait_ms: int = 500,
        max_bytes: int = 10 * 1024 * 1024,
        backoff_ms: int = 1000,
        on_progress: Callable[[TopicPartition], None] | None = None,
        on_fetched: FetchedBytes | None = None,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        del on_progress  # reserved: followers serve no consumers yet
        self._broker_id = broker_id
        #: This broker's data folder id (set by the broker before any replica is followed).
        self.log_dir_id = ""
        self._snapshot = snapshot
        self._now_ms = now_ms
        self._options = {
            "max_wait_ms": max_wait_ms,
            "max_bytes": max_bytes,
            "backoff_ms": backoff_ms,
        }
        self._on_fetched = on_fetched
        self._failures = failures if failures is not None else LogDirFailureChannel()
        self._failures.subscribe(lambda _offline: self.metadata_changed())
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def follow(self, tp: TopicPartition, leader_id: int, partition: FollowerPartition) -> None:
        """Fetch ``tp`` from ``leader_id`` with ``partition``'s state machine (replacing any)."""
        self.unfollow(tp)
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self._broker_id,
                leader_id,
                self._snapshot,
                self._now_ms,
                on_fetched=self._on_fetched,
                log_dir_id=self.log_dir_id,
                failures=self._failures,
                **self._options,
            )
            self._fetchers[leader_id] = fetcher
            fetcher.start()
        fetcher.add(partition)
        self._leader_of[tp] = leader_id

    def unfollow(self, tp: TopicPartition) -> None:
        leader_id = self._leader_of.pop(tp, None)
        if leader_id is None:
            return
        fetcher = self._fetchers[leader_id]
        fetcher.remove(tp)
        # An idle fetcher costs nothing (it waits on its event); it is reused later.

    def metadata_changed(self) -> None:
        """Metadata changed (a leader may be back, or on a new address): wake every fetcher."""
        for fetcher in self._fetchers.values():
            fetcher.wake()

    async def stop(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._leader_of.clear()
        for fetcher in fetchers:
            await fetcher.stop()
