"""The chaos suite's verdict (``loadtest.chaos.verdict``) on synthetic reads: a clean run
passes, and each planted fault — a lost record, a second copy, a record at another offset, two
records swapped — is found and counted once, and nothing else is."""

from __future__ import annotations

from loadtest.chaos.verdict import Ack, Verdict, judge


def _value(producer: str, seq: int) -> bytes:
    return f"{producer}:{seq}:".encode()


def _clean(n: int = 6) -> tuple[list[Ack], dict[int, list[tuple[int, bytes]]]]:
    """``n`` records of producer ``a`` on partition 0 at offsets 0..n-1, all acknowledged."""
    acks = [Ack("a", 0, seq, seq, _value("a", seq)) for seq in range(n)]
    stored = {0: [(seq, _value("a", seq)) for seq in range(n)]}
    return acks, stored


def test_a_clean_read_is_ok() -> None:
    acks, stored = _clean()
    verdict = judge(acks, stored)
    assert verdict.ok
    assert (verdict.acked, verdict.found) == (6, 6)


def test_a_lost_record_is_counted() -> None:
    acks, stored = _clean()
    del stored[0][3]
    verdict = judge(acks, stored)
    assert (verdict.lost, verdict.duplicated, verdict.moved, verdict.reordered) == (1, 0, 0, 0)
    assert not verdict.ok
    assert "acked at 3" in verdict.examples["lost"][0]


def test_a_whole_partition_missing_loses_every_record_of_it() -> None:
    acks, _ = _clean()
    assert judge(acks, {0: []}).lost == 6


def test_a_second_copy_is_a_duplicate_even_of_an_unacknowledged_record() -> None:
    acks, stored = _clean()
    stored[0].append((6, _value("a", 2)))
    stored[0].append((7, _value("a", 9)))  # sent, never acknowledged ...
    stored[0].append((8, _value("a", 9)))  # ... and written twice
    verdict = judge(acks, stored, sent=[_value("a", s) for s in range(10)])
    assert (verdict.duplicated, verdict.lost, verdict.moved) == (2, 0, 0)
    assert verdict.unacked_found == 1


def test_a_record_at_another_offset_is_moved() -> None:
    acks, stored = _clean()
    stored[0] = [(offset + 1 if offset >= 4 else offset, v) for offset, v in stored[0]]
    verdict = judge(acks, stored)
    assert (verdict.moved, verdict.lost, verdict.reordered) == (2, 0, 0)


def test_swapped_records_are_reordered_and_moved() -> None:
    acks, stored = _clean()
    stored[0][1], stored[0][2] = (1, _value("a", 2)), (2, _value("a", 1))
    verdict = judge(acks, stored)
    assert verdict.reordered == 1
    assert verdict.moved == 2


def test_order_is_per_producer_and_partition() -> None:
    """Two producers interleaved on one partition, and one producer on two partitions, are
    in order: only each sender's own records on one partition must keep its send order."""
    acks = [
        Ack("a", 0, 0, 0, _value("a", 0)),
        Ack("b", 0, 0, 1, _value("b", 0)),
        Ack("a", 0, 1, 2, _value("a", 1)),
        Ack("a", 1, 0, 0, _value("a", 2)),
    ]
    stored = {0: [(a.offset, a.value) for a in acks[:3]], 1: [(0, _value("a", 2))]}
    assert judge(acks, stored).ok


def test_a_value_on_the_wrong_partition_is_lost_there() -> None:
    acks, stored = _clean(2)
    stored = {0: [(0, _value("a", 0))], 1: [(0, _value("a", 1))]}
    assert judge(acks, stored).lost == 1


def test_verdicts_add_up() -> None:
    acks, stored = _clean()
    del stored[0][0]
    total = judge(acks, stored) + Verdict(acked=4, duplicated=1)
    assert (total.acked, total.lost, total.duplicated) == (10, 1, 1)
    assert total.examples["lost"]
