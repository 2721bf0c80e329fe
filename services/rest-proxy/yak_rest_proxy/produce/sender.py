"""The sender of one leader broker (Kafka's ``Sender``): it sends every ready queue that broker
leads in one produce request per acks (a *round*), with up to ``max_in_flight`` rounds under way
(Kafka's ``max.in.flight.requests.per.connection``), and hands each round to the producer
(``RoundHandler``), which drains the queues, sends and settles the answers.

While a round is under way (``outstanding``), queues that get records wait in ``lingering``;
every answer from the broker routes them (see ``producer`` for the adaptive linger). The
proxy's default is one round at a time: measured with ``make bench-peers`` on two cores, five
rounds in flight meant more, smaller requests to the brokers and more replication fetches, and
lower throughput (1 KiB: 17,018 against 19,550 msg/s) and a higher end-to-end p99 at 10,000
msg/s (141 against 90 ms). Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from typing import Protocol

from yak.errors import UnknownServerError, YakError
from yak_rest_proxy.produce.accumulator import PartitionQueue

__all__ = ["RoundHandler", "Sender"]

log = logging.getLogger(__name__)


class RoundHandler(Protocol):
    """What a sender hands its rounds to: the ``Producer``."""

    async def send_round(
        self, broker_id: int, acks: int, queues: list[PartitionQueue], started: float
    ) -> None:
        """Send the queues' batches to ``broker_id`` in one request; settle the answers."""

    def abort_round(self, queues: list[PartitionQueue], error: YakError) -> None:
        """Fail what a broken round held and let the queues be routed again."""

    def release_lingering(self, queue: PartitionQueue) -> None:
        """The broker ``queue`` lingered on answered: route it now."""


class Sender:
    """Sends the ready queues led by one broker: one produce request per round and acks, up to
    ``max_in_flight`` rounds at once (Kafka's ``max.in.flight.requests.per.connection``).

    A queue has at most one batch in flight, so rounds in parallel never reorder a partition;
    they let a record that became ready skip the wait for an unrelated partition's answer, at
    the price of more, smaller requests (see the module docstring for the default).

    ``outstanding`` counts the rounds under way: while it is 0 the broker is idle and a queue
    that gets records is routed at once; otherwise the queue waits in ``lingering`` until the
    next answer from this broker (or its linger timer, or a full batch) routes it."""

    def __init__(self, handler: RoundHandler, broker_id: int, max_in_flight: int) -> None:
        self.broker_id = broker_id
        self.ready: dict[int, PartitionQueue] = {}
        self.lingering: dict[int, PartitionQueue] = {}
        self.outstanding = 0
        self.wake = asyncio.Event()
        self._handler = handler
        self._slots = asyncio.Semaphore(max_in_flight)
        self._rounds: set[asyncio.Task[None]] = set()
        # A context of its own: not that of the request that happened to create the sender
        # (its request id would label every later round).
        self.task = asyncio.get_running_loop().create_task(
            self._run(), context=contextvars.Context()
        )

    def linger(self, queue: PartitionQueue) -> None:
        """``queue`` waits for this broker's next answer (its linger)."""
        self.lingering[id(queue)] = queue

    def stop_lingering(self, queue: PartitionQueue) -> None:
        self.lingering.pop(id(queue), None)

    def enqueue(self, queue: PartitionQueue) -> None:
        self.ready[id(queue)] = queue
        self.wake.set()

    async def aclose(self) -> None:
        tasks = [self.task, *self._rounds]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            await self._slots.acquire()  # a free round first: meanwhile more queues get ready
            started = time.perf_counter()
            self.wake.clear()
            queues = list(self.ready.values())
            self.ready.clear()
            by_acks: dict[int, list[PartitionQueue]] = {}
            for queue in queues:
                by_acks.setdefault(queue.acks, []).append(queue)
            groups = list(by_acks.items())
            for index, (acks, group) in enumerate(groups):
                if index:  # one slot was taken above for the first group
                    await self._slots.acquire()
                    started = time.perf_counter()
                self.outstanding += 1
                task = asyncio.get_running_loop().create_task(self._round(acks, group, started))
                self._rounds.add(task)
                task.add_done_callback(self._rounds.discard)

    async def _round(self, acks: int, group: list[PartitionQueue], started: float) -> None:
        try:
            await self._handler.send_round(self.broker_id, acks, group, started)
        except Exception as exc:  # a bug must fail these records, not this sender
            log.exception("produce round to broker %d failed", self.broker_id)
            self._handler.abort_round(group, UnknownServerError(f"produce failed: {exc!r}"))
        finally:
            self.outstanding -= 1
            self._slots.release()
            # An answer came back: what waited behind this round leaves (in the next round).
            for queue in list(self.lingering.values()):
                self._handler.release_lingering(queue)
