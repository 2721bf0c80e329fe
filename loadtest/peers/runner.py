"""Runs one workload against one driver and measures it (see ``histogram`` for how).

Producers and consumers are asyncio tasks of this process. A producer hands the driver batches
of at most ``BATCH_MAX`` messages, with at most ``IN_FLIGHT`` batches unacknowledged; a fixed
rate is kept by a token bucket ``BUCKET_MAX`` deep checked every ``TICK_S`` (so batches at
10,000 msg/s hold about 50 messages; the payload stamp is taken when a batch is handed over,
so this pacing is not latency). A failed batch counts its messages as errors and the producer
goes on.

Phases: **setup** (topics, consumers joined at the first message, producers), then by kind:

- *max rate* (``producer_rate`` 0): the ``RateSearch`` steps (``step_s`` each, all warm-up),
  producers paused until consumers have everything (at most ``SEARCH_DRAIN_LIMIT_S``), then
  ``warmup_s`` and ``duration_s`` measured at the rate found;
- *fixed rate*: ``warmup_s`` at the rate, then ``duration_s`` measured;
- *backlog*: ``backlog_records`` per topic are produced as fast as possible with no
  subscription, then the consumers subscribe from the first message and drain them all
  (from creating the consumers to the last delivery, at most ``DRAIN_LIMIT_S``).

Then producers stop, consumers get ``GRACE_S`` to catch up, and topics are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from rich.progress import Progress, TaskID

from loadtest.peers.drivers.base import Consumer, Driver, Producer, keys, make_payload
from loadtest.peers.histogram import Tally, Windows
from loadtest.peers.rate_search import RateSearch, Step
from loadtest.peers.result import RunResult, summarize
from loadtest.peers.workload import Workload

_log = logging.getLogger(__name__)
__all__ = ["MeasureHook", "Runner", "no_hook"]

BATCH_MAX = 500
IN_FLIGHT = 8
TICK_S = 0.005
#: The token bucket's depth: a tick may hand over several batches. A bucket of one batch
#: capped a producer at ``BATCH_MAX`` per tick — ~70,000-90,000 msg/s once the loop's ticks
#: ran 5.5-7 ms —, so the search could not find a higher rate for a system that had one.
BUCKET_MAX = IN_FLIGHT * BATCH_MAX
GRACE_S = 3.0
STOP_S = 5.0
DRAIN_LIMIT_S = 180.0
SEARCH_DRAIN_LIMIT_S = 60.0
#: Wraps the measured phase (e.g. a profiler); gets the phase's length in seconds.
MeasureHook = Callable[[float], AbstractAsyncContextManager[None]]


@contextlib.asynccontextmanager
async def no_hook(_duration_s: float) -> AsyncIterator[None]:
    yield


class Runner:
    """One run (see the module docstring); ``await Runner(...).run()`` → ``RunResult``."""

    def __init__(
        self,
        driver: Driver,
        workload: Workload,
        *,
        step_s: float = 5.0,
        max_steps: int = 6,
        progress: Progress | None = None,
        measure_hook: MeasureHook = no_hook,
    ) -> None:
        self.driver = driver
        self.workload = workload
        self.step_s = step_s
        self.search = RateSearch(max_steps=max_steps)
        self.progress = progress
        self.measure_hook = measure_hook
        self.windows = Windows()
        self.step = Tally()
        self.total = Tally()
        self._rate: float | None = 0.0  # msg/s over all producers; None: unthrottled
        self._budget: int | None = None  # messages left to produce (backlog)
        self._stopping = False
        self._consumers_stopping = False
        self._topics: list[str] = []
        self._consumers: list[Consumer] = []
        self._consumer_tasks: list[asyncio.Task[None]] = []
        self._caught_up = asyncio.Event()
        self._expected: int | None = None  # deliveries that set ``_caught_up``
        self._task: TaskID | None = None
        self._phase = "setup"

    # --- recording ------------------------------------------------------------------------

    def _published(self, now_ns: int, count: int, failed: int, latency_ms: float) -> None:
        for tally in (self.step, self.total, self.windows.at(now_ns)):
            if tally is not None:
                tally.published_batch(count, latency_ms)
                tally.errors += failed

    def _consumed(self, now_ns: int, stamps: list[int]) -> None:
        pairs = [((now_ns - sent) / 1e6, n) for sent, n in Counter(stamps).items()]
        for tally in (self.step, self.total, self.windows.at(now_ns)):
            if tally is not None:
                tally.consumed_batch(pairs)
        if self._expected is not None and self.total.consumed >= self._expected:
            self._caught_up.set()

    # --- clients --------------------------------------------------------------------------

    async def _produce(self, producer: Producer, topic_index: int, producers: int) -> None:
        in_flight = asyncio.Semaphore(IN_FLIGHT)
        sends: set[asyncio.Task[None]] = set()
        key_of = keys(self.workload.key_distributor, seed=topic_index)
        credit, last, last_rate = 0.0, time.monotonic(), self._rate
        while not self._stopping:
            now = time.monotonic()
            rate = self._rate
            if rate != last_rate:  # a new step starts with an empty bucket
                credit, last_rate = 0.0, rate
            if rate is None:
                count = BATCH_MAX
            else:
                credit = min(credit + (now - last) * rate / producers, float(BUCKET_MAX))
                count = min(int(credit), BATCH_MAX)
            last = now
            if self._budget is not None:
                count = min(count, self._budget)
                if not self._budget:
                    break
            if count < 1:
                await asyncio.sleep(TICK_S)
                continue
            await in_flight.acquire()
            if rate is not None:
                credit -= count
            if self._budget is not None:
                self._budget -= count
            sent_ns = time.monotonic_ns()
            payload = make_payload(self.workload.message_size, sent_ns)
            batch = [(next(key_of), payload) for _ in range(count)]
            task = asyncio.create_task(self._send(producer, batch, sent_ns, in_flight))
            sends.add(task)
            task.add_done_callback(sends.discard)
        await asyncio.gather(*sends)

    async def _send(
        self,
        producer: Producer,
        batch: list[tuple[str | None, bytes]],
        sent_ns: int,
        in_flight: asyncio.Semaphore,
    ) -> None:
        try:
            failed = await producer.send(batch)
        except Exception as exc:  # any failure of a batch is counted (and logged), not fatal
            _log.warning("%s: a batch of %d failed: %r", self.driver.name, len(batch), exc)
            failed = len(batch)
        finally:
            in_flight.release()
        now = time.monotonic_ns()
        self._published(now, len(batch) - failed, failed, (now - sent_ns) / 1e6)

    async def _consume(self, consumer: Consumer) -> None:
        # A flag, not cancellation, ends the loop: some clients turn a cancelled read into
        # an ordinary error, which the loop would count and retry forever.
        while not self._consumers_stopping:
            try:
                stamps = await consumer.receive()
            except Exception as exc:  # counted and logged; the consumer tries again
                _log.warning("%s: a receive failed: %r", self.driver.name, exc)
                self.total.errors += 1
                await asyncio.sleep(0.1)
                continue
            if stamps:
                self._consumed(time.monotonic_ns(), stamps)

    # --- phases ---------------------------------------------------------------------------

    async def _hold(self, phase: str, seconds: float) -> None:
        """Keep the current load for ``seconds``, showing ``phase`` on the progress bar."""
        self._phase = phase
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._show()
            await asyncio.sleep(min(left, 0.5))

    def _show(self) -> None:
        if self.progress is None or self._task is None:
            return
        rate = "max" if self._rate is None else f"{self._rate:,.0f}/s"
        self.progress.update(
            self._task,
            description=f"{self.driver.name:9} {self.workload.name} · {self._phase} @ {rate}",
            completed=self.total.published,
            total=max(self.total.published, 1),
        )

    async def _search(self) -> None:
        target: float | None = None
        while True:
            self._rate, self.step = target, Tally()
            started = time.monotonic()
            await self._hold(f"search step {len(self.search.steps) + 1}", self.step_s)
            elapsed = time.monotonic() - started
            subscriptions = self.workload.subscriptions_per_topic
            step = Step(
                target,
                self.step.published / elapsed,
                self.step.consumed / elapsed / subscriptions,
                self.step.publish_latency.percentile(99.0),
            )
            next_target = self.search.observe(step)
            if next_target is None:
                return
            target = next_target

    async def _drain_search_backlog(self) -> None:
        """With producers paused, wait (at most ``SEARCH_DRAIN_LIMIT_S``) until consumers have
        every published message, so a backlog left by the search is not measured."""
        self._phase, rate, self._rate = "drain search backlog", self._rate, 0.0
        subscriptions = self.workload.subscriptions_per_topic
        deadline = time.monotonic() + SEARCH_DRAIN_LIMIT_S
        while time.monotonic() < deadline:
            if self.total.consumed >= self.total.published * subscriptions:
                break
            self._show()
            await asyncio.sleep(0.2)
        self._rate = rate

    async def _measure(self) -> None:
        async with self.measure_hook(self.workload.duration_s):
            self.windows.start(time.monotonic_ns())
            await self._hold("measure", self.workload.duration_s)
            self.windows.stop(time.monotonic_ns())

    async def _backlog(self, producers: list[asyncio.Task[None]], deliveries: int) -> float:
        """Produce the backlog, then subscribe and drain it; the seconds the drain took (from
        creating the consumers — joining a group is part of draining — to the last record)."""
        self.windows.start(time.monotonic_ns())
        self._phase = "produce backlog"
        while not all(p.done() for p in producers):
            self._show()
            await asyncio.sleep(0.2)
        self._phase = "drain"
        started = time.monotonic()
        await self._start_consumers()
        while self.total.consumed < deliveries and time.monotonic() - started < DRAIN_LIMIT_S:
            self._show()
            await asyncio.sleep(0.05)
        drain_s = time.monotonic() - started
        self.windows.stop(time.monotonic_ns())
        return drain_s

    async def _start_consumers(self) -> None:
        """Every subscription's consumers, reading from each topic's first message."""
        w = self.workload
        for topic in self._topics:
            for s in range(w.subscriptions_per_topic):
                for _ in range(w.consumers_per_subscription):
                    consumer = await self.driver.create_consumer(topic, f"sub-{topic}-{s}")
                    self._consumers.append(consumer)
                    self._consumer_tasks.append(asyncio.create_task(self._consume(consumer)))

    async def run(self) -> RunResult:
        """Run the workload (see the module docstring); topics are deleted at the end."""
        w = self.workload
        self.driver.configure(w)
        run_id = uuid.uuid4().hex[:6]
        self._topics = [f"peers-{run_id}-{t}" for t in range(w.topics)]
        if self.progress is not None:
            self._task = self.progress.add_task(f"{self.driver.name} {w.name}", total=None)
        for topic in self._topics:
            await self.driver.create_topic(topic, w.partitions_per_topic)
        producers = [
            await self.driver.create_producer(topic)
            for topic in self._topics
            for _ in range(w.producers_per_topic)
        ]
        if w.backlog_records:  # consumers subscribe once the backlog is written
            self._rate, self._budget = None, w.backlog_records * w.topics
        else:
            await self._start_consumers()
            self._rate = float(w.producer_rate) if w.producer_rate else 0.0
        producer_tasks = [
            asyncio.create_task(self._produce(p, i // w.producers_per_topic, len(producers)))
            for i, p in enumerate(producers)
        ]
        drain_s = 0.0
        try:
            if w.backlog_records:
                deliveries = w.backlog_records * w.topics * w.subscriptions_per_topic
                drain_s = await self._backlog(producer_tasks, deliveries)
            else:
                if w.max_rate:
                    await self._search()
                    self._rate = self.search.best
                    await self._drain_search_backlog()
                await self._hold("warm-up", w.warmup_s)
                await self._measure()
        finally:
            self._stopping = True
            await asyncio.gather(*producer_tasks, return_exceptions=True)
            await self._settle(self._consumer_tasks)
            for producer in producers:
                with contextlib.suppress(Exception):
                    await producer.close()
            for consumer in self._consumers:
                with contextlib.suppress(Exception):
                    await consumer.close()
            for topic in self._topics:
                with contextlib.suppress(Exception):
                    await self.driver.delete_topic(topic)
            if self.progress is not None and self._task is not None:
                self.progress.remove_task(self._task)
        return summarize(
            self.workload,
            self.driver.name,
            self.windows,
            self.search,
            rate=self._rate or 0.0,
            errors=self.total.errors,
            drain_s=drain_s,
        )

    async def _settle(self, consumer_tasks: list[asyncio.Task[None]]) -> None:
        """Give consumers ``GRACE_S`` to catch up with what was published, then stop them."""
        self._expected = self.total.published * self.workload.subscriptions_per_topic
        if self.total.consumed < self._expected:
            self._caught_up.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._caught_up.wait(), GRACE_S)
        self._consumers_stopping = True
        if consumer_tasks:
            _done, pending = await asyncio.wait(consumer_tasks, timeout=STOP_S)
            for task in pending:
                task.cancel()
        await asyncio.gather(*consumer_tasks, return_exceptions=True)
