"""``StatePartitionView``: the latest value per key by offset, tombstones kept until read past,
and the state records' batch codec."""

from __future__ import annotations

from yak.partitioner import murmur2
from yak.record import Record, decode_batch
from yak_broker.share.state_store import SharePartitionKey
from yak_broker.share.state_topic_view import StatePartitionView, state_batch, state_partition

A = SharePartitionKey("jobs", "orders", 0)
B = SharePartitionKey("jobs", "orders", 1)


def rec(offset: int, key: SharePartitionKey, value: bytes | None) -> Record:
    return Record(offset, 0, key.encode(), value)


def test_the_state_partition_is_kafkas_murmur2_of_the_record_key() -> None:
    for n in range(50):
        k = SharePartitionKey("g", "t", n)
        assert state_partition(k, 16) == (murmur2(k.encode()) & 0x7FFFFFFF) % 16


def test_a_state_batch_holds_keys_and_values_in_order_with_null_for_a_delete() -> None:
    batch = decode_batch(state_batch([(A, b"snap"), (B, None)], now_ms=5))
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.records] == [
        (0, A.encode(), b"snap", 5),
        (1, B.encode(), None, 5),
    ]


def test_the_last_value_by_offset_wins_whatever_the_order_seen() -> None:
    view = StatePartitionView()
    view.note_written({A: b"new"}, 10)  # this broker's save, ahead of what was read
    view.apply([rec(3, A, b"old"), rec(4, B, b"b")])
    view.advance(5)
    assert view.get(A) == b"new"
    assert view.get(B) == b"b"


def test_a_tombstone_guards_its_key_until_read_past_then_goes() -> None:
    view = StatePartitionView()
    view.note_written({A: None}, 8)
    view.apply([rec(2, A, b"older")])
    view.advance(3)
    assert view.get(A) is None
    assert len(view) == 1  # the tombstone, still guarding offsets 3..7
    view.advance(9)
    assert len(view) == 0


def test_live_keys_are_the_keys_whose_latest_value_is_a_snapshot() -> None:
    view = StatePartitionView()
    view.apply([rec(0, A, b"a"), rec(1, B, b"b")])
    view.note_written({A: None}, 2)
    assert view.live_keys() == [B]


def test_records_of_other_keys_are_skipped_and_positions_only_move_forward() -> None:
    view = StatePartitionView()
    view.apply([Record(0, 0, b"not a key", b"x"), Record(1, 0, None, b"y")])
    view.advance(2)
    view.advance(1)
    assert view.position == 2
    assert len(view) == 0


def test_reset_forgets_everything() -> None:
    view = StatePartitionView()
    view.apply([rec(0, A, b"a")])
    view.advance(1)
    view.checked_epoch = 3
    view.reset()
    assert (view.position, view.checked_epoch, view.get(A)) == (None, -1, None)
