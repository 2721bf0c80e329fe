"""How each service runs CPython's cyclic garbage collector: thresholds chosen per service by
measurement, and the heap start-up built kept out of every collection (issue 34).

A produce or a poll allocates short-lived container objects (records, dicts, tuples,
coroutines) that die by reference counting within the request. The collector runs whenever
*net* container allocations since its last young pass reach ``threshold0``; a pass walks
every object of its generation and the younger ones while the event loop waits
(``yak_gc_pause_seconds``, ``yak.observability.runtime``), so its pause grows with the
threshold. A full pass walks everything: after start-up that is the imported modules, the
app, its routes, clients and caches — over 130,000 objects in the rest-proxy that live as
long as the process.

- **Thresholds** (``gc.set_threshold``): ``YAK_GC_THRESHOLDS`` (``"1000,10,1000"``: one to
  three positive integers, the generations' thresholds in order; the ones left out keep the
  service's default), else ``DEFAULT_THRESHOLDS`` for the service — the values measured in
  docs/performance.md ("GC off the hot path"). Young passes stay short (they walk at most
  ``threshold0`` objects) and full passes rare (CPython also waits until the long-lived
  objects grew by a quarter since the last full pass).
- **Freezing** (``gc.freeze``): once the app's lifespan has started — modules imported,
  clients open, caches loaded —, one full collection frees what start-up left as garbage, and
  everything alive moves to the permanent generation that no collection walks. Objects made
  afterwards are collected as before. ``YAK_GC_FREEZE=0`` leaves the heap unfrozen. The
  broker also freezes its logs once they settle (``yak.heap.HeapFreezer``): its unfreeze and
  refreeze cover what this froze.

Process-wide state (the collector is one per process): ``GcTuning.apply`` is called once, from
a service's ``main`` before the app is served; the freeze runs on the event loop at the end of
the app's lifespan start-up (``frozen_after_startup``), before uvicorn accepts a connection.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette

__all__ = [
    "DEFAULT_THRESHOLDS",
    "GC_FREEZE_ENV",
    "GC_THRESHOLDS_ENV",
    "GcTuning",
    "freeze_now",
    "frozen_after_startup",
    "parse_thresholds",
]

_log = logging.getLogger(__name__)

GC_THRESHOLDS_ENV = "YAK_GC_THRESHOLDS"
GC_FREEZE_ENV = "YAK_GC_FREEZE"
Thresholds = tuple[int, int, int]

#: Per service, measured (docs/performance.md, "GC off the hot path"); CPython's own default,
#: (700, 10, 10), for a service not listed. What a request leaves alive is alive: the proxy's
#: produce and poll paths make no reference cycles, so every object a young pass walks moves
#: on, and a pass of generation 1 walks up to ``threshold0 * (threshold1 + 1)`` objects. Both
#: are kept small (a young pass ≤ 2,000 objects, ~0.5 ms; a generation-1 pass ≤ 6,000, ~1 ms);
#: a high ``threshold2`` makes a full pass (everything not frozen) rare. (50,000, 50, 100), the
#: proxy's earlier setting, made one young pass every ~15 s at 1,000 msg/s that walked 50,000
#: objects for 10-25 ms; (1,000, 10, 1,000) passes of generation 1 of ~5 ms on a loaded
#: machine; (1,000, 4, 1,000) walked the objects of 500-record requests more often (more CPU
#: per record than (2,000, 2, 1,000) in the same sitting).
DEFAULT_THRESHOLDS: Mapping[str, Thresholds] = {
    "rest-proxy": (2_000, 2, 1_000),
    "broker": (700, 10, 1_000),
    "coordinator": (700, 10, 1_000),
}
_CPYTHON: Thresholds = (700, 10, 10)


def parse_thresholds(text: str, default: Thresholds = _CPYTHON) -> Thresholds:
    """The thresholds ``text`` names: one to three comma-separated positive integers, the
    generations' thresholds in order; the ones left out are ``default``'s. ValueError names
    the variable and what it holds when ``text`` is anything else (0 is refused: it would turn
    the collector off, and reference cycles would never be freed)."""
    parts = [part.strip() for part in text.split(",")]
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        raise ValueError(
            f"{GC_THRESHOLDS_ENV} is one to three comma-separated positive integers "
            f"(e.g. 50000,20,1000), not {text!r}"
        )
    values = [int(part) for part in parts]
    if min(values) < 1:
        raise ValueError(f"{GC_THRESHOLDS_ENV}: every threshold is at least 1, not {text!r}")
    first, second, third = (*values, *default[len(values) :])
    return first, second, third


@dataclass(frozen=True)
class GcTuning:
    """The collector's settings of one service: its ``thresholds``, and whether the heap is
    frozen once the app has started (``freeze``)."""

    service: str
    thresholds: Thresholds
    freeze: bool = True

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> GcTuning:
        """``service``'s settings: ``YAK_GC_THRESHOLDS`` and ``YAK_GC_FREEZE`` (``0``,
        ``false`` or ``no`` turn freezing off) over ``DEFAULT_THRESHOLDS``."""
        env = os.environ if env is None else env
        default = DEFAULT_THRESHOLDS.get(service, _CPYTHON)
        text = env.get(GC_THRESHOLDS_ENV, "").strip()
        thresholds = parse_thresholds(text, default) if text else default
        freeze = env.get(GC_FREEZE_ENV, "1").strip().lower() not in ("0", "false", "no")
        return cls(service, thresholds, freeze)

    def apply(self, app: Starlette) -> None:
        """Set the thresholds now, and freeze the heap once ``app`` has started (when
        ``freeze``; ``frozen_after_startup``)."""
        gc.set_threshold(*self.thresholds)
        _log.info("%s: gc thresholds %s, freeze %s", self.service, self.thresholds, self.freeze)
        if self.freeze:
            frozen_after_startup(app)


def frozen_after_startup(app: Starlette) -> None:
    """Make ``app``'s lifespan start-up end with a full collection and ``gc.freeze()`` (see
    the module docstring): once the app's own start-up has run, before the server accepts a
    connection. The lifespan is wrapped rather than the ASGI app: nothing is added to a
    request's path (a wrapping coroutine would be one more allocation per request)."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(started: Starlette) -> AsyncIterator[Any]:
        async with inner(started) as state:
            freeze_now()
            yield state

    app.router.lifespan_context = lifespan


def freeze_now() -> int:
    """Collect, then freeze what is alive; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    _log.info("heap frozen after start-up: %d objects out of the collector's passes", frozen)
    return frozen
