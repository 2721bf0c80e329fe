"""Tests for yak_broker.storage.delay_index (with delay_bucket and delay_checkpoint)."""

from __future__ import annotations

import threading
from array import array
from pathlib import Path

import pytest

from yak_broker.storage import delay_checkpoint
from yak_broker.storage.delay_bucket import bucket_file
from yak_broker.storage.delay_checkpoint import CHECKPOINT_NAME
from yak_broker.storage.delay_index import DelayIndex, write_checkpoint
from yak_broker.storage.delay_scan import Cancellation, DelayScan

W = 1000  # bucket width in these tests


def scan(*entries: tuple[int, int], cancels: tuple[Cancellation, ...] = ()) -> DelayScan:
    """A scan result of ``(deliver_at, offset)`` pairs."""
    return DelayScan(
        array("q", [d for d, _ in entries]), array("q", [o for _, o in entries]), cancels, None
    )


def pairs(due: object) -> list[tuple[int, int]]:
    deliver_at, offsets = due[0], due[1]  # type: ignore[index]
    return list(zip(deliver_at, offsets, strict=True))


def open_index(path: Path, horizon_ms: int = 10 * W) -> DelayIndex:
    return DelayIndex.open(path / "delays", bucket_ms=W, horizon_ms=horizon_ms)


def test_due_is_sorted_by_time_then_offset_across_bucket_boundaries(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((2500, 0), (999, 1), (1000, 2), (999, 3), (1001, 4)), new_cursor=5)
    assert pairs(index.due(0, 3000, 10)) == [(999, 1), (999, 3), (1000, 2), (1001, 4), (2500, 0)]
    assert pairs(index.due(999, 1001, 10)) == [(1000, 2), (1001, 4)]  # (after, through]
    assert pairs(index.due(0, 3000, 3)) == [(999, 1), (1000, 2), (2500, 0)]  # below offset 3
    assert index.due(0, 3000, 10).through_ms == 3000
    assert index.cursor == 5


def test_limit_never_splits_a_run_of_one_due_time(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((10, 0), (20, 1), (20, 2), (20, 3), (30, 4)), new_cursor=5)
    first = index.due(0, 100, 10, limit=2)
    assert pairs(first) == [(10, 0), (20, 1), (20, 2), (20, 3)]
    assert first.through_ms == 20
    assert pairs(index.due(first.through_ms, 100, 10, limit=2)) == [(30, 4)]


def test_file_layout_is_sixteen_byte_entries_and_cancels_are_negative(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((0x0102, 5)), new_cursor=6)
    index.append(scan(cancels=(Cancellation(at_offset=6, offset=5, deliver_at=0x0102),)), 7)
    raw = bucket_file(tmp_path / "delays", 0).read_bytes()
    assert raw == bytes.fromhex(
        "0000000000000102 0000000000000005 fffffffffffffff9 0000000000000005"
    )


def test_reopen_after_checkpoint_keeps_everything(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0), (30_000, 1)), new_cursor=2)
    index.close()
    reopened = open_index(tmp_path)
    assert reopened.cursor == 2
    assert pairs(reopened.due(0, 40_000, 10)) == [(1500, 0), (30_000, 1)]
    assert (tmp_path / "delays" / CHECKPOINT_NAME).read_text().startswith("0\ncursor 2\n")


def test_a_crash_before_the_checkpoint_rolls_back_to_it_and_reindexing_adds_no_duplicates(
    tmp_path: Path,
) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0)), new_cursor=1)
    index.checkpoint()
    index.append(scan((1600, 1), (1500, 2)), new_cursor=3)  # written, never checkpointed
    # crash: the object is dropped without close
    reopened = open_index(tmp_path)
    assert reopened.cursor == 1
    assert pairs(reopened.due(0, 5000, 10)) == [(1500, 0)]
    reopened.append(scan((1600, 1), (1500, 2)), new_cursor=3)  # the owner re-reads the log
    assert pairs(reopened.due(0, 5000, 10)) == [(1500, 0), (1500, 2), (1600, 1)]
    assert len(bucket_file(tmp_path / "delays", 1000).read_bytes()) == 3 * 16


