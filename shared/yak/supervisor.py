"""Run a set of child processes as one unit: start in order, wait for health, stop on signal.

Used by ``yak up`` for the local cluster. Each child writes to its own log file; a child is
ready when its health URL answers 200 (readiness of a freshly started process has no event to
wait on, so this one wait polls, with a deadline). Stopping sends SIGTERM to every child in
reverse start order, waits for them together, and SIGKILLs what is left after the grace
period, so nothing outlives the supervisor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from yak.clients.tls import ssl_context

__all__ = ["ManagedProcess", "ProcessSpec", "StartupError", "Supervisor", "log_tail"]


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


@dataclass(slots=True)
class ManagedProcess:
    """A started child."""

    spec: ProcessSpec
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file, for error messages about a child process."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Supervisor:
    """Starts children one by one and stops all of them together."""

    def __init__(self) -> None:
        self.processes: list[ManagedProcess] = []

    def start(self, spec: ProcessSpec) -> ManagedProcess:
        """Start ``spec`` and wait until it is ready; raise StartupError if it is not."""
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_path.open("ab") as log:
            popen = subprocess.Popen(
                spec.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **spec.env},
                start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops children
            )
        process = ManagedProcess(spec, popen)
        self.processes.append(process)
        if spec.health_url is not None:
            self._wait_ready(process)
        return process

    def _wait_ready(self, process: ManagedProcess) -> None:
        spec = process.spec
        assert spec.health_url is not None
        deadline = time.monotonic() + spec.ready_timeout_s
        verify = ssl_context(spec.ca_file) if spec.ca_file else True
        with httpx.Client(timeout=1.0, verify=verify) as client:
            while time.monotonic() < deadline:
                if not process.alive():
                    raise StartupError(
                        f"{spec.name} exited with code {process.popen.returncode} "
                        f"during startup; last lines of {spec.log_path}:\n"
                        f"{log_tail(spec.log_path)}"
                    )
                try:
                    if client.get(spec.health_url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise StartupError(
            f"{spec.name} was not ready at {spec.health_url} within {spec.ready_timeout_s:.0f}"
            f" s; last lines of {spec.log_path}:\n{log_tail(spec.log_path)}"
        )

    def exited(self) -> list[ManagedProcess]:
        """Children that have exited on their own."""
        return [p for p in self.processes if not p.alive()]

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every child (newest first), wait up to ``grace_s``, then SIGKILL the rest."""
        for process in reversed(self.processes):
            if process.alive():
                process.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in reversed(self.processes):
            remaining = max(deadline - time.monotonic(), 0.0)
            try:
                process.popen.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
        self.processes.clear()
