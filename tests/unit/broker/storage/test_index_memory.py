"""What an index costs a broker that hosts many replicas: every segment has an offset index
and a time index, and a broker of 20,000 replicas holds at least 40,000 of them. Their
fixed part stays a few KB (a compiled block format of 128 entries per index made it ~20 KB a
pair, ~350 MB on such a broker: docs/scale.md)."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from yak_broker.storage.offset_index import OffsetIndex
from yak_broker.storage.time_index import TimeIndex

MAX_BYTES = 10 * 1024 * 1024
PAIRS = 200


def test_an_index_pair_costs_a_few_kilobytes(tmp_path: Path) -> None:
    kept = [
        (
            OffsetIndex(tmp_path / "warm.index", 0, MAX_BYTES),
            TimeIndex(tmp_path / "warm.timeindex", 0, MAX_BYTES),
        )
    ]
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i in range(PAIRS):
            kept.append(
                (
                    OffsetIndex(tmp_path / f"{i}.index", 0, MAX_BYTES),
                    TimeIndex(tmp_path / f"{i}.timeindex", 0, MAX_BYTES),
                )
            )
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(kept) == PAIRS + 1
    assert grown / PAIRS < 8_000, f"{grown / PAIRS:,.0f} bytes per offset and time index pair"
