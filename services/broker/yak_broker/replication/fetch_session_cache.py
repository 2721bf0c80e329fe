"""``FetchSessionCache``: the leader's incremental fetch sessions (Kafka's KIP-227).

A follower broker fetches every partition it follows from one leader in one request per round.
Without a session each round names every partition and the leader reads every one of them,
twice a second with nothing to replicate. With one, the leader remembers what the follower
fetches (``LeaderFetchSession``: per partition its fetch offset, max bytes and leader epoch,
and what the follower was last told: high watermark, log start offset, error) and:

- a **full** fetch (``session_epoch`` 0) names every partition and creates a session (a random
  ``session_id`` > 0, answered in the response); the next request must carry epoch 1;
- an **incremental** fetch (``session_id``, ``session_epoch`` = the expected epoch, then + 1,
  wrapping to 1 after ``2**31 - 1``) names only partitions whose fetch position changed or that
  are new, and ``forgotten`` those no longer fetched — an idle round names nothing;
- the leader reads only the session's **dirty** partitions: those just named, those an append,
  a moved high watermark, a leadership change or a deletion touched since they were last
  answered (``notify``/``mark``), those the response's byte limit cut off, and those that
  failed, and those whose follower is outside the ISR or may be leaving it (``commit``'s
  ``in_sync``: its position reaches the ``LeaderPartition`` every round until it is back, as
  an expansion is proposed only on a read with no other ISR change in flight — a caught-up
  follower on a quiet partition would otherwise never be read again); it answers only what
  changed (records, high watermark, log start offset, error);
- errors, at the request level (``FetchSessionError``): an unknown ``session_id`` (the leader
  restarted, or evicted it) is ``FETCH_SESSION_ID_NOT_FOUND`` (70), another epoch than expected
  (a lost or reordered request) ``INVALID_FETCH_SESSION_EPOCH`` (71); the follower then starts
  again with a full fetch. ``session_epoch`` -1 is a sessionless fetch (consumers; it closes
  ``session_id`` if one is given, as does a full fetch that names one).

Sessions are created for followers only (``replica_id`` >= 0; a consumer asking for one is
answered sessionless, ``session_id`` 0, as Kafka does when its cache is full), one per
follower broker — a new full fetch of the same replica replaces its older session — at most
``max_sessions``, the least recently used evicted first, and an unused session expires after
``eviction_ms``.

Follower progress between rounds: a partition the session does not read is one whose follower
position did not move and to which nothing was appended; the leader still counts its follower
as fetching (``SessionClock``, ``LeaderPartition.tick``), as Kafka does by updating every
session partition's follower state on each fetch.

Crash: nothing persists; a restarted leader knows no session and answers 70. Pure except for the
``FetchWaiter`` of each session (a future the driver arms), which is why it sits with the drivers
and not in ``state/``: the epochs, error codes and ``SessionClock`` it shares with the machines
are in ``state/fetch_metadata.py``. Single event loop, not thread-safe.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from yak.protocol.broker_wire import FetchedPartition
from yak_broker.replication.fetch_waiter import FetchWaiter
from yak_broker.replication.state.fetch_metadata import (
    FETCH_SESSION_ID_NOT_FOUND,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    MAX_EPOCH,
    SessionClock,
    next_epoch,
)

__all__ = [
    "FetchSessionCache",
    "FetchSessionError",
    "LeaderFetchSession",
    "Named",
    "SessionPartition",
]

_Key = tuple[str, int]
#: A named partition of a request: topic, partition, fetch offset, max bytes, leader epoch.
Named = tuple[str, int, int, int, int]


class FetchSessionError(Exception):
    """A fetch refused whole because of its session: ``code`` is Kafka's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class SessionPartition:
    """One partition of a session: the follower's position and what it was last told."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    #: Last answered high watermark, log start offset and error code (-2/None: never).
    high_watermark: int = -2
    log_start_offset: int = -2
    error: str | None = None

    def changed(self, high_watermark: int, log_start_offset: int, error: str | None) -> bool:
        return (
            high_watermark != self.high_watermark
            or log_start_offset != self.log_start_offset
            or error != self.error
        )


@dataclass(eq=False, slots=True)
class LeaderFetchSession:
    """One follower's session on this leader (see the module doc)."""

    session_id: int
    replica_id: int
    #: The epoch the next request must carry.
    epoch: int
    clock: SessionClock
    partitions: dict[_Key, SessionPartition] = field(default_factory=dict)
    #: Partitions to read at the next round (an ordered set).
    dirty: dict[_Key, None] = field(default_factory=dict)
    waiter: FetchWaiter = field(default_factory=FetchWaiter)
    last_used_ms: int = 0

    @property
    def closed(self) -> bool:
        return self.clock.closed

    def wanted(self) -> list[Named]:
        """What to read this round: the dirty partitions at the positions the session holds."""
        partitions = self.partitions
        wanted = []
        for key in self.dirty:
            known = partitions[key]
            wanted.append(
                (key[0], key[1], known.fetch_offset, known.max_bytes, known.current_leader_epoch)
            )
        return wanted

    def changes(self, read: Sequence[FetchedPartition]) -> list[FetchedPartition]:
        """What an incremental answer carries of ``read``: the partitions with records or a
        high watermark, log start offset or error other than last answered."""
        partitions = self.partitions
        changed = []
        for fetched in read:
            known = partitions[(fetched.topic, fetched.partition)]
            if len(memoryview(fetched.records)) or known.changed(
                fetched.high_watermark, fetched.log_start_offset, _code(fetched)
            ):
                changed.append(fetched)
        return changed

    def commit(
        self,
        read: Sequence[FetchedPartition],
        log_end_offset: Callable[[_Key], int],
        in_sync: Callable[[_Key], bool] | None = None,
    ) -> None:
        """``read`` was answered: remember what each partition was told; one read to the log
        end (``log_end_offset``) without error is clean until something changes it again —
        unless ``in_sync`` says the follower is outside the partition's ISR: then it is read
        (its position reported) again next round, until it is added back."""
        partitions, dirty = self.partitions, self.dirty
        for fetched in read:
            key = (fetched.topic, fetched.partition)
            known = partitions.get(key)
            if known is None:
                continue
            error = _code(fetched)
            known.high_watermark = fetched.high_watermark
            known.log_start_offset = fetched.log_start_offset
            known.error = error
            if error is not None:
                continue  # read again next round (an unchanged error is not sent again)
            if not len(memoryview(fetched.records)) and log_end_offset(key) > known.fetch_offset:
                continue  # cut off by the answer's byte limit: more to send
            if in_sync is not None and not in_sync(key):
                continue  # report its position again: it may join the ISR next time
            dirty.pop(key, None)


