"""What ``yak up`` tells about its processes while it runs.

- **Console**: one line per supervisor event (a crash with its exit code or signal and the last
  lines of the process's log, a scheduled restart, the new pid, ready again, a give-up), with
  the time of day.
- **``<data-dir>/logs/supervisor.log``**: the same lines with a full timestamp and a longer log
  tail, appended (it survives ``yak up``).
- **``<data-dir>/cluster.json``**: rewritten (write to a temporary file, then rename) at start
  and after every event, so its pids are those of the running processes and each process has
  its ``state``, ``restarts`` and ``last_exit``; ``supervisor.pid`` is ``yak up``'s own pid.
  ``yak ps`` (``yak.cli.ps``) prints it; the other commands read their endpoints from it.
  A broker's entry has ``kafka`` (``host:port`` of its Kafka listener, when it has one) and
  ``kafka_bootstrap`` lists them all, comma-separated.

``UpReport.event`` is the supervisors' callback: it runs on their watcher threads, so every
write happens under one lock; after each event it wakes ``yak up``'s main thread
(``Wakeup.poke``), which decides whether anything is left running.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from yak.cli.secure import security_section
from yak.supervisor import (
    ChildEvent,
    ChildState,
    Exited,
    GaveUp,
    ManagedProcess,
    ProcessSpec,
    Supervisor,
    describe,
)

__all__ = ["UpReport", "Wakeup", "kafka_address", "write_cluster_file"]

#: Log lines of a crashed process shown on the console (the supervisor's log keeps more).
CONSOLE_TAIL_LINES = 10
LOG_TAIL_LINES = 40
#: States of a child that will not run again while ``yak up`` runs.
DOWN_FOR_GOOD = frozenset({ChildState.GAVE_UP, ChildState.EXITED, ChildState.STOPPED})


class Wakeup:
    """A pipe the main thread blocks on; ``poke`` (from a signal handler or a watcher thread)
    wakes it. A pipe, not a ``threading.Event``: a signal handler that sets an Event can
    deadlock on the Event's own lock when the signal lands while the main thread holds it."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def poke(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe wakes the reader anyway
            os.write(self._write, b".")

    def wait(self) -> None:
        os.read(self._read, 4096)

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


def kafka_address(spec: ProcessSpec) -> str | None:
    """``host:port`` of a broker's Kafka listener as ``yak up`` laid it out (None: none)."""
    port = int(spec.env.get("YAK_KAFKA_PORT", "-1"))
    if port <= 0 or spec.url is None:
        return None
    return f"{urlsplit(spec.url).hostname}:{port}"


def _process_entry(process: ManagedProcess) -> dict[str, Any]:
    kafka = kafka_address(process.spec)
    return {
        "name": process.spec.name,
        "url": process.spec.url,
        **({"kafka": kafka} if kafka else {}),
        "pid": process.pid,
        "log": str(process.spec.log_path),
        "state": str(process.state),
        "restarts": process.restarts,
        "last_exit": process.last_exit,
    }


def write_cluster_file(
    data_dir: Path,
    cluster_id: str,
    *,
    etcd: ManagedProcess | None,
    services: list[ManagedProcess],
    etcd_members: list[ManagedProcess] | None = None,
    secure: bool,
    restart: bool,
    running: bool = True,
) -> Path:
    """Write ``cluster.json`` (see the module doc) atomically; return its path."""
    document: dict[str, Any] = {
        "cluster_id": cluster_id,
        "data_dir": str(data_dir.resolve()),
        "supervisor": {
            "pid": os.getpid(),
            "running": running,
            "restart": restart,
            "updated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
        "etcd": _process_entry(etcd) if etcd is not None else None,
        # Every member (``yak up --etcd-members``); "etcd" above is the first.
        "etcd_members": [_process_entry(p) for p in etcd_members or ([etcd] if etcd else [])],
        "processes": [_process_entry(p) for p in services],
        # The brokers' Kafka listeners, comma-separated (Kafka clients' bootstrap list).
        "kafka_bootstrap": ",".join(
            address for p in services if (address := kafka_address(p.spec)) is not None
        ),
    }
    if secure:
        document["security"] = security_section(data_dir)
    path = data_dir / "cluster.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)
    return path


class UpReport:
    """Console lines, the supervisor's log and ``cluster.json`` for one ``yak up`` run."""

    def __init__(
        self, data_dir: Path, cluster_id: str, *, secure: bool, restart: bool, wakeup: Wakeup
    ) -> None:
        self.data_dir = data_dir
        self.cluster_id = cluster_id
        self.secure = secure
        self.restart = restart
        self.log_path = data_dir / "logs" / "supervisor.log"
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._etcd: list[ManagedProcess] = []
        self._services: list[ManagedProcess] = []
        self._running = True

    def watch(self, etcd: Supervisor, services: Supervisor) -> None:
        """The supervisors whose children ``cluster.json`` lists (their lists, shared)."""
        self._etcd, self._services = etcd.processes, services.processes

    def stopping(self) -> None:
        """Keep the children as they are now (stopping empties the supervisors' lists), so the
        last ``write_status`` shows them stopped."""
        with self._lock:
            self._etcd, self._services = list(self._etcd), list(self._services)
            self._running = False

    def children(self) -> list[ManagedProcess]:
        return [*self._etcd, *self._services]

    def all_down(self) -> bool:
        """Whether no child runs or will run again (each gave up, or exited without restarts)."""
        children = self.children()
        return bool(children) and all(p.state in DOWN_FOR_GOOD for p in children)

    def write_status(self) -> Path:
        with self._lock:
            return self._write_status()

    def _write_status(self) -> Path:
        return write_cluster_file(
            self.data_dir,
            self.cluster_id,
            etcd=self._etcd[0] if self._etcd else None,
            services=list(self._services),
            etcd_members=list(self._etcd),
            secure=self.secure,
            restart=self.restart,
            running=self._running,
        )

    def event(self, event: ChildEvent) -> None:
        """The supervisors' callback (watcher threads)."""
        line = describe(event)
        if isinstance(event, Exited) and not self.restart:
            line += "; not restarted (--no-restart)"
        now = datetime.datetime.now()
        with self._lock:
            self._append_log(now, line, event)
            self._write_status()  # before the console line: who reads the line finds it
            loud = isinstance(event, Exited | GaveUp)
            typer.echo(f"[{now:%H:%M:%S}] {line}", err=loud)
            if isinstance(event, Exited):
                typer.echo(_indented(event.tail, CONSOLE_TAIL_LINES), err=True)
        self._wakeup.poke()

    def note(self, line: str) -> None:
        """A line of ``yak up``'s own (start, stop) in the supervisor's log."""
        with self._lock:
            self._append_log(datetime.datetime.now(), line, None)

    def _append_log(self, now: datetime.datetime, line: str, event: ChildEvent | None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as log:
            log.write(f"{now.isoformat(sep=' ', timespec='milliseconds')} {line}\n")
            if isinstance(event, Exited):
                log.write(_indented(event.tail, LOG_TAIL_LINES) + "\n")

    def summary(self) -> str | None:
        """``restarts: broker-0 2, etcd 1`` (None when nothing was restarted or gave up)."""
        parts = [
            f"{p.spec.name} {p.restarts}" + (" (gave up)" if p.state is ChildState.GAVE_UP else "")
            for p in self.children()
            if p.restarts or p.state is ChildState.GAVE_UP
        ]
        return f"restarts: {', '.join(parts)}" if parts else None


def _indented(tail: str, lines: int) -> str:
    kept = tail.splitlines()[-lines:] or ["(empty log)"]
    return "\n".join(f"    | {line}" for line in kept)
