"""FetchSessionCache: the leader's incremental fetch sessions (KIP-227)."""

from __future__ import annotations

import random

import pytest

from yak_broker.replication.fetch_session_cache import FetchSessionCache, FetchSessionError
from yak_broker.replication.state.fetch_metadata import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    next_epoch,
)

FOLLOWER = 1


def named(*partitions: int, offset: int = 0) -> list[tuple[str, int, int, int, int]]:
    return [("t", p, offset, 1024, 3) for p in partitions]


def cache() -> FetchSessionCache:
    return FetchSessionCache(rng=random.Random(7))


def test_a_full_fetch_creates_a_session_with_every_partition_dirty() -> None:
    sessions = cache()
    session = sessions.open(0, 0, FOLLOWER, named(0, 1), (), now_ms=10)
    assert session is not None
    assert session.session_id > 0
    assert session.epoch == 1
    assert list(session.dirty) == [("t", 0), ("t", 1)]
    assert session.partitions[("t", 1)].fetch_offset == 0
    assert sessions.get(session.session_id) is session


def test_an_idle_incremental_round_names_nothing_and_dirties_nothing() -> None:
    sessions = cache()
    session = sessions.open(0, 0, FOLLOWER, named(0, 1), (), now_ms=10)
    assert session is not None
    session.dirty.clear()  # as the leader does once it answered them
    same = sessions.open(session.session_id, 1, FOLLOWER, (), (), now_ms=20)
    assert same is session
    assert not session.dirty
    assert session.epoch == 2
    assert session.last_used_ms == 20
    assert len(session.partitions) == 2


def test_an_incremental_round_updates_adds_and_forgets() -> None:
    sessions = cache()
    session = sessions.open(0, 0, FOLLOWER, named(0, 1), (), now_ms=0)
    assert session is not None
    session.dirty.clear()
    sessions.open(session.session_id, 1, FOLLOWER, named(1, 2, offset=5), [("t", 0)], now_ms=1)
    assert sorted(session.partitions) == [("t", 1), ("t", 2)]
    assert session.partitions[("t", 1)].fetch_offset == 5
    assert list(session.dirty) == [("t", 1), ("t", 2)]
    # A forgotten partition is no longer woken; the others are.
    session.dirty.clear()
    sessions.notify(("t", 0))
    assert not session.dirty
    sessions.notify(("t", 2))
    assert list(session.dirty) == [("t", 2)]


def test_notify_wakes_and_mark_only_dirties() -> None:
    sessions = cache()
    session = sessions.open(0, 0, FOLLOWER, named(0), (), now_ms=0)
    assert session is not None
    session.dirty.clear()
    sessions.mark(("t", 0))
    assert list(session.dirty) == [("t", 0)]
    assert session.waiter.wakeups == 0
    sessions.notify(("t", 9))  # not in any session: nothing
    assert session.waiter.wakeups == 0


async def test_notify_wakes_the_parked_request() -> None:
    sessions = cache()
    session = sessions.open(0, 0, FOLLOWER, named(0), (), now_ms=0)
    assert session is not None
    session.waiter.arm()
    sessions.notify(("t", 0))
    assert await session.waiter.wait(1.0)


def test_an_unknown_session_and_a_wrong_epoch_are_refused() -> None:
    sessions = cache()
    with pytest.raises(FetchSessionError) as unknown:
        sessions.open(12345, 1, FOLLOWER, (), (), now_ms=0)
    assert unknown.value.code == FETCH_SESSION_ID_NOT_FOUND
    session = sessions.open(0, 0, FOLLOWER, named(0), (), now_ms=0)
    assert session is not None
    with pytest.raises(FetchSessionError) as stale:
        sessions.open(session.session_id, 2, FOLLOWER, (), (), now_ms=0)  # 1 expected
    assert stale.value.code == INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(FetchSessionError) as other:  # another broker's id for it
        sessions.open(session.session_id, 1, 2, (), (), now_ms=0)
    assert other.value.code == FETCH_SESSION_ID_NOT_FOUND
    assert sessions.open(session.session_id, 1, FOLLOWER, (), (), now_ms=0) is session


def test_sessionless_fetches_and_consumers_get_no_session() -> None:
    sessions = cache()
    assert sessions.open(0, -1, FOLLOWER, named(0), (), now_ms=0) is None
    assert sessions.open(0, 0, -1, named(0), (), now_ms=0) is None  # a consumer
    assert len(sessions) == 0


def test_closing_a_session_by_a_full_or_sessionless_fetch() -> None:
    sessions = cache()
    first = sessions.open(0, 0, FOLLOWER, named(0), (), now_ms=0)
    assert first is not None
    second = sessions.open(first.session_id, 0, FOLLOWER, named(0), (), now_ms=0)
    assert second is not None
    assert second.session_id != first.session_id
    assert first.closed
    assert sessions.get(first.session_id) is None
    assert sessions.open(second.session_id, -1, FOLLOWER, named(0), (), now_ms=0) is None
    assert second.closed
    assert len(sessions) == 0
    sessions.notify(("t", 0))  # no index entry left behind
    assert not first.dirty or list(first.dirty) == [("t", 0)]


def test_a_follower_has_one_session_and_idle_ones_expire() -> None:
    sessions = FetchSessionCache(rng=random.Random(1), eviction_ms=1_000)
    old = sessions.open(0, 0, FOLLOWER, named(0), (), now_ms=0)
    other = sessions.open(0, 0, 2, named(0), (), now_ms=0)
    assert old is not None
    assert other is not None
    # The follower restarted: its new session replaces the old one.
    new = sessions.open(0, 0, FOLLOWER, named(0), (), now_ms=500)
    assert new is not None
    assert old.closed
    assert not other.closed
    # Broker 2 stopped fetching; its session expires when a new one is made.
    third = sessions.open(0, 0, 3, named(0), (), now_ms=1_200)
    assert third is not None
    assert sessions.get(other.session_id) is None
    assert sessions.get(new.session_id) is new
    assert len(sessions) == 2


def test_the_least_recently_used_session_is_evicted_when_full() -> None:
    sessions = FetchSessionCache(rng=random.Random(1), max_sessions=2)
    a = sessions.open(0, 0, 1, named(0), (), now_ms=0)
    b = sessions.open(0, 0, 2, named(0), (), now_ms=1)
    assert a is not None
    assert b is not None
    sessions.open(a.session_id, 1, 1, (), (), now_ms=2)  # a used last
    c = sessions.open(0, 0, 3, named(0), (), now_ms=3)
    assert c is not None
    assert b.closed
    assert not a.closed


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