def test_a_torn_last_entry_is_ignored_and_cut(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0), (1600, 1)), new_cursor=2)
    index.checkpoint()
    path = bucket_file(tmp_path / "delays", 1000)
    with path.open("ab") as file:  # a crash in the middle of the next append
        file.write(bytes.fromhex("00000000000006a4 000000"))
    reopened = open_index(tmp_path)
    assert path.stat().st_size == 2 * 16
    assert pairs(reopened.due(0, 5000, 10)) == [(1500, 0), (1600, 1)]
    reopened.append(scan((1700, 2)), new_cursor=3)
    assert pairs(reopened.due(1600, 5000, 10)) == [(1700, 2)]


def test_a_crash_inside_the_checkpoint_leaves_the_old_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0)), new_cursor=1)
    index.checkpoint()
    index.append(scan((1600, 1)), new_cursor=2)

    def crash(path: Path, data: bytes) -> None:
        raise OSError("power cut before the rename")

    monkeypatch.setattr(delay_checkpoint, "write_atomically", crash)
    with pytest.raises(OSError, match="power cut"):
        index.checkpoint()
    monkeypatch.undo()
    checkpoint = delay_checkpoint.read_checkpoint(tmp_path / "delays" / CHECKPOINT_NAME)
    assert checkpoint is not None
    assert checkpoint.cursor == 1  # a reopen now would cut (1600, 1) and re-index it
    index.checkpoint()  # the failed ticket's files were requeued: this one covers them
    assert pairs(open_index(tmp_path).due(0, 5000, 10)) == [(1500, 0), (1600, 1)]


def test_a_damaged_checkpoint_means_rebuild_from_zero(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0)), new_cursor=1)
    index.close()
    checkpoint = tmp_path / "delays" / CHECKPOINT_NAME
    checkpoint.write_bytes(checkpoint.read_bytes().replace(b"cursor 1", b"cursor 9"))
    reopened = open_index(tmp_path)
    assert reopened.cursor == 0
    assert reopened.bucket_count == 0
    assert not bucket_file(tmp_path / "delays", 1000).exists()


def test_cancel_in_memory_on_disk_and_after_reopen(tmp_path: Path) -> None:
    index = open_index(tmp_path, horizon_ms=0)
    index.advance(now_ms=0)  # nothing loaded: every bucket stays on disk
    index.append(scan((1500, 0), (1500, 1), (90_500, 2)), new_cursor=3)
    cancels = (Cancellation(3, 1, 1500), Cancellation(4, 2, 90_500))
    index.append(scan(cancels=cancels), new_cursor=5)
    assert index.pending(0, 10) == [(1500, 0)]
    assert pairs(index.due(0, 100_000, 10)) == [(1500, 0)]
    index.append(scan((1400, 5), cancels=(Cancellation(6, 0, 1500),)), new_cursor=7)  # loaded
    assert pairs(index.due(0, 100_000, 10)) == [(1400, 5)]
    index.close()
    assert pairs(open_index(tmp_path).due(0, 100_000, 10)) == [(1400, 5)]


def test_truncate_forgets_entries_and_cancels_at_or_above(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0), (2500, 1)), new_cursor=2)
    # one append whose bucket gets a schedule, a cancel and a schedule, in log order
    index.append(scan((1600, 2), (1700, 4), cancels=(Cancellation(3, 0, 1500),)), new_cursor=5)
    assert pairs(index.due(0, 5000, 10)) == [(1600, 2), (1700, 4), (2500, 1)]
    index.truncate_to(3)
    assert index.cursor == 3
    assert pairs(index.due(0, 5000, 10)) == [(1500, 0), (1600, 2), (2500, 1)]
    reopened = open_index(tmp_path)
    assert reopened.cursor == 3
    assert pairs(reopened.due(0, 5000, 10)) == [(1500, 0), (1600, 2), (2500, 1)]
    reopened.truncate_to(1)
    assert reopened.bucket_count == 1
    assert not bucket_file(tmp_path / "delays", 2000).exists()
    reopened.truncate_to(7)  # above the cursor: nothing to do
    assert reopened.cursor == 1


def test_only_buckets_within_the_horizon_are_in_memory(tmp_path: Path) -> None:
    index = open_index(tmp_path, horizon_ms=3 * W)
    index.append(scan(*[(t * 100, t) for t in range(1000)]), new_cursor=1000)  # 100 buckets
    index.close()
    reopened = open_index(tmp_path, horizon_ms=3 * W)
    assert reopened.loaded_entries == 0
    reopened.advance(now_ms=0)
    assert reopened.loaded_entries == 30  # buckets 0, 1000, 2000
    assert reopened.next_due_ms(2950) == 3000  # the next bucket's start: a lower bound
    assert len(reopened.pending(2950, 20)) == 20  # read from disk, not kept
    assert reopened.loaded_entries == 30
    reopened.advance(now_ms=1000)
    assert reopened.loaded_entries == 40
    assert reopened.next_due_ms(2950) == 3000
    assert reopened.next_due_ms(3050) == 3100
    reopened.append(scan((3999, 1000), (50_000, 1001)), new_cursor=1002)
    assert reopened.loaded_entries == 41  # the horizon's bucket took it, the far one did not


