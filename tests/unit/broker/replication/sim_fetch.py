"""The simulated brokers' fetch path: leaders' reads and fetch sessions, on top of the
followers' fetchers (``sim_fetch_follower``).

``FetchPath`` is the whole fetch traffic of a ``Cluster``: the followers' rounds and answers it
inherits from ``FollowerFetching`` (``sim_fetch_follower``, with ``Mode``, ``Fetcher`` and
``FETCH_TIMEOUT_MS``, re-exported here); what a leader does with a fetch is here.

**Leaders** answer epoch queries at once and read partitions by the rules of
``server/fetcher.read_partitions`` (reproduced here: the follower's position reported to the
``LeaderPartition`` first, the per-partition and per-response byte limits, per-partition
errors). A fetch with session fields is served by the rules of
``server/session_fetcher.serve_session_fetch`` — reproduced here too, because its long poll is
asyncio; the decisions are the real pure ones of ``FetchSessionCache``/``LeaderFetchSession``
(``open``, ``wanted``, ``changes``, ``commit``, ``notify``, ``mark``, ``close``): open the
session (70/71 answered with no partition), tell the forgotten partitions' leaders, stamp the
session's fetch time, then read the dirty partitions and answer if the answer holds a byte or
an error, the session was closed, or ``MAX_WAIT_MS`` passed; otherwise the fetch is **parked**
until the session's waiter is woken (``notify`` by an append or a leadership change, ``close``)
— a wake-up is a ``Wake`` message the schedule delivers later — or the clock passes its
deadline. A leader process without session support (``LeaderSessions.supported`` False: an
older version, mixed in by ``Mode.MIXED``) ignores the session fields and answers session id 0.

Checks made on the way (an ``AssertionError`` names the broken rule; the followers' checks are
in ``sim_fetch_follower``): the partitions and positions the leader's session holds after
``open`` are those the follower's session believes it holds (``Fetch.covered``).

``heard`` records, per leader machine and follower, when a fetch last reached the leader from a
follower whose session fetched the partition in that leader epoch; ``sim_invariants`` checks
that no follower counts as caught up through a session later than that.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.unit.broker.replication.sim_fetch_follower import (
    FETCH_TIMEOUT_MS,
    Fetcher,
    FollowerFetching,
    Mode,
)
from tests.unit.broker.replication.sim_network import Envelope, Fetch, FetchReply, Wake
from yak.errors import OffsetOutOfRangeError
from yak.protocol.broker_wire import FetchedPartition, FetchPartition, PartitionError
from yak_broker.replication.delayed_fetch import is_satisfied
from yak_broker.replication.fetch_session_cache import (
    FetchSessionCache,
    FetchSessionError,
    LeaderFetchSession,
)
from yak_broker.replication.fetch_waiter import FetchWaiter
from yak_broker.replication.state.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, SessionClock
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import (
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    EpochAnswer,
    FetchAnswer,
)
from yak_broker.storage.log import FetchIsolation

if TYPE_CHECKING:
    from tests.unit.broker.replication.sim_cluster import Broker, Cluster

__all__ = [
    "FETCH_TIMEOUT_MS",
    "MAX_WAIT_MS",
    "FetchPath",
    "Fetcher",
    "LeaderSessions",
    "Mode",
    "Parked",
]

#: The follower's long poll (``replica.fetch.wait.max.ms``); how long it waits for an answer is
#: ``FETCH_TIMEOUT_MS``.
MAX_WAIT_MS = 500
_LOG_END = FetchIsolation.LOG_END
_Key = tuple[str, int]


@dataclass(eq=False)
class Parked:
    """A session fetch waiting on its leader (``session_fetcher._long_poll``)."""

    fetch: Fetch
    follower: int
    incarnation: int
    session: LeaderFetchSession
    deadline_ms: int
    epoch_answers: tuple[EpochAnswer, ...]
    woken: bool = False
    done: bool = False


class _Wakeup(FetchWaiter):
    """A session's waiter in the simulation: a wake-up queues a ``Wake`` for the parked fetch
    (the real one resolves a future the long poll awaits)."""

    __slots__ = ("_send", "parked")

    def __init__(self, send: Callable[[Parked], None]) -> None:
        super().__init__()
        self._send = send
        self.parked: Parked | None = None

    def arm(self) -> None:  # armed by setting ``parked``
        pass

    def wake(self) -> None:
        parked = self.parked
        if parked is not None and not parked.woken and not parked.done:
            parked.woken = True
            self.wakeups += 1
            self._send(parked)


@dataclass(eq=False)
class LeaderSessions:
    """One broker process's fetch sessions as a leader (lost in a crash)."""

    supported: bool
    cache: FetchSessionCache
    parked: list[Parked] = field(default_factory=list)

    @classmethod
    def new(cls, supported: bool, rng: random.Random) -> LeaderSessions:
        return cls(
            supported,
            FetchSessionCache(
                max_sessions=rng.choice((1, 1000, 1000, 1000)),
                eviction_ms=rng.choice((2_000, 120_000)),
                rng=random.Random(rng.random()),
            ),
        )


