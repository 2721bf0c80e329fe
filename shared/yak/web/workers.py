"""Several processes serving one port: ``--workers N`` for a stateless service.

``run_workers(n, serve_one)`` forks ``n`` worker processes before any event loop exists; each
calls ``serve_one()``, which builds its own app and listens on the same port with
``SO_REUSEPORT``, so the kernel spreads new connections over the workers (Linux balances
accepts across the sockets of one port). The parent only supervises: SIGINT/SIGTERM are passed
on to every worker; when one worker exits, the others are stopped and the parent exits with the
first non-zero status (whoever runs the service restarts it whole, as after any crash).

What is per worker: the app's state (connections to etcd and the brokers, caches, the
producer's batches) and its ``/metrics`` — a scrape reaches one worker. The rest-proxy keeps
nothing that a client relies on in a process, so workers need no coordination.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType

__all__ = ["reuse_port_socket", "run_workers"]


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` that other processes may bind too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run_workers(count: int, serve_one: Callable[[int], None]) -> int:
    """Fork ``count`` workers running ``serve_one(index)``; return the exit status to use."""
    if count < 1:
        raise ValueError(f"workers must be at least 1, got {count}")
    children: dict[int, int] = {}
    for index in range(count):
        pid = os.fork()
        if pid == 0:  # the worker
            status = 0
            try:
                serve_one(index)
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                import traceback

                traceback.print_exc()
                status = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status)
        children[pid] = index

    def forward(signum: int, _frame: FrameType | None) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    while children:
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        children.pop(pid, None)
        code = os.waitstatus_to_exitcode(wait_status)
        if code != 0 and status == 0:
            status = code if code > 0 else 1
        forward(signal.SIGTERM, None)  # one gone: stop the rest
    return status
