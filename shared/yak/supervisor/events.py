"""What a supervisor reports about its children after they started: exits, restarts, give-ups.

Each event is a frozen value handed to the supervisor's ``on_event`` callback, from the thread
that watches the child (so the callback must be thread-safe and quick). ``describe`` renders one
line for people; ``Exited`` also carries the tail of the child's log, to print under it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

__all__ = [
    "ChildEvent",
    "Exited",
    "GaveUp",
    "NotReady",
    "Ready",
    "RestartScheduled",
    "Restarted",
    "describe",
]


@dataclass(frozen=True, slots=True)
class Exited:
    """A child's process ended on its own (not stopped by the supervisor)."""

    name: str
    pid: int
    status: str  # ``exit_status``: "exited with code 3", "killed by SIGKILL"
    uptime_s: float
    log_path: Path
    tail: str


@dataclass(frozen=True, slots=True)
class RestartScheduled:
    """The child will be started again after ``delay_s`` (crash ``crashes`` of the window)."""

    name: str
    delay_s: float
    crashes: int
    max_crashes: int
    window_s: float


@dataclass(frozen=True, slots=True)
class Restarted:
    """A new process of the child was spawned (same command, folder and port)."""

    name: str
    pid: int
    restarts: int


@dataclass(frozen=True, slots=True)
class Ready:
    """A restarted child answers its health check again."""

    name: str
    pid: int
    after_s: float


@dataclass(frozen=True, slots=True)
class NotReady:
    """A restarted child runs but did not become ready in time (it is still watched)."""

    name: str
    pid: int
    reason: str


@dataclass(frozen=True, slots=True)
class GaveUp:
    """The child crashed too often and is left down; the other children keep running."""

    name: str
    crashes: int
    window_s: float


ChildEvent: TypeAlias = Exited | RestartScheduled | Restarted | Ready | NotReady | GaveUp


def describe(event: ChildEvent) -> str:
    """One line about ``event`` for the console and the supervisor's log."""
    match event:
        case Exited():
            return (
                f"{event.name} exited: {event.status} after {event.uptime_s:.1f} s up "
                f"(pid {event.pid}); log: {event.log_path}"
            )
        case RestartScheduled():
            return (
                f"{event.name}: restarting in {event.delay_s:g} s (crash {event.crashes} "
                f"within {event.window_s:g} s; gives up at {event.max_crashes})"
            )
        case Restarted():
            return f"{event.name} restarted (pid {event.pid}, restart {event.restarts})"
        case Ready():
            return f"{event.name} is ready again ({event.after_s:.1f} s after its restart)"
        case NotReady():
            return f"{event.name} (pid {event.pid}) {event.reason}; still watching it"
        case GaveUp():
            return (
                f"GAVE UP on {event.name}: {event.crashes} crashes within "
                f"{event.window_s:g} s; it stays down, the rest of the cluster keeps running"
            )