class FetchPath(FollowerFetching):
    """The fetch traffic of a ``Cluster`` (see the module doc)."""

    def __init__(self, cluster: Cluster, mode: Mode) -> None:
        super().__init__(cluster, mode)
        self.heard: dict[tuple[LeaderPartition, int], int] = {}

    # --- leaders ---------------------------------------------------------------------------

    def serve(self, leader: Broker, follower: int, incarnation: int, body: Fetch) -> None:
        """The leader's side of offsets-for-leader-epoch and fetch."""
        round_ = body.round
        epoch_answers = []
        for query in round_.epoch_queries():
            machine = leader.replicas[query.partition].leader
            if machine is None:
                epoch_answers.append(
                    EpochAnswer(query.topic, query.partition, error=NOT_LEADER_OR_FOLLOWER)
                )
            else:
                epoch_answers.append(machine.answer_epoch_query(query))
        if not self.sessionless and not round_.has_fetch:
            self._reply(leader, follower, incarnation, FetchReply(body, tuple(epoch_answers), ()))
            return
        if self.sessionless or not leader.leading.supported:
            # A leader without sessions ignores the session fields (an older version).
            if not self.sessionless:
                self.counts["answered by a leader without sessions"] += 1
                if round_.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
                    self.counts["incremental round to a leader without sessions"] += 1
            wanted = [
                FetchPartition(
                    p.topic,
                    p.partition,
                    p.fetch_offset,
                    body.partition_max_bytes,
                    p.current_leader_epoch,
                )
                for p in round_.fetch_positions()
            ]
            self._record_heard(
                leader,
                follower,
                {(p.topic, p.partition): (p.offset, p.current_leader_epoch) for p in wanted},
            )
            read = self._read(leader, follower, incarnation, wanted, body.max_bytes, None)
            reply = FetchReply(body, tuple(epoch_answers), _answers(read))
            self._reply(leader, follower, incarnation, reply)
            return
        self._serve_session(leader, follower, incarnation, body, tuple(epoch_answers))

    def _serve_session(
        self,
        leader: Broker,
        follower: int,
        incarnation: int,
        body: Fetch,
        epoch_answers: tuple[EpochAnswer, ...],
    ) -> None:
        """``session_fetcher.serve_session_fetch``, its long poll parked here."""
        cluster, round_ = self.cluster, body.round
        now = cluster.now()
        named = [
            (p.topic, p.partition, p.fetch_offset, body.partition_max_bytes, p.current_leader_epoch)
            for p in round_.fetch_positions()
        ]
        cache = leader.leading.cache
        try:
            session = cache.open(
                round_.session_id, round_.session_epoch, follower, named, round_.forgotten, now
            )
        except FetchSessionError as exc:
            self.counts[f"session refusal sent {exc.code}"] += 1
            self._reply(
                leader, follower, incarnation, FetchReply(body, epoch_answers, (), 0, exc.code)
            )
            return
        assert session is not None, "a follower's fetch with a session epoch >= 0"
        if not isinstance(session.waiter, _Wakeup):
            session.waiter = _Wakeup(lambda parked: self._wake(leader, parked))
        held = {k: (s.fetch_offset, s.current_leader_epoch) for k, s in session.partitions.items()}
        assert held == body.covered, (
            f"leader {leader.broker_id}'s session {session.session_id} of {follower} holds "
            f"{held}, the follower's believes {body.covered}"
        )
        for _, partition in round_.forgotten:
            machine = leader.replicas[partition].leader
            if machine is not None:
                machine.on_follower_forgotten(follower)
        assert body.covered is not None
        self._record_heard(leader, follower, body.covered)
        session.clock.last_fetch_ms = now
        parked = Parked(body, follower, incarnation, session, now + MAX_WAIT_MS, epoch_answers)
        self._poll(leader, parked)

    def _poll(self, leader: Broker, parked: Parked) -> None:
        """One pass of ``session_fetcher._long_poll``: answer now, or stay parked."""
        session, fetch = parked.session, parked.fetch
        wanted = [FetchPartition(*named) for named in session.wanted()] if session.dirty else []
        read = self._read(
            leader, parked.follower, parked.incarnation, wanted, fetch.max_bytes, session.clock
        )
        full = fetch.round.session_epoch == INITIAL_EPOCH
        answers = read if full else session.changes(read)
        expired = self.cluster.now() >= parked.deadline_ms
        waiter = session.waiter
        assert isinstance(waiter, _Wakeup)
        if not (session.closed or expired or is_satisfied(answers, 1)):
            assert waiter.parked in (None, parked), "two fetches parked on one session"
            waiter.parked = parked
            if parked not in leader.leading.parked:
                leader.leading.parked.append(parked)
            return
        parked.done = True
        waiter.parked = None
        if parked in leader.leading.parked:
            leader.leading.parked.remove(parked)
        if not session.closed:
            replicas, follower = leader.replicas, parked.follower
            session.commit(
                read,
                lambda key: replicas[key[1]].log.log_end_offset,
                lambda key: _in_sync(replicas[key[1]].leader, follower),
            )
        if not full and not answers:
            self.counts["incremental answer empty"] += 1
        reply = FetchReply(fetch, parked.epoch_answers, _answers(answers), session.session_id)
        self._reply(leader, parked.follower, parked.incarnation, reply)

    def _wake(self, leader: Broker, parked: Parked) -> None:
        envelope = Envelope(
            leader.broker_id,
            leader.incarnation,
            leader.broker_id,
            leader.incarnation,
            Wake(parked),
        )
        self.cluster.network.send(envelope)

    def on_wake(self, leader: Broker, body: Wake) -> None:
        parked = body.parked
        if parked.done:
            return
        parked.woken = False
        self.counts["parked fetch woken"] += 1
        self._poll(leader, parked)

    def on_tick(self) -> None:
        """Parked fetches past their deadline answer; rounds unanswered too long are given up."""
        cluster = self.cluster
        now = cluster.now()
        for broker in cluster.brokers.values():
            if broker.alive:
                for parked in list(broker.leading.parked):
                    if now >= parked.deadline_ms and not parked.done:
                        self._poll(broker, parked)
        for broker in cluster.brokers.values():
            if broker.alive:
                for fetcher in broker.fetchers.values():
                    if fetcher.in_flight is not None and now - fetcher.sent_ms >= FETCH_TIMEOUT_MS:
                        self.time_out(broker, fetcher, "timeout")

    def evict(self, broker_id: int, rng: random.Random) -> None:
        """One of the leader's sessions is evicted (LRU under pressure, or expired)."""
        broker = self.cluster.brokers[broker_id]
        sessions = list(broker.leading.cache)
        if broker.alive and sessions:
            session = rng.choice(sessions)
            broker.leading.cache.close(session.session_id)
            self.counts["session evicted"] += 1
            self.cluster.note(f"{broker_id} evicts the session of {session.replica_id}")

    def _record_heard(
        self, leader: Broker, follower: int, covered: dict[_Key, tuple[int, int]] | None
    ) -> None:
        now = self.cluster.now()
        for (_, partition), (_, epoch) in (covered or {}).items():
            machine = leader.replicas[partition].leader
            if machine is not None and machine.leader_epoch == epoch:
                self.heard[(machine, follower)] = now

    def _read(
        self,
        leader: Broker,
        follower: int,
        incarnation: int,
        wanted: Sequence[FetchPartition],
        max_bytes: int,
        session: SessionClock | None,
    ) -> list[FetchedPartition]:
        """``fetcher.read_partitions`` for a follower (see the module doc); the fetch carries
        the data folder of the follower process that sent it, and may add it to the ISR only
        if that is the folder its broker's registration names (``ReplicaManager``)."""
        cluster = self.cluster
        log_dir = cluster.log_dir_of(follower, incarnation)
        eligible = cluster.registered.get(follower) == log_dir
        remaining = max_bytes
        result = []
        for want in wanted:
            topic, partition = want.topic, want.partition
            replica = leader.replicas[partition]
            machine = replica.leader
            error = (
                NOT_LEADER_OR_FOLLOWER
                if machine is None
                else machine.check_fetch_epoch(want.current_leader_epoch)
            )
            if machine is None or error is not None:
                assert error is not None
                result.append(FetchedPartition(topic, partition, error=PartitionError(error, "")))
                continue
            outputs = machine.on_follower_fetch(
                follower,
                want.offset,
                cluster.now(),
                session,
                log_dir_id=log_dir,
                eligible=eligible,
            )
            cluster.carry_out(leader, replica, outputs)
            log = replica.log
            records = b""
            hw, start = log.high_watermark, log.log_start_offset
            if remaining > 0:
                limit = min(want.max_bytes, remaining)
                try:
                    data = log.read(want.offset, limit, _LOG_END)
                except OffsetOutOfRangeError:
                    hw, start = log.high_watermark, log.log_start_offset
                    error_ = PartitionError(OFFSET_OUT_OF_RANGE, "")
                    result.append(FetchedPartition(topic, partition, hw, hw, start, error=error_))
                    continue
                hw, start = data.high_watermark, data.log_start_offset
                if len(data.records) <= limit or remaining == max_bytes:
                    records = bytes(data.records)
                    remaining -= len(records)
            result.append(FetchedPartition(topic, partition, hw, hw, start, records))
        return result

    def _reply(self, leader: Broker, follower: int, incarnation: int, reply: FetchReply) -> None:
        self.cluster.send(leader, follower, incarnation, reply)


def _in_sync(machine: LeaderPartition | None, follower: int) -> bool:
    """``session_fetcher._in_sync``."""
    return machine is None or (follower in machine.isr and machine.pending is None)


def _answers(read: Sequence[FetchedPartition]) -> tuple[FetchAnswer, ...]:
    """What the follower's driver makes of a fetch response."""
    return tuple(
        FetchAnswer(
            f.topic,
            f.partition,
            f.high_watermark,
            f.log_start_offset,
            f.records,
            f.error.code if f.error is not None else None,
        )
        for f in read
    )
