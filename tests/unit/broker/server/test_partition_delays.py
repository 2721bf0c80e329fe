"""Tests for yak_broker.server.partition_delays: one replica's delay index kept level with its
log, and the share-partitions' view of it (yak_broker.share.index_delay_source)."""

from __future__ import annotations

from pathlib import Path

from yak.delays import cancel_batch, delay_header
from yak.record import RecordInput, encode_batch
from yak.types import TopicPartition
from yak_broker.server.partition_delays import PartitionDelays
from yak_broker.share.index_delay_source import IndexedDelaySource
from yak_broker.share.state.records import DueEntry
from yak_broker.storage.delay_index import write_checkpoint
from yak_broker.storage.log import Log
from yak_broker.storage.log_config import LogConfig

NOW = 1_767_225_600_000
TP = TopicPartition("t", 0)


def _batch(*dues: int | None) -> bytes:
    records = [
        RecordInput(value=b"v", headers=(delay_header(due),) if due is not None else ())
        for due in dues
    ]
    return encode_batch(records, now_ms=NOW)


class Owner:
    """Stands in for the indexer: records wake-ups and the end of a partition."""

    def __init__(self) -> None:
        self.woken: list[PartitionDelays] = []
        self.done: list[PartitionDelays] = []

    def open(self, log: Log, read_bytes: int = 1 << 20) -> PartitionDelays:
        return PartitionDelays.open(
            TP, log, self.woken.append, lambda: NOW, read_bytes, self.done.append
        )


def _log(path: Path) -> Log:
    return Log.open(path, LogConfig(segment_bytes=1 << 20))


def _pending(partition: PartitionDelays) -> list[tuple[int, int]]:
    return partition.index.pending(-1, 100, -1)


def test_existing_delayed_records_are_indexed_in_bounded_steps(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 50, None), 0)
    log.append(_batch(NOW + 10), 0)
    owner = Owner()
    partition = owner.open(log, read_bytes=1)  # one batch per step
    assert owner.woken == [partition]
    assert partition.lag == 3
    assert partition.index_step() is True
    assert partition.index.cursor == 2
    assert partition.index_step() is False
    assert _pending(partition) == [(NOW + 10, 2), (NOW + 50, 0)]


def test_an_append_wakes_the_owner_and_a_cancel_is_honoured(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    owner = Owner()
    partition = owner.open(log)
    assert owner.woken == []
    log.append(_batch(NOW + 5, NOW + 6), 0)
    assert owner.woken == [partition]
    log.append_control(cancel_batch(0, NOW + 5, NOW), 0)
    partition.index_through(log.log_end_offset)
    assert _pending(partition) == [(NOW + 6, 1)]


def test_truncation_cuts_the_index_and_waits_for_a_checkpoint_in_flight(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    for due in (NOW + 1, NOW + 2, NOW + 3):
        log.append(_batch(due), 0)  # a truncation cuts whole batches
    partition = Owner().open(log)
    partition.index_through(3)
    ticket = partition.prepare_checkpoint()
    assert ticket is not None
    assert partition.checkpointing
    log.truncate_to(1)
    assert partition.covered_offset() == 1  # the cut is owed, and not answered past
    assert partition.index_step() is False  # nothing indexed meanwhile
    assert len(_pending(partition)) == 3
    write_checkpoint(ticket)
    partition.checkpoint_done(ticket, None)
    assert _pending(partition) == [(NOW + 1, 0)]
    assert partition.index.cursor == 1


def test_retention_hides_records_below_the_log_start(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 1, NOW + 2), 0)
    log.update_high_watermark(2)
    partition = Owner().open(log)
    partition.index_through(2)
    log.delete_records(1)
    assert _pending(partition) == [(NOW + 2, 1)]


def test_a_clean_close_checkpoints_and_a_reopen_resumes_at_the_cursor(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 1), 0)
    owner = Owner()
    partition = owner.open(log)
    partition.index_through(1)
    log.close()
    assert owner.done == [partition]
    assert partition.done
    log = _log(tmp_path / "t-0")
    again = Owner().open(log)
    assert again.index.cursor == 1
    assert again.lag == 0
    assert _pending(again) == [(NOW + 1, 0)]
    log.close()


def test_an_index_ahead_of_a_log_that_lost_its_tail_is_cut_to_the_log(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 1), 0)
    log.append(_batch(NOW + 2), 0)
    partition = Owner().open(log)
    partition.index_through(2)
    partition.index.checkpoint()
    log.observer = None
    log.truncate_to(1)  # what a crash losing the unflushed tail looks like at the next open
    again = Owner().open(log)
    assert again.index.cursor == 1
    assert _pending(again) == [(NOW + 1, 0)]


def test_a_close_during_a_checkpoint_waits_for_it(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 1), 0)
    owner = Owner()
    partition = owner.open(log)
    partition.index_through(1)
    ticket = partition.prepare_checkpoint()
    assert ticket is not None
    log.delete()
    assert owner.done == []
    assert not partition.done
    partition.checkpoint_done(ticket, OSError("folder gone"))
    assert owner.done == [partition]
    assert partition.index_through(5) is None  # done: no index lent any more


def test_the_source_catches_up_before_answering_and_is_inclusive(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 10, None, NOW + 20, NOW + 10), 0)
    partition = Owner().open(log)
    source = IndexedDelaySource(partition)
    assert partition.index.cursor == 0  # nothing indexed yet: ``due`` indexes first
    assert sorted(source.due(NOW + 10, NOW + 20, 3)) == [
        DueEntry(0, NOW + 10),
        DueEntry(2, NOW + 20),
    ]
    assert source.watermark_ms == NOW + 10
    assert list(source.due(NOW + 11, NOW + 19, 4)) == []
    assert source.next_due_ms(NOW + 10) == NOW + 20
    assert source.next_due_ms(NOW + 20) is None


def test_the_source_answers_nothing_once_the_partition_is_done(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.append(_batch(NOW + 10), 0)
    partition = Owner().open(log)
    source = IndexedDelaySource(partition)
    log.close()
    assert list(source.due(0, NOW + 100, 1)) == []
    assert source.next_due_ms(0) is None
