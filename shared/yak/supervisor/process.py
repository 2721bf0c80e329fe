"""One supervised child: how to start it, how to tell that it is ready, how it ended.

``spawn`` starts a ``ProcessSpec`` in a session of its own (a Ctrl-C in the terminal reaches
only the supervisor, which stops the children in order), appending stdout and stderr to the
spec's log file, so every incarnation of a restarted child writes to the same log. A child is
ready when its health URL answers 200; readiness of a freshly started process has no event to
wait on, so ``wait_ready`` polls, with a deadline, and gives up early when told to stop.

``ManagedProcess`` is the supervisor's slot for a child: the spec stays, ``popen`` is replaced
when the child is restarted; ``state``, ``restarts`` and ``last_exit`` are what ``yak up``
reports. Its fields are written by the one thread that watches the child (and by the
supervisor under its lock); reading them from another thread sees a recent value.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import httpx

from yak.clients.tls import ssl_context

__all__ = [
    "ChildState",
    "ManagedProcess",
    "ProcessSpec",
    "StartupError",
    "exit_status",
    "log_tail",
    "spawn",
    "wait_ready",
]

_TAIL_BYTES = 64 * 1024


class StartupError(RuntimeError):
    """A child did not become ready; the message names it and quotes its log's tail."""


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """How to start one child and how to tell that it is ready."""

    name: str
    argv: tuple[str, ...]
    log_path: Path
    health_url: str | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 30.0
    #: CA bundle verifying an ``https://`` health URL (default: the trusted roots).
    ca_file: str | None = None


class ChildState(StrEnum):
    """Where a supervised child is in its life."""

    STARTING = "starting"  # spawned, not ready yet
    RUNNING = "running"
    BACKOFF = "backoff"  # crashed; waiting to be started again
    GAVE_UP = "gave-up"  # crashed too often; left down
    EXITED = "exited"  # exited and not restarted (no restart policy)
    STOPPED = "stopped"  # stopped by the supervisor


@dataclass(slots=True)
class ManagedProcess:
    """A started child (see the module doc)."""

    spec: ProcessSpec
    popen: subprocess.Popen[bytes]
    state: ChildState = ChildState.STARTING
    restarts: int = 0
    #: How the last process of this child ended (``exit_status``), None while none has.
    last_exit: str | None = None
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


def spawn(spec: ProcessSpec) -> subprocess.Popen[bytes]:
    """Start ``spec``'s command, its output appended to its log file."""
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with spec.log_path.open("ab") as log:
        return subprocess.Popen(
            spec.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **spec.env},
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops children
        )


def wait_ready(
    spec: ProcessSpec, popen: subprocess.Popen[bytes], should_stop: Callable[[], bool]
) -> str | None:
    """Poll ``spec.health_url`` until it answers 200: None, else why not (the process exited,
    the deadline passed, or ``should_stop()`` turned true)."""
    if spec.health_url is None:
        return None
    deadline = time.monotonic() + spec.ready_timeout_s
    verify = ssl_context(spec.ca_file) if spec.ca_file else True
    with httpx.Client(timeout=1.0, verify=verify) as client:
        while time.monotonic() < deadline:
            if should_stop():
                return "stopped before it was ready"
            if popen.poll() is not None:
                return f"{exit_status(popen.returncode)} during startup"
            try:
                if client.get(spec.health_url).status_code == 200:
                    return None
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    return f"was not ready at {spec.health_url} within {spec.ready_timeout_s:.0f} s"


def exit_status(returncode: int | None) -> str:
    """``exited with code 3`` or ``killed by SIGKILL`` (Popen's negative return codes)."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file, for error messages about a child process (read
    from its last 64 KiB: a long-lived child's log can be large)."""
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(size - _TAIL_BYTES, 0))
            text = log.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    kept = text.splitlines()
    if size > _TAIL_BYTES:
        kept = kept[1:]  # the first line read is a partial one
    return "\n".join(kept[-lines:])
