"""Running a benchmark module for a smoke test: as a subprocess of the repository root, stopped
with SIGTERM if it overruns (it unwinds and stops what it started), its output kept."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = ["ROOT", "Ran", "run_module"]

ROOT = Path(__file__).resolve().parents[2]


class Ran(NamedTuple):
    returncode: int | None
    output: str
    elapsed_s: float


def run_module(module: str, args: Sequence[str], timeout_s: float) -> Ran:
    """``python -m module args`` from the repository root, at most ``timeout_s``."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = ""
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return Ran(proc.returncode, output, time.monotonic() - started)
