"""``RewriteGate``: the ISR writes fenced by the registration's bytes, and the rewrites of them,
kept apart.

The leader's ISR changes compare ``brokers/<id>`` with the exact bytes this process last wrote
there (``BrokerRegistrar.fence``, ``replication.isr_writer``). A rewrite of the registration by
the same process (its load sample, ``shutting_down``) changes those bytes: an ISR write that
took the fence before the rewrite and reaches etcd after it fails its compare and is read as
"fenced by a newer process". So the two never overlap: ISR writes *share* the gate (any number
at once, from before the fence is read until the write is answered); a rewrite holds it
*alone* — it waits for the ISR writes in flight to end and holds new ones back until its own
write is answered (one etcd round trip). A rewrite waiting holds new ISR writes back too, so a
steady stream of them cannot starve it.

Single event loop (no lock: the counters change between awaits only).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["RewriteGate"]


class RewriteGate:
    """Shared by ISR writes, held alone by registration rewrites (see the module doc)."""

    def __init__(self) -> None:
        self._sharing = 0
        self._rewriting = False
        #: Set while no ISR write holds the gate.
        self._idle = asyncio.Event()
        self._idle.set()
        #: Set while no rewrite holds (or waits for) the gate.
        self._open = asyncio.Event()
        self._open.set()

    @property
    def sharing(self) -> int:
        """ISR writes holding the gate now."""
        return self._sharing

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        """Hold the gate beside other ISR writes (waits while a rewrite holds it)."""
        while self._rewriting:
            await self._open.wait()
        self._sharing += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._sharing -= 1
            if not self._sharing:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def alone(self) -> AsyncIterator[None]:
        """Hold the gate alone: once the ISR writes in flight ended, none starting meanwhile."""
        while self._rewriting:
            await self._open.wait()
        self._rewriting = True
        self._open.clear()
        try:
            while self._sharing:
                await self._idle.wait()
            yield
        finally:
            self._rewriting = False
            self._open.set()
