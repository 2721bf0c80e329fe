"""The values a partition ``Log`` hands out: append and fetch results, fetch isolation.

Immutable values; safe to pass between threads and tasks. ``FetchDataInfo.records`` is a
``memoryview`` over bytes read from the segment file (no copy); it stays valid after the log
changes.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "FetchDataInfo",
    "FetchIsolation",
    "FlushTicket",
    "LogAppendInfo",
]

#: ListOffsets' special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class FetchIsolation(Enum):
    """How far a read may go: consumers stop at the high watermark, followers at the LEO."""

    HIGH_WATERMARK = "high_watermark"
    LOG_END = "log_end"


class LogAppendInfo(NamedTuple):
    """The outcome of an append: offsets assigned (or, for a retried batch, first assigned)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_start_offset: int
    record_count: int
    duplicate: bool = False


class FlushTicket(NamedTuple):
    """A flush prepared on the owner's thread, to complete on another (``prepare_flush``)."""

    target: int
    generation: int
    fds: list[int]


class FetchDataInfo(NamedTuple):
    """Whole batches read from the log, and the partition's offsets at the time."""

    records: memoryview
    next_offset: int  # after the last returned batch; the requested offset if none
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
