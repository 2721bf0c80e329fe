"""The budget per hop of one build, measured: the stage histograms of the rest-proxy's and every
broker's ``/metrics`` scraped just before and just after the chosen measurements — the idle
proxy rows of ``BUDGET_IDLE`` and the end-to-end run at ``budget_rate`` —, diffed, summed over
the brokers, each stage's p50/p99 along the request's path (``loadtest.latency.histograms``),
each service's GC pauses a minute and their p99 (``loadtest.latency.gc_figures``), and each
process's CPU and its wait for a CPU (``loadtest.latency.cpu_waits``).
A stage the build does not export is left out; a failed scrape leaves that table out.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx

from loadtest.latency.cpu_waits import CLIENT, CpuWait, SchedStat, cpu_waits, read_schedstat
from loadtest.latency.gc_figures import GcFigure, gc_figures
from loadtest.latency.histograms import (
    POLL_PATH,
    PRODUCE_PATH,
    RUNTIME_PATH,
    Histograms,
    StageFigure,
    StageKey,
    budget_key,
    budget_rows,
    diff_histograms,
)
from loadtest.latency.measure import scrape_stages
from loadtest.latency.terminal import console
from loadtest.peers.runner import MeasureHook

__all__ = ["BUDGET_IDLE", "BUDGET_RATE", "Budget", "budget_rate"]

#: The idle proxy rows (RF, acks) whose stages are measured (the budget per hop).
BUDGET_IDLE = ((3, "1"), (3, "all"))
#: The e2e rate whose stages are measured (the lowest of ``--rates`` when it is not there).
BUDGET_RATE = 1_000


@dataclass
class Budget:
    """The budget per hop of one build: the stage histograms of ``urls`` (the rest-proxy,
    every broker and the coordinator) scraped around a measurement, diffed, summed over the
    brokers; ``found``: ``budget_key`` → the stages along the request's path; ``gc``: the same
    key → each service's collections (``loadtest.latency.gc_figures``). A stage the build
    does not export is left out; a failed scrape leaves the measurement's table out and is
    printed. ``pids``: the cluster's processes by name, whose CPU and wait for a CPU are read
    around each measurement with the benchmark's own (``cpu``: the same key → each
    service's figures)."""

    urls: tuple[str, ...]
    pids: Mapping[str, int] = field(default_factory=dict)
    found: dict[str, list[StageFigure]] = field(default_factory=dict)
    #: ``budget_key`` → each service's collections over that measurement.
    gc: dict[str, list[GcFigure]] = field(default_factory=dict)
    #: ``budget_key`` → each service's CPU and wait for a CPU over that measurement.
    cpu: dict[str, list[CpuWait]] = field(default_factory=dict)

    @asynccontextmanager
    async def around(self, key: str, path: Sequence[StageKey]) -> AsyncIterator[None]:
        before = await self._scrape(key)
        sched_before = self._schedstats()
        started = time.monotonic()
        yield
        seconds = time.monotonic() - started
        sched_after = self._schedstats()
        waits = cpu_waits(sched_before, sched_after, seconds)
        if waits:
            self.cpu[key] = waits
        after = await self._scrape(key) if before is not None else None
        if before is None or after is None:
            return
        window = diff_histograms(after, before)
        stages = budget_rows(window, path)
        if stages:
            self.found[key] = stages
        pauses = gc_figures(window, seconds)
        if pauses:
            self.gc[key] = pauses

    def _schedstats(self) -> dict[str, SchedStat]:
        pids = {**self.pids, CLIENT: os.getpid()}
        found = {name: read_schedstat(pid) for name, pid in pids.items()}
        return {name: stat for name, stat in found.items() if stat is not None}

    async def _scrape(self, key: str) -> Histograms | None:
        try:
            return await scrape_stages(self.urls)
        except (httpx.HTTPError, ValueError) as exc:  # unreachable, or a text not parsed
            console.print(f"[yellow]budget {key}: no scrape of /metrics ({exc!r})[/]")
            return None

    @asynccontextmanager
    async def idle(self, rf: int, acks: str) -> AsyncIterator[None]:
        """``idle_proxy``'s hook: the rows of ``BUDGET_IDLE`` measured, the others not."""
        if (rf, acks) not in BUDGET_IDLE:
            yield
            return
        async with self.around(budget_key("proxy", rf, acks, None), PRODUCE_PATH + RUNTIME_PATH):
            yield

    def e2e(self, rate: int) -> MeasureHook:
        """``end_to_end``'s measure hook at ``rate``: produce and poll stages."""

        @asynccontextmanager
        async def hook(_duration_s: float) -> AsyncIterator[None]:
            async with self.around(
                budget_key("e2e", 3, "all", rate), PRODUCE_PATH + POLL_PATH + RUNTIME_PATH
            ):
                yield

        return hook


def budget_rate(rates: Sequence[int]) -> int:
    """The e2e rate whose stages are measured: ``BUDGET_RATE``, else the lowest."""
    return BUDGET_RATE if BUDGET_RATE in rates else min(rates)