def test_pending_pages_in_due_order(tmp_path: Path) -> None:
    index = open_index(tmp_path, horizon_ms=0)
    index.append(scan((5000, 0), (1500, 1), (1500, 2), (9000, 3)), new_cursor=4)
    first = index.pending(0, 2)
    assert first == [(1500, 1), (1500, 2)]
    assert index.pending(first[-1][0], 2, after_offset=first[-1][1]) == [(5000, 0), (9000, 3)]
    assert index.pending(5000, 10) == [(9000, 3)]


def test_next_due_is_none_when_nothing_is_pending(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.advance(now_ms=0)
    assert index.next_due_ms(0) is None
    index.append(scan((1500, 0), (1200, 1)), new_cursor=2)
    assert index.next_due_ms(0) == 1200
    assert index.next_due_ms(1200) == 1500
    assert index.next_due_ms(1500) is None


def test_drop_below_hides_records_deleted_by_retention(tmp_path: Path) -> None:
    index = open_index(tmp_path, horizon_ms=0)
    index.append(scan((1500, 0), (1500, 5), (70_000, 1), (70_000, 6)), new_cursor=7)
    index.due(0, 2000, 10)  # loads the first bucket
    index.drop_below(5)
    assert pairs(index.due(0, 100_000, 10)) == [(1500, 5), (70_000, 6)]
    index.drop_below(9)
    assert index.cursor == 9
    index.close()
    reopened = open_index(tmp_path)
    assert (reopened.log_start, reopened.cursor) == (9, 9)
    assert pairs(reopened.due(0, 100_000, 10)) == []


def test_forget_through_deletes_only_buckets_wholly_in_the_past(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((500, 0), (1500, 1), (2999, 2)), new_cursor=3)
    assert index.forget_through(1998) == 1
    assert index.forget_through(1999) == 1
    assert index.bucket_count == 1
    assert pairs(index.due(0, 5000, 10)) == [(2999, 2)]
    assert not bucket_file(tmp_path / "delays", 1000).exists()


def test_append_refuses_entries_outside_its_range(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 3)), new_cursor=4)
    with pytest.raises(ValueError, match="below the cursor"):
        index.append(scan(), new_cursor=3)
    with pytest.raises(ValueError, match=r"outside \[4, 6\)"):
        index.append(scan((1500, 6)), new_cursor=6)
    with pytest.raises(ValueError, match="outside"):
        index.append(scan(cancels=(Cancellation(2, 3, 1500),)), new_cursor=6)
    assert index.cursor == 4
    assert pairs(index.due(0, 5000, 10)) == [(1500, 3)]


def test_the_files_bucket_width_wins_on_reopen(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0)), new_cursor=1)
    index.close()
    reopened = DelayIndex.open(tmp_path / "delays", bucket_ms=60_000)
    assert reopened.bucket_ms == W
    assert pairs(reopened.due(0, 5000, 10)) == [(1500, 0)]


def test_a_checkpoint_written_on_another_thread_skips_buckets_forgotten_meanwhile(
    tmp_path: Path,
) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0), (5500, 1)), new_cursor=2)
    ticket = index.prepare_checkpoint()
    assert ticket.starts == (1000, 5000)
    index.forget_through(1999)  # the owner goes on while the worker thread fsyncs
    thread = threading.Thread(target=write_checkpoint, args=(ticket,))
    thread.start()
    thread.join()
    reopened = open_index(tmp_path)
    assert reopened.cursor == 2
    assert pairs(reopened.due(0, 9000, 10)) == [(5500, 1)]


def test_open_removes_an_unfinished_checkpoint_write(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.append(scan((1500, 0)), new_cursor=1)
    index.close()
    leftover = tmp_path / "delays" / (CHECKPOINT_NAME + ".tmp")
    leftover.write_bytes(b"0\ncursor 99\n")
    assert open_index(tmp_path).cursor == 1
    assert not leftover.exists()
