"""Run child processes as one unit: start in order, watch, restart what crashes, stop together.

``start`` spawns a child and waits until it is ready (``StartupError`` if it is not). With a
``RestartPolicy`` or an ``on_event`` callback, each ready child then gets a watcher thread:

- **Watching** is a thread per child blocked in ``Popen.wait()`` (``waitpid``): the kernel
  wakes it the moment that child ends, with no polling and no SIGCHLD handler (which would run
  only in the main thread, coalesce, and not say which child ended). A thread per child keeps
  each child's life linear — wait, report, back off, spawn, wait for ready — and one child's
  slow readiness never delays noticing another's crash.
- **Restarting.** An exit the supervisor did not cause is reported (``Exited``: exit code or
  signal, uptime, the tail of the child's log); the policy (``restart_policy``) answers with a
  delay or a give-up. The delay is an ``Event.wait(delay)`` that ``stop_all`` cuts short. The
  new process runs the same ``ProcessSpec`` — same command, environment, data folder, port and
  log file. Without a policy an exit is reported and the child stays down.
- **Stopping** (``stop_all``) sets ``stopping`` under the lock that every spawn holds, so no
  child is spawned after it has listed the children to stop: a restart in progress either
  finished spawning (and its child is stopped with the rest) or never will. Then SIGTERM to
  every child, newest first, a wait up to the grace period, SIGKILL for what is left, and a
  join of the watchers. ``interrupt`` (safe in a signal handler: it takes no lock) makes a
  readiness wait give up and a pending restart not happen; ``stop_all`` must follow it.

The main thread calls ``start``, ``interrupt`` and ``stop_all``; the callback runs on the
watcher threads and must be thread-safe.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from yak.supervisor.events import (
    ChildEvent,
    Exited,
    GaveUp,
    NotReady,
    Ready,
    Restarted,
    RestartScheduled,
)
from yak.supervisor.process import (
    ChildState,
    ManagedProcess,
    ProcessSpec,
    StartupError,
    exit_status,
    log_tail,
    spawn,
    wait_ready,
)
from yak.supervisor.restart_policy import GiveUp, RestartHistory, RestartPolicy

__all__ = ["Supervisor"]

_log = logging.getLogger(__name__)


class Supervisor:
    """Starts children one by one, restarts them per its policy, stops all of them together."""

    def __init__(
        self,
        *,
        restart: RestartPolicy | None = None,
        on_event: Callable[[ChildEvent], None] | None = None,
    ) -> None:
        self.processes: list[ManagedProcess] = []
        self._policy = restart
        self._on_event = on_event
        self._watching = restart is not None or on_event is not None
        self._lock = threading.Lock()  # held by every spawn and by stop_all's listing
        self._stopping = False
        self._wake = threading.Event()  # cuts a backoff short when stopping
        self._watchers: dict[int, threading.Thread] = {}

    def start(self, spec: ProcessSpec) -> ManagedProcess:
        """Start ``spec`` and wait until it is ready; raise StartupError if it is not."""
        with self._lock:
            if self._stopping:
                raise StartupError(f"{spec.name} was not started: the supervisor is stopping")
            process = ManagedProcess(spec, spawn(spec))
            self.processes.append(process)
        why = wait_ready(spec, process.popen, lambda: self._stopping)
        if why is not None:
            raise StartupError(
                f"{spec.name} {why}; last lines of {spec.log_path}:\n{log_tail(spec.log_path)}"
            )
        process.state = ChildState.RUNNING
        if self._watching:
            watcher = threading.Thread(
                target=self._watch, args=(process,), name=f"watch-{spec.name}", daemon=True
            )
            self._watchers[id(process)] = watcher
            watcher.start()
        return process

    def interrupt(self) -> None:
        """Stop starting and restarting children (signal-handler safe; see the module doc)."""
        self._stopping = True

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every child (newest first), wait up to ``grace_s``, then SIGKILL the rest."""
        with self._lock:
            self._stopping = True
            processes = list(self.processes)
        self._wake.set()
        for process in reversed(processes):
            if process.alive():
                process.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in reversed(processes):
            if not self._ended(process, max(deadline - time.monotonic(), 0.0)):
                process.popen.kill()
                self._ended(process, None)
            process.state = ChildState.STOPPED
        self._watchers.clear()
        self.processes.clear()

    def _ended(self, process: ManagedProcess, timeout_s: float | None) -> bool:
        """Wait until the child's process has ended (and its watcher with it)."""
        watcher = self._watchers.get(id(process))
        if watcher is not None:
            watcher.join(timeout_s)  # the watcher returns once waitpid has reaped the child
            return not watcher.is_alive()
        try:
            process.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    # -- one thread per child ----------------------------------------------------------------

    def _watch(self, process: ManagedProcess) -> None:
        history = RestartHistory(self._policy) if self._policy is not None else None
        if history is not None:
            history.started(process.started_at)
        while True:
            popen = process.popen
            popen.wait()  # the event: this process ended
            if self._stopping:
                return
            self._exited(process, popen.pid, exit_status(popen.returncode))
            if history is None or not self._restart(process, history):
                return
            self._await_ready(process)

    def _exited(self, process: ManagedProcess, pid: int, status: str) -> None:
        process.last_exit = status
        process.state = ChildState.EXITED if self._policy is None else ChildState.BACKOFF
        spec = process.spec
        uptime = time.monotonic() - process.started_at
        self._emit(Exited(spec.name, pid, status, uptime, spec.log_path, log_tail(spec.log_path)))

    def _restart(self, process: ManagedProcess, history: RestartHistory) -> bool:
        """Back off and spawn the child again; False when it stays down (given up, stopping)."""
        while True:
            decision = history.crashed(time.monotonic())
            if isinstance(decision, GiveUp):
                process.state = ChildState.GAVE_UP
                self._emit(GaveUp(process.spec.name, decision.crashes, decision.window_s))
                return False
            policy = history.policy
            self._emit(
                RestartScheduled(
                    process.spec.name,
                    decision.delay_s,
                    decision.crashes,
                    policy.max_crashes,
                    policy.crash_window_s,
                )
            )
            if self._wake.wait(decision.delay_s):
                return False
            try:
                with self._lock:
                    if self._stopping:
                        return False
                    process.popen = spawn(process.spec)
                    process.started_at = time.monotonic()
                    process.restarts += 1
                    process.state = ChildState.STARTING
            except OSError as exc:  # the command is gone, the folder unwritable ...
                process.started_at = time.monotonic()
                history.started(process.started_at)
                self._exited(process, 0, f"could not be started ({exc})")
                continue
            history.started(process.started_at)
            self._emit(Restarted(process.spec.name, process.pid, process.restarts))
            return True

    def _await_ready(self, process: ManagedProcess) -> None:
        spec, popen = process.spec, process.popen
        why = wait_ready(spec, popen, lambda: self._stopping)
        if why is None:
            process.state = ChildState.RUNNING
            self._emit(Ready(spec.name, popen.pid, time.monotonic() - process.started_at))
        elif popen.poll() is None and not self._stopping:
            self._emit(NotReady(spec.name, popen.pid, why))
        # An exit during startup is seen by the next wait() and counts as a crash.

    def _emit(self, event: ChildEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # a reporting failure must not end the watching
            _log.exception("supervisor: reporting %s failed", type(event).__name__)
