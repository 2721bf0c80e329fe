"""Helpers for the replication machine tests: partition states, real logs, one-record batches."""

from __future__ import annotations

from pathlib import Path

from yak.metadata.models import PartitionState
from yak.record import RecordInput, encode_batch
from yak_broker.storage.log import FetchIsolation, Log

__all__ = ["LAG", "append", "epochs_of", "log_bytes", "make_log", "state", "write_history"]

LAG = 1_000


def state(**changes: object) -> PartitionState:
    """Partition ``t-0`` led by broker 0 in epoch 1, replicas and ISR (0, 1, 2), with changes."""
    base = PartitionState(
        topic="t",
        partition=0,
        leader=0,
        leader_epoch=1,
        partition_epoch=1,
        replicas=(0, 1, 2),
        isr=(0, 1, 2),
    )
    return base.model_copy(update=changes)


def make_log(folder: Path, name: str = "t-0") -> Log:
    return Log.open(folder / name)


def append(log: Log, epoch: int, *values: bytes) -> None:
    """One batch per value, written as the leader of ``epoch`` (epochs end on batch bounds)."""
    for value in values:
        log.append(encode_batch([RecordInput(value=value, timestamp=0)]), epoch)


def write_history(log: Log, history: list[tuple[int, int]]) -> None:
    """``history``: ``(epoch, record count)`` runs, oldest first. A record is named by its
    epoch and offset: one leader per epoch writes it, so replicas share it byte for byte."""
    for epoch, count in history:
        for _ in range(count):
            append(log, epoch, f"e{epoch}@{log.log_end_offset}".encode())


def log_bytes(log: Log, offset: int = 0) -> bytes:
    """Every batch of ``log`` from ``offset`` (as a leader reads for a follower)."""
    out = b""
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
        if not data.records:
            break
        out += bytes(data.records)
        offset = data.next_offset
    return out


def epochs_of(log: Log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.leader_epochs.entries]
