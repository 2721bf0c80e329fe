"""``FetchSession``: the partitions one follower broker fetches from one leader broker.

Kafka batches all partitions a follower replicates from one leader into one fetch request per
round (a fetch session); so does this. A round holds the epoch queries of the partitions still
truncating and the fetch positions of those fetching, each remembered with the machine that
asked. ``on_epoch_answers`` / ``on_fetch_answers`` apply the answers of that round to the same
machines — an answer for a partition removed or replaced (a new leader epoch) since the round
was built is dropped, so a stale answer never touches a newer machine's log.

Two ways to build a round:

- ``build()`` — sessionless: every partition, every round (the simulation's rounds, several
  may be in flight);
- ``next_round()`` — Kafka's incremental fetch session (KIP-227, the follower's half of
  ``fetch_session_cache``; one round in flight at a time). The first round is **full**
  (``session_epoch`` 0: every fetching partition); the leader answers with a ``session_id``.
  Then each round is **incremental** (that id, the next epoch) and names only the partitions
  whose position changed — a partition added, re-created, moved by an append or a truncation,
  or answered with an error — and ``forgotten`` those that stopped fetching; an idle round
  names none. The leader answers only partitions with something new; an answer for a
  partition the round did not name is applied at the position the leader holds for it (the
  last one named). ``on_session_response`` moves the epoch on, or starts over with a full
  round after the leader refused the session (``FETCH_SESSION_ID_NOT_FOUND``,
  ``INVALID_FETCH_SESSION_EPOCH``) or answered none (``session_id`` 0, to a full or an
  incremental round: it keeps no session for us, so every round is full); ``on_error`` (no
  answer: a lost connection, a timeout) starts over too, closing the old session on the leader.

Which partitions changed is known without a scan: ``add``/``remove`` and every applied answer
mark their partition dirty, and only dirty ones are looked at (plus those truncating, which
ask an epoch query each round until they fetch).

Owns only the map partition → current ``FollowerPartition`` and the session state; the
machines own their logs. Pure and synchronous; the driver (``replica_fetcher``) does the I/O
between building a round and applying its answers. Crash: nothing persists; a restarted
broker builds new sessions (full) and machines. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from yak_broker.replication.state.fetch_metadata import (
    FETCH_SESSION_ID_NOT_FOUND,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    next_epoch,
)
from yak_broker.replication.state.follower_partition import FollowerPartition
from yak_broker.replication.state.messages import (
    EpochAnswer,
    EpochQuery,
    FetchAnswer,
    FetchPosition,
)

__all__ = ["FetchRound", "FetchSession"]

_Key = tuple[str, int]
_Asked = tuple[FollowerPartition, FetchPosition]


@dataclass(slots=True)
class FetchRound:
    """One round's requests, each with the machine that made it, and its session fields."""

    queries: dict[_Key, tuple[FollowerPartition, EpochQuery]] = field(default_factory=dict)
    positions: dict[_Key, _Asked] = field(default_factory=dict)
    session_id: int = 0
    session_epoch: int = FINAL_EPOCH
    forgotten: list[_Key] = field(default_factory=list)
    #: Whether the leader holds partitions for this round that it does not name (an
    #: incremental round of a session with partitions): it must be sent even if empty.
    session_fetching: bool = False

    def epoch_queries(self) -> list[EpochQuery]:
        return [query for _, query in self.queries.values()]

    def fetch_positions(self) -> list[FetchPosition]:
        return [position for _, position in self.positions.values()]

    @property
    def has_fetch(self) -> bool:
        """Whether the round has a fetch to send (positions, forgotten, or a long poll)."""
        return bool(self.positions or self.forgotten or self.session_fetching)

    def __bool__(self) -> bool:
        return bool(self.queries) or self.has_fetch


