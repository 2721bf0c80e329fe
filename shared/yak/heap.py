"""``HeapFreezer``: keep what a service holds for long out of the collector's full passes.

CPython's cyclic collector walks every tracked object of the oldest generation in a full
collection, and the event loop waits. A broker with 20,000 partitions RF 3 holds millions of
tracked objects for as long as it hosts its replicas (logs, segments, indexes, partition
states), and its full collections took 250 ms to 1 s each — measured with
``yak_gc_pause_seconds{generation="2"}``: 13 of 14 over 250 ms on each broker in the first
eight minutes — the largest stalls of its loop while idle (issue 19). ``gc.freeze()`` moves
every object alive to a permanent generation that collections skip; young collections and
the objects allocated afterwards are collected as before.

When to freeze, and the one cost of it:

- **after a bulk of long-lived objects settles** (``grew``: logs loaded at start, new replicas
  created): ``settle_s`` after the last such call, freeze. Freezing takes no collection: it
  moves lists, in microseconds.
- **after long-lived objects are dropped** (``shrank``: logs deleted): a frozen object that
  dies inside a reference cycle is never collected while frozen. So when deletions settle,
  unfreeze — the next full collection (one long pause, as without freezing) frees those
  cycles — and freeze again right after that collection.

Single event loop (the loop the first call runs on), except the collector's callback, which
runs on whichever thread collected and hands over with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

__all__ = ["HeapFreezer"]

_log = logging.getLogger(__name__)
_OLDEST = 2


class HeapFreezer:
    """Freezes the heap when a bulk change settles; see the module doc."""

    def __init__(self, settle_s: float = 2.0) -> None:
        self.settle_s = settle_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._shrunk = False
        #: Unfrozen after deletions: freeze again after the next full collection.
        self._refreeze = False
        self._watching = False
        #: Freezes done (a count for tests and logs).
        self.freezes = 0

    def grew(self) -> None:
        """Long-lived objects were added: freeze once no change came for ``settle_s``."""
        self._restart_timer()

    def shrank(self) -> None:
        """Long-lived objects were dropped: unfreeze once no change came for ``settle_s``, and
        freeze again after the collection that frees them."""
        if not self.freezes:
            return  # nothing was frozen: the collector sees everything already
        self._shrunk = True
        self._restart_timer()

    def close(self) -> None:
        """Stop: no freeze or unfreeze is pending any more (what is frozen stays frozen)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._refreeze = False
        if self._watching:
            gc.callbacks.remove(self._on_collection)
            self._watching = False

    def _restart_timer(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(self.settle_s, self._settled)

    def _settled(self) -> None:
        self._timer = None
        if self._shrunk:
            self._shrunk = False
            gc.unfreeze()
            self._refreeze = True
            if not self._watching:
                gc.callbacks.append(self._on_collection)
                self._watching = True
            _log.info("heap unfrozen: the next full collection frees what was deleted")
        elif not self._refreeze:
            self._freeze()

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation") == _OLDEST and self._refreeze:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._after_full_collection)

    def _after_full_collection(self) -> None:
        if self._refreeze and not self._shrunk:
            self._refreeze = False
            self._freeze()

    def _freeze(self) -> None:
        gc.freeze()
        self.freezes += 1
        _log.info(
            "heap frozen: %d objects out of the collector's full passes", gc.get_freeze_count()
        )
