"""Supervising child processes (``yak up``, the tests' and benchmarks' local clusters).

- ``process``: a child's spec, its slot and state, spawning it, waiting until it is ready.
- ``restart_policy``: when a crashed child starts again — backoff, the crash-loop bound (pure).
- ``events``: what is reported about a child after its start.
- ``supervisor``: the ``Supervisor`` — start in order, watch, restart, stop together.
"""

from yak.supervisor.events import (
    ChildEvent,
    Exited,
    GaveUp,
    NotReady,
    Ready,
    Restarted,
    RestartScheduled,
    describe,
)
from yak.supervisor.process import (
    ChildState,
    ManagedProcess,
    ProcessSpec,
    StartupError,
    exit_status,
    log_tail,
)
from yak.supervisor.restart_policy import GiveUp, Restart, RestartHistory, RestartPolicy
from yak.supervisor.supervisor import Supervisor

__all__ = [
    "ChildEvent",
    "ChildState",
    "Exited",
    "GaveUp",
    "GiveUp",
    "ManagedProcess",
    "NotReady",
    "ProcessSpec",
    "Ready",
    "Restart",
    "RestartHistory",
    "RestartPolicy",
    "RestartScheduled",
    "Restarted",
    "StartupError",
    "Supervisor",
    "describe",
    "exit_status",
    "log_tail",
]
