"""HeapFreezer: freeze when growth settles; after deletions unfreeze, and freeze again only
after the full collection that frees what died."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from yak.heap import HeapFreezer


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's heap is left as it was found


async def _settle(freezer: HeapFreezer) -> None:
    await asyncio.sleep(freezer.settle_s * 3)


async def test_growth_freezes_once_it_settles() -> None:
    freezer = HeapFreezer(settle_s=0.02)
    freezer.grew()
    await asyncio.sleep(0.01)
    freezer.grew()  # still growing: the timer starts again
    await asyncio.sleep(0.01)
    assert gc.get_freeze_count() == 0
    await _settle(freezer)
    assert freezer.freezes == 1
    assert gc.get_freeze_count() > 0
    freezer.close()


async def test_deletions_unfreeze_until_a_full_collection_has_run() -> None:
    freezer = HeapFreezer(settle_s=0.01)
    freezer.grew()
    await _settle(freezer)
    assert gc.get_freeze_count() > 0

    class Node:
        other: object = None

    dead = Node()
    dead.other = Node()
    dead.other.other = dead  # a cycle: only the collector frees it
    gc.freeze()  # frozen with the rest (as a deleted log's objects would be)
    del dead
    freezer.shrank()
    await _settle(freezer)
    assert gc.get_freeze_count() == 0  # thawed: the next full collection can free the cycle
    freezer.grew()  # growth meanwhile does not freeze before that collection
    await _settle(freezer)
    assert gc.get_freeze_count() == 0
    assert gc.collect() >= 2  # the full collection frees the cycle...
    await asyncio.sleep(0)  # ...and the callback hands the refreeze to the loop
    await asyncio.sleep(0)
    assert gc.get_freeze_count() > 0
    assert freezer.freezes == 2
    freezer.close()


async def test_deletions_before_any_freeze_change_nothing() -> None:
    freezer = HeapFreezer(settle_s=0.01)
    freezer.shrank()
    await _settle(freezer)
    assert (freezer.freezes, gc.get_freeze_count()) == (0, 0)
    assert freezer._on_collection not in gc.callbacks  # no refreeze waits for a collection
    freezer.close()


async def test_close_cancels_what_is_pending() -> None:
    freezer = HeapFreezer(settle_s=0.01)
    freezer.grew()
    freezer.close()
    await _settle(freezer)
    assert (freezer.freezes, gc.get_freeze_count()) == (0, 0)
    assert freezer._on_collection not in gc.callbacks
