"""What the two ends of an incremental fetch session (KIP-227) agree on, as plain values.

Kafka's ``FetchMetadata``: a request carries ``session_id`` and ``session_epoch``. Epoch
``INITIAL_EPOCH`` (0) is a full fetch that opens a session; the next request carries 1, then
each one the epoch after the previous (``next_epoch``: up to ``MAX_EPOCH``, then back to 1, never
to 0); ``FINAL_EPOCH`` (-1) is a sessionless fetch, closing the session it names. A refused
session is answered with Kafka's error ``FETCH_SESSION_ID_NOT_FOUND`` (70) or
``INVALID_FETCH_SESSION_EPOCH`` (71), and the follower starts again with a full fetch.

``SessionClock`` is the leader's record of when a follower's session last fetched: the session
cache (``fetch_session_cache``) stamps it on every round and ``LeaderPartition`` reads it to
count a follower parked in an open session as fetching.

Values only: the follower's ``FetchSession``, the leader's ``FetchSessionCache`` and the
broker's fetch paths share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FETCH_SESSION_ID_NOT_FOUND",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_FETCH_SESSION_EPOCH",
    "MAX_EPOCH",
    "SessionClock",
    "next_epoch",
]

#: Kafka's error codes of a refused session (``Errors.FETCH_SESSION_ID_NOT_FOUND`` ...).
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
#: ``session_epoch`` of a full fetch that creates a session, and of a sessionless fetch.
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: The largest epoch (and session id) before the epoch wraps to 1.
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka wraps to 1, never back to the initial 0)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class SessionClock:
    """When the session last fetched; ``closed`` once it is evicted or replaced."""

    last_fetch_ms: int = 0
    closed: bool = False
