"""The simulated followers' side of the fetch path: their fetchers' rounds and answers.

Apart from ``sim_fetch`` (the leaders' side, which ``FetchPath`` adds to this class) because a
follower's rounds and a leader's serving share nothing but the messages between them.

**Followers** (``Fetcher``, one per follower broker and leader broker, as ``ReplicaFetcher``):
in ``Mode.SESSIONLESS`` a round is ``FetchSession.build()`` — every partition, every round, any
number in flight (the sessionless path kept for the simulation). Otherwise a round is
``FetchSession.next_round()`` (KIP-227): one round in flight, matched to its answer as the
connection's correlation id does (a late answer to a round given up is dropped); a round not
answered within ``FETCH_TIMEOUT_MS``, or whose connection broke (``time_out``), is given up with
``FetchSession.on_error``; a session answer goes through ``on_session_response`` before the
partitions are applied, as ``replica_fetcher._exchange`` does.

Checks made on the way (an ``AssertionError`` names the broken rule):

- an answer is applied only to the round in flight, in the session epoch it was sent in (a
  stale answer from an older session epoch is never applied);
- an incremental answer carries only partitions with records or a high watermark, log start or
  error other than last answered in the session (so an idle round answers nothing);
- after a refusal (70/71) or a round given up, the next round with a fetch is full.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.unit.broker.replication.sim_network import Fetch, FetchReply, Wake
from yak_broker.replication.state.fetch_metadata import INITIAL_EPOCH
from yak_broker.replication.state.fetch_session import FetchRound, FetchSession

if TYPE_CHECKING:
    from tests.unit.broker.replication.sim_cluster import Broker, Cluster

__all__ = ["FETCH_TIMEOUT_MS", "Fetcher", "FollowerFetching", "Mode"]

#: How long a follower waits for the answer to a round before it gives the round up.
FETCH_TIMEOUT_MS = 2_000
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


class FollowerFetching:
    """The followers' fetch traffic of a ``Cluster`` (see the module doc)."""

    def __init__(self, cluster: Cluster, mode: Mode) -> None:
        self.cluster = cluster
        self.mode = mode
        self.counts: Counter[str] = Counter()

    @property
    def sessionless(self) -> bool:
        return self.mode is Mode.SESSIONLESS

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
