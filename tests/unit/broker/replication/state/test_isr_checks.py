"""The ISR check costs what is due: ``LeaderPartition.quiet`` and ``IsrChecks`` skip leaders
whose followers are parked in open sessions, and decide exactly as ticking every leader."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.broker.replication.support import LAG, append, make_log, state
from yak_broker.replication.fetch_session_cache import FetchSessionCache
from yak_broker.replication.state.fetch_metadata import SessionClock
from yak_broker.replication.state.isr_checks import IsrChecks
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.replication.state.messages import AlterIsr
from yak_broker.storage.log import Log


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return make_log(tmp_path)


def lead(log: Log) -> LeaderPartition:
    return LeaderPartition(0, state(), log, now_ms=0, replica_lag_time_max_ms=LAG)


def quiet(leader: LeaderPartition) -> bool:
    return leader.quiet  # read through a call: each assertion sees the attribute anew


def park(leader: LeaderPartition, log: Log, clocks: dict[int, SessionClock], now: int) -> None:
    """Followers 1 and 2 fetch at the leader's LEO in their sessions at ``now``."""
    for replica, clock in clocks.items():
        clock.last_fetch_ms = now
        leader.on_follower_fetch(replica, log.log_end_offset, now, clock)


def test_a_tick_finding_every_follower_parked_leaves_the_leader_quiet_until_an_input(
    log: Log,
) -> None:
    leader = lead(log)
    clocks = {1: SessionClock(0), 2: SessionClock(0)}
    assert not quiet(leader)  # nothing known yet
    pokes = [
        lambda: leader.on_append(30),
        lambda: leader.on_follower_fetch(1, log.log_end_offset, 30, clocks[1]),
        lambda: leader.on_state(state(), 30),
        lambda: leader.on_follower_forgotten(2),
        lambda: leader.on_proposal_failed(),
    ]
    for poke in pokes:
        park(leader, log, clocks, 10)
        assert leader.tick(20) == []
        assert quiet(leader)
        poke()
        assert not quiet(leader)


def test_not_quiet_while_a_follower_is_behind_sessionless_or_in_a_closed_session(
    log: Log,
) -> None:
    leader = lead(log)
    clocks = {1: SessionClock(0), 2: SessionClock(0)}
    park(leader, log, clocks, 10)
    append(log, 1, b"x")
    leader.on_append(11)
    assert leader.tick(20) == []
    assert not leader.quiet  # both followers are behind the new LEO
    park(leader, log, clocks, 21)
    leader.on_follower_fetch(2, log.log_end_offset, 21, None)  # sessionless
    leader.tick(22)
    assert not leader.quiet
    park(leader, log, clocks, 23)
    clocks[2].closed = True
    leader.tick(24)
    assert not leader.quiet


def test_every_leader_is_checked_after_a_session_stalls_or_closes() -> None:
    cache = FetchSessionCache()
    session = cache.open(0, 0, 1, [("t", 0, 0, 1 << 20, 0)], (), 0)
    assert session is not None
    checks = IsrChecks(cache, LAG)
    assert not checks.check_all(LAG // 2)  # it fetched within half a lag window
    assert checks.check_all(LAG // 2 + 1)  # it has not: a quiet leader may be about to lag
    session.clock.last_fetch_ms = LAG
    assert not checks.check_all(LAG + 1)
    cache.close(session.session_id)
    assert checks.check_all(LAG + 2)  # once for the closure...
    assert not checks.check_all(LAG + 3)  # ...then nothing is open to stall


def test_skipping_quiet_leaders_shrinks_the_isr_when_ticking_every_one_would(
    tmp_path: Path,
) -> None:
    """Two identical leaders; follower 2's session stops fetching at 100 ms while follower 1
    keeps fetching. One leader is ticked every time, the other only when ``IsrChecks`` or its
    own ``quiet`` says so: both propose the same shrink at the same tick."""
    logs = [make_log(tmp_path, "a-0"), make_log(tmp_path, "b-0")]
    leaders = [lead(log) for log in logs]
    caches = [FetchSessionCache(), FetchSessionCache()]
    clocks: list[dict[int, SessionClock]] = []
    for cache in caches:
        opened = {r: cache.open(0, 0, r, [("t", 0, 0, 1 << 20, 0)], (), 0) for r in (1, 2)}
        clocks.append({r: s.clock for r, s in opened.items() if s is not None})
    checks = IsrChecks(caches[1], LAG)
    proposals: list[list[tuple[int, AlterIsr]]] = [[], []]
    for now in range(0, 5 * LAG, LAG // 4):
        for index, (leader, log) in enumerate(zip(leaders, logs, strict=True)):
            fetching = clocks[index] if now <= 100 else {1: clocks[index][1]}
            park(leader, log, fetching, now)
            if index == 0 or checks.check_all(now) or not leader.quiet:
                found = leader.tick(now + 1)
                proposals[index] += [(now, p) for p in found if isinstance(p, AlterIsr)]
    assert proposals[0] == proposals[1]
    ((when, proposal),) = proposals[1][:1]
    assert proposal.new_isr == (0, 1)
    assert when > 100 + LAG - LAG // 4
