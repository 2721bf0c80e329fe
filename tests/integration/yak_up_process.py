"""``yak up`` as the integration tests run it: a child process, until it says the cluster is up,
and a Ctrl-C at the end that must stop everything cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["yak_up"]

_YAK = Path(sys.executable).with_name("yak")


@contextmanager
def yak_up(*args: str, stop_timeout_s: float = 60.0) -> Iterator[list[str]]:
    """Run ``yak up <args>`` until it prints that the cluster is up; yield the lines it printed.
    On leaving, SIGINT (as Ctrl-C) and assert it exited 0 within ``stop_timeout_s``; killed if
    anything failed on the way."""
    argv = [str(_YAK), "up", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # blocks until `yak up` reports each process
            lines.append(line)
            if "is up" in line:
                break
        else:
            pytest.fail(
                f"yak up {' '.join(args)} exited before the cluster was up:\n{''.join(lines)}"
            )
        yield lines
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=stop_timeout_s)
        assert proc.returncode == 0, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
