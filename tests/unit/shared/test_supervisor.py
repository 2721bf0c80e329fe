import os
import sys
from pathlib import Path

import pytest

from yak.supervisor import ProcessSpec, StartupError, Supervisor


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_all_terminates_children_that_ignore_sigterm(tmp_path: Path) -> None:
    fifo = tmp_path / "armed"
    os.mkfifo(fifo)
    stubborn = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').close(); time.sleep(60)"
    )
    supervisor = Supervisor()
    spec = ProcessSpec(
        name="stubborn", argv=(sys.executable, "-c", stubborn, str(fifo)), log_path=tmp_path / "s"
    )
    child = supervisor.start(spec)
    with fifo.open() as armed:  # blocks until the child has installed its SIGTERM handler
        armed.read()
    supervisor.stop_all(grace_s=0.5)
    assert child.popen.returncode == -9
    assert not _pid_alive(child.pid)


def test_a_child_that_dies_during_startup_is_reported_with_its_log(tmp_path: Path) -> None:
    supervisor = Supervisor()
    crash = "import sys; print('boom: bad config'); sys.exit(3)"
    spec = ProcessSpec(
        name="crasher",
        argv=(sys.executable, "-c", crash),
        log_path=tmp_path / "c.log",
        health_url="http://127.0.0.1:9/healthz",
        ready_timeout_s=10,
    )
    with pytest.raises(StartupError, match=r"crasher exited with code 3(.|\n)*boom: bad config"):
        supervisor.start(spec)
    supervisor.stop_all()
    assert supervisor.processes == []
