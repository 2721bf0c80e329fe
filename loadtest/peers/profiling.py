"""Sampling the rest-proxy with py-spy while a run is measured, and reading the samples.

``py_spy(pid, out)`` returns a measure hook for the runner: it records ``pid`` at 100 Hz for
the measured phase (``--nonblocking``, so the proxy is never paused; collapsed stacks in
``out``). ``hot_spots`` reads such a file: the share of samples in which each function is the
innermost frame (self time) and anywhere on the stack (total time).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

from loadtest.peers.runner import MeasureHook

__all__ = ["hot_spots", "py_spy"]


def py_spy(pid: int, out: Path) -> MeasureHook:
    """A measure hook that samples ``pid`` into ``out`` (see the module docstring)."""

    @contextlib.asynccontextmanager
    async def hook(duration_s: float) -> AsyncIterator[None]:
        argv = (
            str(Path(sys.executable).with_name("py-spy")),
            *("record", "--pid", str(pid), "--duration", str(math.ceil(duration_s))),
            *("--rate", "100", "--nonblocking", "--format", "raw", "--output", str(out)),
        )
        spy = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            yield
        finally:
            await spy.wait()

    return hook


def hot_spots(collapsed: Path, top: int = 15) -> list[tuple[str, float, float]]:
    """``(function, self share, total share)`` of the ``top`` functions by self time."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            anywhere[frame] += count
    if not samples:
        return []
    return [(f, n / samples, anywhere[f] / samples) for f, n in own.most_common(top)]
