"""Where a comparison ran: machine, load, exact versions — recorded with every result.

The machine line comes from ``/proc/cpuinfo`` (model, logical CPUs) and ``/proc/meminfo``; the
load average is read before the run (the figures are only as steady as the machine was quiet).
Server versions are what ``redis-server --version`` and ``nats-server --version`` print; Yak's
is the installed package's version and this checkout's commit.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from loadtest.peers.servers import server_versions

__all__ = ["environment", "machine_description"]


def machine_description() -> str:
    """``<cpu model>, <n> logical CPUs, <n> GiB RAM`` (what Linux says)."""
    model, cpus = "unknown CPU", os.cpu_count() or 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                kib = int(line.split()[1])
                return f"{model}, {cpus} logical CPUs, {kib / 1024**2:.1f} GiB RAM"
    except OSError:
        pass
    return f"{model}, {cpus} logical CPUs"


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment(quick: bool, command: str) -> dict[str, Any]:
    """The environment block of ``peers.json`` (and the report's header)."""
    one, five, fifteen = os.getloadavg()
    versions = server_versions()
    versions["yak"] = f"{importlib.metadata.version('yak')} ({_commit()})"
    versions["python"] = sys.version.split()[0]
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "quick": quick,
        "machine": machine_description(),
        "load": f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min) at start",
        "versions": versions,
    }
