"""``IsrChecks``: which leader machines a periodic ISR check must tick.

Kafka checks every partition it leads for lagging followers every half ``replica.lag.time.max.ms``;
at 20,000 idle partitions that walk was the largest part of an idle broker's CPU. A leader whose
last tick found every ISR follower parked at its LEO in an open fetch session, and that had no
input since, is ``quiet`` (``LeaderPartition.tick``): each of those followers counts as caught
up as of its session's last fetch, so only that session stalling or closing can make a later
tick find a laggard. So a tick checks every leader when a session closed (evicted, replaced,
ended) since the previous tick or an open one has not fetched for half the lag window (the
margin keeps the skip exact: a session that fetched within it cannot hold a laggard by the next
tick), and otherwise only the leaders that are not quiet. The result is the same as ticking
every leader; the cost is what is due.

Pure: the sessions are read through the ``Sessions`` protocol (the driver passes its
``FetchSessionCache``), time comes in as ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from yak_broker.replication.state.fetch_metadata import SessionClock

__all__ = ["IsrChecks", "Session", "Sessions"]


class Session(Protocol):
    """A follower's fetch session, as far as the checks read it."""

    @property
    def clock(self) -> SessionClock: ...


class Sessions(Protocol):
    """The leader's open sessions (``FetchSessionCache``): what the checks need of them."""

    @property
    def closures(self) -> int:
        """Sessions closed so far (evicted, replaced or ended)."""
        ...

    def __iter__(self) -> Iterator[Session]: ...


class IsrChecks:
    """Decides, at each tick, whether every leader must be checked (see the module doc)."""

    def __init__(self, sessions: Sessions, replica_lag_time_max_ms: int) -> None:
        self._sessions = sessions
        self._stall_ms = replica_lag_time_max_ms / 2
        self._closures = sessions.closures

    def check_all(self, now_ms: int) -> bool:
        """Whether this tick must check every leader (else: only those not quiet)."""
        closed = self._closures != self._sessions.closures
        self._closures = self._sessions.closures
        stalled = any(now_ms - s.clock.last_fetch_ms > self._stall_ms for s in self._sessions)
        return closed or stalled