def _code(fetched: FetchedPartition) -> str | None:
    return fetched.error.code if fetched.error is not None else None


class FetchSessionCache:
    """The sessions of this leader, by id, and which sessions hold each partition."""

    def __init__(
        self,
        *,
        max_sessions: int = 1000,
        eviction_ms: int = 120_000,
        rng: random.Random | None = None,
    ) -> None:
        self._sessions: dict[int, LeaderFetchSession] = {}
        self._by_partition: dict[_Key, set[LeaderFetchSession]] = {}
        self._max_sessions = max_sessions
        self._eviction_ms = eviction_ms
        #: Sessions closed so far (evicted, replaced or ended): a quiet leader relied on any
        #: of them may have a laggard now (see ``IsrChecks``).
        self.closures = 0
        self._rng = rng if rng is not None else random.SystemRandom()

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LeaderFetchSession]:
        return iter(list(self._sessions.values()))

    def get(self, session_id: int) -> LeaderFetchSession | None:
        return self._sessions.get(session_id)

    def open(
        self,
        session_id: int,
        session_epoch: int,
        replica_id: int,
        named: Iterable[Named],
        forgotten: Iterable[_Key],
        now_ms: int,
    ) -> LeaderFetchSession | None:
        """The session a request belongs to, updated with what it names; None: sessionless.

        Raises ``FetchSessionError`` for an unknown session or an unexpected epoch.
        """
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                self.close(session_id)
            if session_epoch == FINAL_EPOCH or replica_id < 0:
                return None
            return self._create(replica_id, named, now_ms)
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            raise FetchSessionError(
                FETCH_SESSION_ID_NOT_FOUND, f"fetch session {session_id} is not known here"
            )
        if session_epoch != session.epoch:
            raise FetchSessionError(
                INVALID_FETCH_SESSION_EPOCH,
                f"fetch session {session_id} expects epoch {session.epoch}, got {session_epoch}",
            )
        session.epoch = next_epoch(session_epoch)
        session.last_used_ms = now_ms
        for key in forgotten:
            if session.partitions.pop(key, None) is not None:
                session.dirty.pop(key, None)
                self._unindex(key, session)
        self._update(session, named)
        return session

    def close(self, session_id: int) -> None:
        """Forget a session; a request parked on it is woken (and answers empty)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        session.clock.closed = True
        self.closures += 1
        for key in session.partitions:
            self._unindex(key, session)
        session.waiter.wake()

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)

    def notify(self, key: _Key) -> None:
        """New data (or a leadership change) on ``key``: read it at once in every session."""
        for session in self._by_partition.get(key, ()):
            session.dirty[key] = None
            session.waiter.wake()

    def mark(self, key: _Key) -> None:
        """The high watermark of ``key`` moved: tell every session's follower at its next
        answer (no wake-up: a follower's fetch is answered for data, as Kafka's)."""
        for session in self._by_partition.get(key, ()):
            session.dirty[key] = None

    # --- internals -----------------------------------------------------------------------

    def _create(self, replica_id: int, named: Iterable[Named], now_ms: int) -> LeaderFetchSession:
        for old in list(self._sessions.values()):
            expired = now_ms - old.last_used_ms > self._eviction_ms
            if old.replica_id == replica_id or expired:
                self.close(old.session_id)
        while len(self._sessions) >= self._max_sessions:
            oldest = min(self._sessions.values(), key=lambda s: s.last_used_ms)
            self.close(oldest.session_id)
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._rng.randrange(1, MAX_EPOCH)
        session = LeaderFetchSession(
            session_id, replica_id, 1, SessionClock(now_ms), last_used_ms=now_ms
        )
        self._sessions[session_id] = session
        self._update(session, named)
        return session

    def _update(self, session: LeaderFetchSession, named: Iterable[Named]) -> None:
        partitions = session.partitions
        for topic, partition, offset, max_bytes, epoch in named:
            key = (topic, partition)
            known = partitions.get(key)
            if known is None:
                partitions[key] = SessionPartition(offset, max_bytes, epoch)
                self._by_partition.setdefault(key, set()).add(session)
            else:
                known.fetch_offset = offset
                known.max_bytes = max_bytes
                known.current_leader_epoch = epoch
            session.dirty[key] = None

    def _unindex(self, key: _Key, session: LeaderFetchSession) -> None:
        holders = self._by_partition.get(key)
        if holders is not None:
            holders.discard(session)
            if not holders:
                del self._by_partition[key]
