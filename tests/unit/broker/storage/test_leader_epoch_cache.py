"""Tests for yak_broker.storage.leader_epoch_cache (KIP-101 / KIP-279 semantics)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yak_broker.storage.checkpoint import CorruptCheckpointError, temp_path, write_atomically
from yak_broker.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE_NAME,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def make(tmp_path: Path, *pairs: tuple[int, int], name: str = "") -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / (name + LEADER_EPOCH_CHECKPOINT_FILE_NAME))
    for epoch, start in pairs:
        cache.assign(epoch, start)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def unpersisted(cache: LeaderEpochCache) -> bool:
    """Read through a call: mypy would keep the property narrowed across the calls between."""
    return cache.unpersisted


def test_empty_cache(tmp_path: Path) -> None:
    cache = make(tmp_path)
    assert cache.entries == ()
    assert cache.latest_epoch is None
    assert cache.latest_entry is None
    assert cache.earliest_entry is None
    assert cache.epoch_for_offset(0) is None
    assert cache.end_offset_for(0, 10) == UNDEFINED
    assert not cache.path.exists()  # nothing written until something changes


def test_assign_appends_and_persists_kafka_format(tmp_path: Path) -> None:
    cache = make(tmp_path, (0, 0), (2, 150), (5, 4012))
    assert pairs(cache) == [(0, 0), (2, 150), (5, 4012)]
    assert cache.earliest_entry == EpochEntry(epoch=0, start_offset=0)
    assert cache.latest_entry == EpochEntry(epoch=5, start_offset=4012)
    assert cache.latest_epoch == 5
    assert cache.path.read_text() == "0\n3\n0 0\n2 150\n5 4012\n"
    assert LeaderEpochCache(cache.path).entries == cache.entries
    assert not temp_path(cache.path).exists()


def test_an_unpersisted_assign_is_written_by_whoever_holds_its_checkpoint(
    tmp_path: Path,
) -> None:
    cache = make(tmp_path, (1, 0))
    assert cache.assign(4, 30, persist=False) is True
    assert unpersisted(cache)
    assert LeaderEpochCache(cache.path).entries == (EpochEntry(1, 0),)  # not yet on disk
    path, data, changes = cache.checkpoint()
    assert (path, data) == (cache.path, b"0\n2\n1 0\n4 30\n")
    cache.assign(5, 40, persist=False)  # changed again while the bytes were being written
    write_atomically(path, data)
    cache.persisted(changes)
    assert unpersisted(cache)  # the later change is not in what was written
    _, data, changes = cache.checkpoint()
    write_atomically(path, data)
    cache.persisted(changes)
    assert not unpersisted(cache)
    assert LeaderEpochCache(cache.path).entries == cache.entries


def test_a_persisted_change_writes_the_unpersisted_ones_too(tmp_path: Path) -> None:
    cache = make(tmp_path)
    cache.assign(2, 10, persist=False)
    cache.assign(3, 20)  # written at once, with the entry before it
    assert not cache.unpersisted
    assert pairs(LeaderEpochCache(cache.path)) == [(2, 10), (3, 20)]


def test_repeat_of_latest_epoch_is_a_no_op(tmp_path: Path) -> None:
    cache = make(tmp_path, (3, 100))
    cache.path.unlink()
    assert cache.assign(3, 100) is False
    assert cache.assign(3, 250) is False
    assert not cache.path.exists()  # no rewrite on the hot path
    assert pairs(cache) == [(3, 100)]


def test_same_epoch_earlier_start_replaces_entry(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (3, 100))
    assert cache.assign(3, 90) is True
    assert pairs(cache) == [(1, 0), (3, 90)]


def test_lower_epoch_removes_conflicting_entries(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (3, 100), (4, 200))
    assert cache.assign(2, 300) is True
    assert pairs(cache) == [(1, 0), (2, 300)]
    assert LeaderEpochCache(cache.path).entries == cache.entries


def test_higher_epoch_at_lower_offset_removes_later_starts(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (3, 100), (4, 200))
    assert cache.assign(5, 150) is True
    assert pairs(cache) == [(1, 0), (3, 100), (5, 150)]
    assert cache.assign(6, 150) is True  # same start offset: the older epoch is replaced
    assert pairs(cache) == [(1, 0), (3, 100), (6, 150)]


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1)])
def test_assign_rejects_negative(tmp_path: Path, epoch: int, start: int) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        make(tmp_path).assign(epoch, start)


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 10), (3, 100), (4, 200))
    assert cache.epoch_for_offset(9) is None
    assert cache.epoch_for_offset(10) == 1
    assert cache.epoch_for_offset(99) == 1
    assert cache.epoch_for_offset(100) == 3
    assert cache.epoch_for_offset(199) == 3
    assert cache.epoch_for_offset(200) == 4
    assert cache.epoch_for_offset(10**12) == 4


def test_end_offset_for_kip101(tmp_path: Path) -> None:
    cache = make(tmp_path, (0, 0), (1, 100), (2, 200))
    assert cache.end_offset_for(0, 250) == (0, 100)
    assert cache.end_offset_for(1, 250) == (1, 200)
    assert cache.end_offset_for(2, 250) == (2, 250)  # latest epoch → log end offset
    assert cache.end_offset_for(3, 250) == UNDEFINED  # newer than anything we know
    assert cache.end_offset_for(UNDEFINED_EPOCH, 250) == UNDEFINED


def test_end_offset_for_unknown_epoch_in_a_gap_kip279(tmp_path: Path) -> None:
    # Epochs 2 and 4 never wrote here: answer the largest epoch below and the next start.
    cache = make(tmp_path, (1, 0), (3, 100), (5, 300))
    assert cache.end_offset_for(2, 400) == (1, 100)
    assert cache.end_offset_for(4, 400) == (3, 300)


def test_end_offset_for_epoch_older_than_log_start(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (3, 100), (5, 300))
    cache.truncate_from_start(150)
    assert pairs(cache) == [(3, 150), (5, 300)]
    # As Kafka: the requested epoch with the first known start offset.
    assert cache.end_offset_for(1, 400) == (1, 150)
    assert cache.end_offset_for(3, 400) == (3, 300)


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (3, 100), (5, 300))
    cache.truncate_from_end(301)
    assert pairs(cache) == [(1, 0), (3, 100), (5, 300)]
    cache.truncate_from_end(300)
    assert pairs(cache) == [(1, 0), (3, 100)]
    cache.truncate_from_end(50)
    assert pairs(cache) == [(1, 0)]
    assert LeaderEpochCache(cache.path).entries == cache.entries
    cache.truncate_from_end(0)
    assert cache.entries == ()
    assert LeaderEpochCache(cache.path).entries == ()
    assert cache.path.read_text() == "0\n0\n"


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (3, 100), (5, 300))
    cache.truncate_from_start(0)
    assert pairs(cache) == [(1, 0), (3, 100), (5, 300)]
    cache.truncate_from_start(100)  # exactly at an entry's start: entries below it go
    assert pairs(cache) == [(3, 100), (5, 300)]
    cache.truncate_from_start(120)
    assert pairs(cache) == [(3, 120), (5, 300)]
    cache.truncate_from_start(1000)  # past every entry: the latest survives, moved up
    assert pairs(cache) == [(5, 1000)]
    assert LeaderEpochCache(cache.path).entries == cache.entries
    assert cache.epoch_for_offset(1000) == 5


def test_clear(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0), (2, 5))
    cache.clear()
    assert cache.entries == ()
    assert LeaderEpochCache(cache.path).entries == ()


def test_leftover_temp_file_is_ignored(tmp_path: Path) -> None:
    cache = make(tmp_path, (1, 0))
    temp_path(cache.path).write_text("0\n2\n1 0\n2 ")
    assert pairs(LeaderEpochCache(cache.path)) == [(1, 0)]


def test_tolerates_extra_whitespace_like_kafka(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE_NAME
    path.write_text("0\n2\n1  0\n2 5\n")
    assert pairs(LeaderEpochCache(path)) == [(1, 0), (2, 5)]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "unknown version"),
        ("1\n0\n", "unknown version"),
        ("0\nx\n", "bad entry count"),
        ("0\n2\n1 0\n", "expected 2 entries, found 1"),
        ("0\n1\n1 0\n2 5\n", "expected 1 entries, found 2"),
        ("0\n1\n1\n", "malformed entry"),
        ("0\n1\n-1 0\n", "malformed entry"),
        ("0\n2\n2 0\n1 5\n", "does not follow"),
        ("0\n2\n1 5\n2 5\n", "does not follow"),
    ],
)
def test_malformed_file_raises(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE_NAME
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=reason):
        LeaderEpochCache(path)


def test_binary_garbage_raises(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE_NAME
    path.write_bytes(b"\xff\x00\x01")
    with pytest.raises(CorruptCheckpointError, match="not ASCII"):
        LeaderEpochCache(path)


# --- KIP-279 follower truncation, driven the way Kafka's fetcher drives the cache ----------


def follower_truncate(
    follower: LeaderEpochCache, follower_leo: int, leader: LeaderEpochCache, leader_leo: int
) -> int:
    """Kafka's ``getOffsetTruncationState`` loop; returns the follower's new log end offset."""
    for _ in range(100):
        requested = follower.latest_epoch
        assert requested is not None
        leader_epoch, leader_end = leader.end_offset_for(requested, leader_leo)
        assert leader_end != UNDEFINED_EPOCH_OFFSET
        follower_epoch, follower_end = follower.end_offset_for(leader_epoch, follower_leo)
        if follower_epoch != leader_epoch:
            # The follower does not know the epoch the leader replied with: truncate to the end
            # of its largest epoch below it and ask again.
            follower_leo = min(follower_end, follower_leo)
            follower.truncate_from_end(follower_leo)
            continue
        follower_leo = min(follower_end, leader_end, follower_leo)
        follower.truncate_from_end(follower_leo)
        return follower_leo
    raise AssertionError("truncation did not converge")


def test_kip101_leader_failover_truncates_unreplicated_tail(tmp_path: Path) -> None:
    # A led epoch 1 and wrote offsets 0..1; only offset 0 reached B. B leads epoch 2 and writes
    # offset 1 anew. A must drop its offset 1 (HW-based truncation could keep it).
    a = make(tmp_path, (1, 0), name="a")
    b = make(tmp_path, (1, 0), (2, 1), name="b")
    assert follower_truncate(a, 2, b, 2) == 1


def test_kip279_leader_answers_epoch_unknown_to_follower(tmp_path: Path) -> None:
    # Follower F wrote epoch 2 (which never reached leader L) from offset 10; L has epoch 1 at
    # 8..11 that F never saw. F's epoch-0 data at 8..9 diverges too: two rounds find offset 8.
    f = make(tmp_path, (0, 0), (2, 10), name="f")
    leader = make(tmp_path, (0, 0), (1, 8), (3, 12), name="l")
    assert leader.end_offset_for(2, 20) == (1, 12)
    assert follower_truncate(f, 15, leader, 20) == 8
    assert pairs(f) == [(0, 0)]


def test_kip279_follower_is_behind_keeps_its_log(tmp_path: Path) -> None:
    f = make(tmp_path, (0, 0), (1, 8), name="f")
    leader = make(tmp_path, (0, 0), (1, 8), (3, 12), name="l")
    assert follower_truncate(f, 10, leader, 20) == 10
    assert pairs(f) == [(0, 0), (1, 8)]


def test_kip279_follower_ahead_in_same_epoch_truncates_to_leader_end(tmp_path: Path) -> None:
    f = make(tmp_path, (0, 0), (1, 8), name="f")
    leader = make(tmp_path, (0, 0), (1, 8), (3, 12), name="l")
    assert follower_truncate(f, 15, leader, 20) == 12