class FetchSession:
    """See the module doc."""

    def __init__(self) -> None:
        self._partitions: dict[_Key, FollowerPartition] = {}
        #: The leader's session: its id, the epoch of our next request (0: a full round).
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        #: What the leader's session holds: per partition, the machine and position named.
        self._sent: dict[_Key, _Asked] = {}
        self._dirty: dict[_Key, None] = {}
        self._truncating: set[_Key] = set()

    def __len__(self) -> int:
        return len(self._partitions)

    def __contains__(self, key: object) -> bool:
        return key in self._partitions

    def add(self, partition: FollowerPartition) -> None:
        """Fetch ``partition`` in this session (replacing the machine of an older epoch)."""
        key = (partition.topic, partition.partition)
        self._partitions[key] = partition
        self._dirty[key] = None

    def remove(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        if self._partitions.pop(key, None) is not None:
            self._dirty[key] = None

    def build(self) -> FetchRound:
        """A sessionless round: every partition's request (see the module doc)."""
        round_ = FetchRound()
        for key, machine in self._partitions.items():
            request = machine.next_request()
            if isinstance(request, EpochQuery):
                round_.queries[key] = (machine, request)
            elif isinstance(request, FetchPosition):
                round_.positions[key] = (machine, request)
        return round_

    # --- the incremental session -----------------------------------------------------------

    def next_round(self) -> FetchRound:
        """The next round of the session: full or incremental (see the module doc)."""
        if self.epoch == INITIAL_EPOCH:
            round_ = self.build()
            self._sent = dict(round_.positions)
            self._truncating = set(round_.queries)
            self._dirty.clear()
            round_.session_id, round_.session_epoch = self.session_id, INITIAL_EPOCH
            return round_
        round_ = FetchRound(session_id=self.session_id, session_epoch=self.epoch)
        sent = self._sent
        for key in self._dirty:
            machine = self._partitions.get(key)
            request = machine.next_request() if machine is not None else None
            if isinstance(request, FetchPosition):
                assert machine is not None
                self._truncating.discard(key)
                asked = sent.get(key)
                if (
                    asked is None
                    or asked[0] is not machine
                    or asked[1] != request
                    or machine.last_error is not None
                ):
                    sent[key] = round_.positions[key] = (machine, request)
                continue
            if isinstance(request, EpochQuery):
                self._truncating.add(key)
            else:
                self._truncating.discard(key)
            if sent.pop(key, None) is not None:
                round_.forgotten.append(key)
        self._dirty.clear()
        for key in self._truncating:
            machine = self._partitions[key]
            request = machine.next_request()
            if isinstance(request, EpochQuery):
                round_.queries[key] = (machine, request)
            else:  # answered meanwhile: looked at again next round
                self._dirty[key] = None
        round_.session_fetching = bool(sent)
        return round_

    def on_session_response(self, round_: FetchRound, session_id: int, error_code: int) -> None:
        """The leader answered ``round_``'s fetch with ``session_id`` / a request error."""
        if error_code in (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
            self._start_over(0)
        elif round_.session_epoch == INITIAL_EPOCH:
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == 0 else next_epoch(INITIAL_EPOCH)
        elif error_code == 0 and session_id == 0:
            # An incremental round answered sessionless: the leader keeps no session for us
            # any more (restarted as an older version) and reads only what a round names.
            self._start_over(0)
        elif error_code == 0:
            self.epoch = next_epoch(round_.session_epoch)

    def on_error(self) -> None:
        """The round got no answer: start over with a full round that closes the session."""
        self._start_over(self.session_id)

    def _start_over(self, session_id: int) -> None:
        self.session_id, self.epoch = session_id, INITIAL_EPOCH
        self._sent.clear()

    # --- answers ---------------------------------------------------------------------------

    def _current(self, key: _Key, machine: FollowerPartition) -> bool:
        return self._partitions.get(key) is machine

    def on_epoch_answers(self, round_: FetchRound, answers: Iterable[EpochAnswer]) -> None:
        for answer in answers:
            key = (answer.topic, answer.partition)
            asked = round_.queries.get(key)
            if asked is not None and self._current(key, asked[0]):
                asked[0].on_epoch_answer(answer)
                self._dirty[key] = None

    def on_fetch_answers(self, round_: FetchRound, answers: Iterable[FetchAnswer]) -> int:
        """Apply a fetch response; the record bytes appended in all."""
        appended = 0
        for answer in answers:
            key = (answer.topic, answer.partition)
            asked = round_.positions.get(key) or self._sent.get(key)
            if asked is not None and self._current(key, asked[0]):
                appended += asked[0].on_fetch_answer(asked[1], answer)
                self._dirty[key] = None
        return appended
