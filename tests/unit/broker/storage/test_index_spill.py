"""Indexes larger than their in-memory tail: entries spilled to the file, found through the
summary and the shared block cache, checked against a plain list after random appends,
lookups, truncations and reloads."""

from __future__ import annotations

import bisect
import random
from pathlib import Path

import pytest

from yak_broker.storage.index_file import BLOCK_ENTRIES, BLOCKS, CorruptIndexError
from yak_broker.storage.offset_index import OffsetIndex
from yak_broker.storage.time_index import TimeIndex

BASE = 1_000
MAX_BYTES = 8 * 100_000


def _offset_model_lookup(model: list[tuple[int, int]], target: int) -> tuple[int, int]:
    slot = bisect.bisect_right([k for k, _ in model], target - BASE) - 1
    return (BASE, 0) if slot < 0 else (BASE + model[slot][0], model[slot][1])


def _within(model: list[tuple[int, int]], max_position: int, max_offset: int) -> int | None:
    by_position = bisect.bisect_right([v for _, v in model], max_position)
    by_offset = bisect.bisect_left([k for k, _ in model], max_offset - BASE)
    slot = min(by_position, by_offset) - 1
    return model[slot][1] if slot >= 0 else None


@pytest.mark.parametrize("seed", range(8))
def test_the_offset_index_answers_as_a_list_would(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "x.index"
    index = OffsetIndex(path, BASE, MAX_BYTES)
    model: list[tuple[int, int]] = []
    relative = position = deepest = longest = 0
    for step in range(6_000):
        action = rng.random()
        if action < 0.8:
            relative += rng.randint(1, 5)
            position += rng.randint(1, 5)
            index.append(BASE + relative, position)
            model.append((relative, position))
        elif action < 0.803 and model:
            cut = BASE + model[max(len(model) - rng.randint(1, 700), 0)][0]
            deepest = max(deepest, len(model) - sum(BASE + e[0] < cut for e in model))
            index.truncate_to(cut)
            model = [e for e in model if BASE + e[0] < cut]
            relative, position = model[-1] if model else (0, 0)
        elif action < 0.81:
            index.close()
            index = OffsetIndex(path, BASE, MAX_BYTES)
        else:
            target = BASE + rng.randint(-2, relative + 2)
            assert index.lookup(target) == _offset_model_lookup(model, target), step
            max_position = rng.randint(0, position + 2)
            assert index.last_batch_start_within(max_position, target) == _within(
                model, max_position, target
            )
        assert index.entries == len(model)
        longest = max(longest, len(model))
        assert index.resident_entries < 2 * BLOCK_ENTRIES + len(model) // BLOCK_ENTRIES + 1
    assert [index.entry(i) for i in range(index.entries)] == model
    assert longest > 4 * BLOCK_ENTRIES  # it spilled
    assert deepest > 2 * BLOCK_ENTRIES  # and was cut below its tail
    assert (index.last_offset, index.last_position) == (
        (BASE + model[-1][0], model[-1][1]) if model else (BASE, 0)
    )
    index.close()
    assert path.stat().st_size == 8 * len(model)


@pytest.mark.parametrize("seed", range(8))
def test_the_time_index_answers_as_a_list_would(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, BASE, MAX_BYTES)
    model: list[tuple[int, int]] = []
    timestamp = offset = deepest = longest = 0
    for step in range(6_000):
        action = rng.random()
        if action < 0.8:
            timestamp += rng.randint(1, 3)
            offset += rng.randint(0, 2)  # offsets may repeat
            index.maybe_append(timestamp, BASE + offset)
            model.append((timestamp, offset))
        elif action < 0.803 and model:
            cut = BASE + model[max(len(model) - rng.randint(1, 700), 0)][1]
            deepest = max(deepest, len(model) - sum(BASE + e[1] < cut for e in model))
            index.truncate_to(cut)
            model = [e for e in model if BASE + e[1] < cut]
            timestamp, offset = model[-1] if model else (0, 0)
        elif action < 0.81:
            index.close()
            index = TimeIndex(path, BASE, MAX_BYTES)
        else:
            when = rng.randint(-2, timestamp + 2)
            slot = bisect.bisect_right([t for t, _ in model], when - 1) - 1
            expected = BASE if slot < 0 else BASE + model[slot][1]
            assert index.lookup_before(when) == expected, step
        assert index.entries == len(model)
        longest = max(longest, len(model))
    assert [index.entry(i) for i in range(index.entries)] == model
    assert longest > 4 * BLOCK_ENTRIES  # it spilled
    assert deepest > 2 * BLOCK_ENTRIES  # and was cut below its tail
    index.close()


def test_a_big_index_keeps_a_summary_not_its_entries(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", BASE, MAX_BYTES)
    for n in range(1, 50_001):
        index.append(BASE + n, 10 * n)
    assert index.entries == 50_000
    assert index.resident_entries <= 2 * BLOCK_ENTRIES + 50_000 // BLOCK_ENTRIES
    misses = BLOCKS.misses
    assert index.lookup(BASE + 12_345) == (BASE + 12_345, 123_450)
    assert index.lookup(BASE + 12_346) == (BASE + 12_346, 123_460)  # the same block: cached
    assert BLOCKS.misses == misses + 1
    index.close()
    reloaded = OffsetIndex(tmp_path / "x.index", BASE, MAX_BYTES)
    assert reloaded.resident_entries <= 2 * BLOCK_ENTRIES + 50_000 // BLOCK_ENTRIES
    assert reloaded.lookup(BASE + 7) == (BASE + 7, 70)
    assert reloaded.lookup(BASE + 60_000) == (BASE + 50_000, 500_000)
    reloaded.close()


def test_unordered_values_deep_in_a_file_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    entries = [(n, 10 * n) for n in range(1, 1_000)]
    entries[700] = (701, 5)  # a position going back, far below the tail
    path.write_bytes(b"".join(k.to_bytes(4, "big") + v.to_bytes(4, "big") for k, v in entries))
    with pytest.raises(CorruptIndexError, match="values not increasing at 700"):
        OffsetIndex(path, 0, MAX_BYTES)
