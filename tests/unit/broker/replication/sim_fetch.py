"""The simulated brokers' fetch path: followers' fetchers, leaders' reads and fetch sessions.

**Followers** (``Fetcher``, one per follower broker and leader broker, as ``ReplicaFetcher``):
in ``Mode.SESSIONLESS`` a round is ``FetchSession.build()`` — every partition, every round, any
number in flight (the sessionless path kept for the simulation). Otherwise a round is
``FetchSession.next_round()`` (KIP-227): one round in flight, matched to its answer as the
connection's correlation id does (a late answer to a round given up is dropped); a round not
answered within ``FETCH_TIMEOUT_MS``, or whose connection broke (``time_out``), is given up with
``FetchSession.on_error``; a session answer goes through ``on_session_response`` before the
partitions are applied, as ``replica_fetcher._exchange`` does.

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

Checks made on the way (an ``AssertionError`` names the broken rule):

- the partitions and positions the leader's session holds after ``open`` are those the
  follower's session believes it holds (``Fetch.covered``);
- an answer is applied only to the round in flight, in the session epoch it was sent in (a
  stale answer from an older session epoch is never applied);
- an incremental answer carries only partitions with records or a high watermark, log start or
  error other than last answered in the session (so an idle round answers nothing);
- after a refusal (70/71) or a round given up, the next round with a fetch is full.

``heard`` records, per leader machine and follower, when a fetch last reached the leader from a
follower whose session fetched the partition in that leader epoch; ``sim_invariants`` checks
that no follower counts as caught up through a session later than that.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.unit.broker.replication.sim_network import Envelope, Fetch, FetchReply, Wake
from yak.errors import OffsetOutOfRangeError
from yak.protocol.broker_wire import FetchedPartition, FetchPartition, PartitionError
from yak_broker.replication.delayed_fetch import is_satisfied
from yak_broker.replication.fetch_session import FetchRound, FetchSession
from yak_broker.replication.fetch_session_cache import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    FetchSessionError,
    LeaderFetchSession,
    SessionClock,
)
from yak_broker.replication.fetch_waiter import FetchWaiter
from yak_broker.replication.leader_partition import LeaderPartition
from yak_broker.replication.messages import (
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

#: The follower's long poll (``replica.fetch.wait.max.ms``) and how long it waits for an answer.
MAX_WAIT_MS = 500
FETCH_TIMEOUT_MS = 2_000
_LOG_END = FetchIsolation.LOG_END
_Key = tuple[str, int]


class Mode(enum.Enum):
    """How followers fetch in one simulated run."""

    #: ``build()`` rounds, several in flight, leaders serve them sessionless.
    SESSIONLESS = "sessionless"
    #: ``next_round()``; every leader process keeps fetch sessions.
    SESSIONS = "sessions"
    #: ``next_round()``; each broker process keeps sessions or not (a rolling upgrade).
    MIXED = "mixed"


@dataclass(eq=False)
class Fetcher:
    """A follower broker's fetcher for one leader broker."""

    leader_id: int
    session: FetchSession = field(default_factory=FetchSession)
    in_flight: FetchRound | None = None
    sent_ms: int = 0
    #: Per partition what the leader's session last answered: HW, log start, error.
    told: dict[_Key, tuple[int, int, str | None]] = field(default_factory=dict)
    #: Refused (70/71) or given up: the next round with a fetch must be full.
    must_be_full: bool = False


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


