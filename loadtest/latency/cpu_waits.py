"""Each process's CPU, and its wait for one, over a measurement (issue 34): what bounds the
tail when every hop of a record is a process that has to be scheduled on two shared cores.

Linux keeps, per thread, the time it ran on a CPU, the time it was runnable but waited on a run
queue, and how many timeslices it ran (``/proc/<pid>/task/<tid>/schedstat``; kernel
documentation, ``scheduler/sched-stats``). Read for every process of the cluster — and the
benchmark's own, whose client makes the requests — just before and just after a measurement,
the difference says how busy the two cores were (CPU ms per second, summed over the processes
against the 2,000 the machine has) and how long ready work waited for one (waiting ms per
second, and per timeslice on average: a record's hops wait that long at each wake-up).

Pure but for ``read_schedstat``; ``loadtest.latency.budget`` reads around its measurements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.latency.rows import rounded

__all__ = ["CLIENT", "CpuWait", "SchedStat", "cpu_waits", "read_schedstat", "service_of"]

#: The name of the benchmark's own process (its clients) in a ``cpu_waits`` table.
CLIENT = "benchmark client"
#: Services in the order shown; a name not here goes last, in its own order.
_ORDER = ("rest-proxy", "broker", "coordinator", "etcd", CLIENT)


@dataclass(frozen=True)
class SchedStat:
    """One process's counters, summed over its threads: nanoseconds on a CPU, nanoseconds
    runnable but waiting, timeslices run."""

    run_ns: int
    wait_ns: int
    slices: int


def read_schedstat(pid: int, proc: Path = Path("/proc")) -> SchedStat | None:
    """``pid``'s counters summed over its threads; None when the process is gone or the
    kernel does not keep them."""
    run = wait = slices = 0
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
        for task in tasks:
            try:
                fields = (task / "schedstat").read_text().split()
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
            run, wait, slices = run + int(fields[0]), wait + int(fields[1]), slices + int(fields[2])
    except (OSError, ValueError, IndexError):
        return None
    return SchedStat(run, wait, slices) if tasks else None


def service_of(name: str) -> str:
    """The service of a process name of the cluster (``broker-2`` → ``broker``)."""
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


@dataclass(frozen=True)
class CpuWait:
    """One service's processes over a window of ``seconds``: CPU and waiting for a CPU, in ms
    a second, timeslices a second, and the mean wait before a timeslice."""

    service: str
    processes: int
    cpu_ms_per_s: float
    wait_ms_per_s: float
    slices_per_s: float
    seconds: float

    @property
    def wait_per_slice_us(self) -> float:
        return 0.0 if self.slices_per_s == 0 else 1000 * self.wait_ms_per_s / self.slices_per_s

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "processes": self.processes,
            "cpu_ms_per_s": rounded(self.cpu_ms_per_s, 1),
            "wait_ms_per_s": rounded(self.wait_ms_per_s, 1),
            "slices_per_s": rounded(self.slices_per_s, 1),
            "wait_per_slice_us": rounded(self.wait_per_slice_us, 1),
            "seconds": rounded(self.seconds, 1),
        }


def cpu_waits(
    before: Mapping[str, SchedStat], after: Mapping[str, SchedStat], seconds: float
) -> list[CpuWait]:
    """Each service's figures over the window (processes by name, ``service_of``, summed per
    service); a process read only once (started or gone meanwhile) is left out."""
    if seconds <= 0:
        return []
    totals: dict[str, list[int]] = {}
    for name, end in after.items():
        start = before.get(name)
        if start is None:
            continue
        total = totals.setdefault(service_of(name), [0, 0, 0, 0])
        total[0] += 1
        total[1] += max(0, end.run_ns - start.run_ns)
        total[2] += max(0, end.wait_ns - start.wait_ns)
        total[3] += max(0, end.slices - start.slices)

    def order(service: str) -> tuple[int, str]:
        return (_ORDER.index(service) if service in _ORDER else len(_ORDER), service)

    return [
        CpuWait(
            service,
            processes,
            run / 1e6 / seconds,
            wait / 1e6 / seconds,
            slices / seconds,
            seconds,
        )
        for service, (processes, run, wait, slices) in sorted(
            totals.items(), key=lambda item: order(item[0])
        )
    ]
