"""``yak up`` as the integration tests run it: a child process, until it says the cluster is up,
and a Ctrl-C at the end that must stop everything cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["yak_cli", "yak_up"]

_YAK = Path(sys.executable).with_name("yak")


@contextmanager
def yak_up(*args: str, stop_timeout_s: float = 60.0) -> Iterator[list[str]]:
    """Run ``yak up <args>`` until it prints that the cluster is up; yield the lines it printed.
    On leaving, SIGINT (as Ctrl-C) and assert it exited 0 within ``stop_timeout_s`` (what it
    printed meanwhile is appended to the lines); killed if anything failed on the way."""
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
        lines.append(rest)
        assert proc.returncode == 0, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def yak_cli(data_dir: Path, *args: str) -> str:
    """``yak <args> --data-dir <data_dir>`` (the cluster's files say where everything is; no
    ``YAK_*`` of the test's environment leaks in); its output, after asserting it exited 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("YAK_")}
    argv = [str(_YAK), *args, "--data-dir", str(data_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
