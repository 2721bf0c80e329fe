"""``DrainingServer``: uvicorn that moves a service's work away before it stops serving.

uvicorn's own SIGTERM/SIGINT handling stops accepting connections first and runs the app's
lifespan shutdown after: whatever the app does on the way out happens with its listener
closed. A broker must do the opposite (Kafka's controlled shutdown): hand its partition
leaderships to other brokers *while it still answers*, so that clients asking it get
``NOT_LEADER_OR_FOLLOWER`` and move to the new leader instead of a refused connection.

Signals, once the server has started:

1. the first SIGTERM or SIGINT starts ``drain()`` (on the next tick of uvicorn's main loop,
   within 100 ms) and holds the signal back: every listener keeps serving;
2. when ``drain()`` returns (or fails: logged), the held signal is handed to uvicorn, which
   stops as usual — closes its listener, lets requests finish, runs the lifespan shutdown —
   and re-raises the signal at the end, so the process still ends by it;
3. a second signal during the drain hands the held one over at once: ``drain()`` is
   cancelled when uvicorn's shutdown begins (the fast path); after that uvicorn's rules
   apply (another SIGINT skips the graceful wait and the lifespan shutdown).

A signal during startup goes to uvicorn straight away (nothing to drain yet). The signal
handler only records (no lock, no logging); the drain runs as a task on the server's event
loop. ``drain()`` must
bound its own duration (the broker's: ``controlled_shutdown_timeout_s``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn

__all__ = ["Drain", "DrainingServer"]

_log = logging.getLogger(__name__)

#: What a service does, still serving, between the stop signal and the listener's close.
Drain = Callable[[], Awaitable[None]]


class DrainingServer(uvicorn.Server):
    """A ``uvicorn.Server`` that runs ``drain`` on the first stop signal before it stops
    serving (see the module doc)."""

    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        super().__init__(config)
        self._drain = drain
        self._held: int | None = None  # the first signal, until the drain is over
        self._draining: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.started and not self.should_exit:
            if self._held is None:
                self._held = sig  # the main loop's next tick starts the drain
                return
            super().handle_exit(self._held, frame)  # a second one: stop now
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._held is not None and self._draining is None and not self.should_exit:
            _log.info(
                "%s: draining before the listeners stop (send it again to stop at once)",
                _name(self._held),
            )
            self._draining = asyncio.get_running_loop().create_task(self._drain_then_exit())
        return await super().on_tick(counter)

    async def _drain_then_exit(self) -> None:
        try:
            await self._drain()
        except Exception:
            _log.exception("the drain failed; stopping anyway")
        if not self.should_exit and self._held is not None:
            super().handle_exit(self._held, None)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        draining, self._draining = self._draining, None
        if draining is not None and not draining.done():
            _log.warning("stopping without waiting for the drain to finish")
            draining.cancel()
            await asyncio.wait([draining])
        await super().shutdown(sockets)


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