class FetchPath:
    """The fetch traffic of a ``Cluster`` (see the module doc)."""

    def __init__(self, cluster: Cluster, mode: Mode) -> None:
        self.cluster = cluster
        self.mode = mode
        self.counts: Counter[str] = Counter()
        self.heard: dict[tuple[LeaderPartition, int], int] = {}

    @property
    def sessionless(self) -> bool:
        return self.mode is Mode.SESSIONLESS

    # --- followers -------------------------------------------------------------------------

    def fetch_rounds(self) -> list[tuple[int, int]]:
        """The fetchers that may send a round now (with sessions: none in flight)."""
        return [
            (broker.broker_id, leader_id)
            for broker in self.cluster.brokers.values()
            if broker.alive
            for leader_id, fetcher in broker.fetchers.items()
            if len(fetcher.session) and fetcher.in_flight is None
        ]

    def fetch_round(self, broker_id: int, leader_id: int) -> bool:
        """``broker_id``'s fetcher for ``leader_id`` sends a round; False if it had nothing."""
        cluster = self.cluster
        broker = cluster.brokers[broker_id]
        fetcher = broker.fetchers.get(leader_id)
        if not broker.alive or fetcher is None or fetcher.in_flight is not None:
            return False
        session = fetcher.session
        round_ = session.build() if self.sessionless else session.next_round()
        if not round_:
            return False
        if self.sessionless:
            covered = {
                key: (p.fetch_offset, p.current_leader_epoch)
                for key, (_, p) in round_.positions.items()
            }
        else:
            fetcher.in_flight, fetcher.sent_ms = round_, cluster.now()
            covered = {
                key: (p.fetch_offset, p.current_leader_epoch)
                for key, (_, p) in session._sent.items()
            }
            if round_.has_fetch:
                if fetcher.must_be_full:
                    assert round_.session_epoch == INITIAL_EPOCH, (
                        f"{broker_id}'s first round to {leader_id} after a refusal or no answer "
                        f"is incremental (session {round_.session_id}/{round_.session_epoch})"
                    )
                    fetcher.must_be_full = False
                    self.counts["full round after refusal or no answer"] += 1
                if round_.session_epoch != INITIAL_EPOCH and not (
                    round_.positions or round_.forgotten
                ):
                    self.counts["idle round"] += 1
        rng = cluster.rng
        fetch = Fetch(
            fetcher, round_, rng.choice((150, 400, 1 << 20)), rng.choice((150, 1 << 20)), covered
        )
        leader = cluster.brokers[leader_id]
        cluster.send(broker, leader_id, leader.incarnation, fetch)
        return True

    def time_out(self, broker: Broker, fetcher: Fetcher, why: str) -> None:
        """The round in flight gets no answer (timeout, broken connection): start over."""
        round_ = fetcher.in_flight
        assert round_ is not None
        fetcher.in_flight = None
        if round_.has_fetch:
            fetcher.session.on_error()
            fetcher.must_be_full = True
        self.counts[f"round given up: {why}"] += 1
        self.cluster.note(f"{broker.broker_id} gives up its round to {fetcher.leader_id} ({why})")

    def time_out_lost_rounds(self) -> None:
        """Rounds whose request and answer are both gone (lost, or their leader crashed) are
        given up at once, as a broken connection is noticed."""
        cluster = self.cluster
        pending: set[int] = set()
        for envelope in cluster.network.queue:
            body = envelope.body
            if isinstance(body, Fetch | FetchReply):
                pending.add(id(body.round))
            elif isinstance(body, Wake):
                pending.add(id(body.parked.fetch.round))
        for broker in cluster.brokers.values():
            if broker.alive:
                pending.update(id(parked.fetch.round) for parked in broker.leading.parked)
        for broker in cluster.brokers.values():
            if not broker.alive:
                continue
            for fetcher in broker.fetchers.values():
                if fetcher.in_flight is not None and id(fetcher.in_flight) not in pending:
                    self.time_out(broker, fetcher, "connection lost")

    def on_reply(self, broker: Broker, body: FetchReply) -> None:
        fetcher = body.fetch.fetcher
        round_ = body.round
        if broker.fetchers.get(fetcher.leader_id) is not fetcher:
            return
        session = fetcher.session
        if not self.sessionless:
            if fetcher.in_flight is not round_:
                self.counts["late answer dropped"] += 1
                return
            fetcher.in_flight = None
            self._check_current(broker, fetcher, body)
        touched = {q.partition for q in round_.epoch_queries()}
        touched |= {a.partition for a in body.fetch_answers}
        ends = {p: broker.replicas[p].log.log_end_offset for p in touched}
        session.on_epoch_answers(round_, body.epoch_answers)
        if not self.sessionless and round_.has_fetch:
            session.on_session_response(round_, body.session_id, body.error_code)
            if body.error_code:
                fetcher.must_be_full = True
                self.counts[f"session refused {body.error_code}"] += 1
            else:
                self._check_changes_only(broker, fetcher, body)
        if not body.error_code:
            session.on_fetch_answers(round_, body.fetch_answers)
        for p in touched:
            replica = broker.replicas[p]
            replica.version += 1
            if replica.log.log_end_offset < ends[p]:
                self.cluster.note(
                    f"truncate p{p} on {broker.broker_id}: {ends[p]} -> {replica.log}"
                )

    def _check_current(self, broker: Broker, fetcher: Fetcher, body: FetchReply) -> None:
        """The answer is for the session epoch the follower's session is at (never stale)."""
        round_, session = body.round, fetcher.session
        if not round_.has_fetch:
            return
        where = f"{broker.broker_id}'s answer from {fetcher.leader_id}"
        sent = (round_.session_id, round_.session_epoch)
        if round_.session_epoch == INITIAL_EPOCH:
            assert (session.session_id, session.epoch) == sent, (
                f"{where}: full round {sent} but the session is at "
                f"{(session.session_id, session.epoch)}"
            )
        else:
            assert (session.session_id, session.epoch) == sent, (
                f"{where}: stale answer of session epoch {sent}, the session is at "
                f"{(session.session_id, session.epoch)}"
            )
            if not body.error_code and body.session_id:
                assert body.session_id == round_.session_id, f"{where}: another session"

    def _check_changes_only(self, broker: Broker, fetcher: Fetcher, body: FetchReply) -> None:
        """An incremental answer carries only what changed since the session last answered."""
        round_, told = body.round, fetcher.told
        if round_.session_epoch == INITIAL_EPOCH or not body.session_id:
            told.clear()
        else:
            for key in round_.forgotten:
                told.pop(key, None)
            for answer in body.fetch_answers:
                key = (answer.topic, answer.partition)
                last = told.get(key)
                now = (answer.high_watermark, answer.log_start_offset, answer.error)
                assert len(memoryview(answer.records)) or last != now, (
                    f"{broker.broker_id}: leader {fetcher.leader_id} answered p{answer.partition}"
                    f" unchanged {now} in incremental session {round_.session_id}"
                )
            if not (round_.positions or round_.forgotten or body.fetch_answers):
                self.counts["idle round answered nothing"] += 1
        for answer in body.fetch_answers:
            told[(answer.topic, answer.partition)] = (
                answer.high_watermark,
                answer.log_start_offset,
                answer.error,
            )

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
