"""The supervisor on real child processes: stopping, startup failures, and (with a restart
policy or a callback) watching, restarting, giving up, and stopping during restarts."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from yak.supervisor import (
    ChildEvent,
    ChildState,
    Exited,
    GaveUp,
    ManagedProcess,
    ProcessSpec,
    Ready,
    Restarted,
    RestartPolicy,
    RestartScheduled,
    StartupError,
    Supervisor,
    describe,
)


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


# -- watching and restarting (real child processes, tiny backoffs) -------------------------

FAST = RestartPolicy(initial_backoff_s=0.01, max_backoff_s=0.02, stable_after_s=60)


def _take(events: queue.Queue[ChildEvent], count: int) -> list[ChildEvent]:
    """The next ``count`` events (each within 10 s: the watchers' threads report them)."""
    return [events.get(timeout=10) for _ in range(count)]


def _state_of(process: ManagedProcess) -> ChildState:
    return process.state


def _processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_a_crashed_child_is_restarted_with_the_same_command_and_environment(
    tmp_path: Path,
) -> None:
    """The first run fails with code 3, the second runs; both see the same argv and env."""
    runs, running = tmp_path / "runs", tmp_path / "running"
    os.mkfifo(running)
    script = (
        "import os, sys, time; from pathlib import Path; runs = Path(sys.argv[1]); "
        "first = not runs.exists(); "
        "runs.open('a').write(f'{os.getpid()} {sys.argv[3]} {os.environ[\"YAK_NODE_ID\"]}\\n'); "
        "print('boom' if first else 'fine', flush=True); "
        "first and sys.exit(3); open(sys.argv[2], 'w'); time.sleep(60)"
    )
    events: queue.Queue[ChildEvent] = queue.Queue()
    supervisor = Supervisor(restart=FAST, on_event=events.put)
    spec = ProcessSpec(
        name="broker-7",
        argv=(sys.executable, "-c", script, str(runs), str(running), "--port=9427"),
        log_path=tmp_path / "broker-7.log",
        env={"YAK_NODE_ID": "7"},
    )
    process = supervisor.start(spec)
    first_pid = process.pid
    try:
        exited, scheduled, restarted, ready = _take(events, 4)
        assert isinstance(exited, Exited)
        assert (exited.name, exited.pid, exited.status) == (
            "broker-7",
            first_pid,
            "exited with code 3",
        )
        assert "boom" in exited.tail
        assert scheduled == RestartScheduled("broker-7", 0.01, 1, 5, 300)
        assert isinstance(restarted, Restarted)
        assert restarted.restarts == 1
        assert isinstance(ready, Ready)
        assert process.pid == restarted.pid != first_pid
        assert process.state is ChildState.RUNNING
        assert process.restarts == 1
        assert process.last_exit == "exited with code 3"
        with running.open():  # returns once the second run has written its line
            pass
    finally:
        supervisor.stop_all(grace_s=5)
    lines = runs.read_text().split("\n")[:2]
    assert [line.split()[1:] for line in lines] == [["--port=9427", "7"]] * 2
    assert spec.log_path.read_text().split() == ["boom", "fine"]
    assert _state_of(process) is ChildState.STOPPED  # (a call: mypy keeps no narrowing)
    assert not _pid_alive(process.pid)


def test_a_crash_loop_gives_up_and_leaves_the_child_down(tmp_path: Path) -> None:
    events: queue.Queue[ChildEvent] = queue.Queue()
    policy = RestartPolicy(initial_backoff_s=0.01, max_backoff_s=0.01, max_crashes=3)
    supervisor = Supervisor(restart=policy, on_event=events.put)
    spec = ProcessSpec(
        name="crashy", argv=(sys.executable, "-c", "raise SystemExit(1)"), log_path=tmp_path / "c"
    )
    process = supervisor.start(spec)
    try:
        kinds = [type(event) for event in _take(events, 10)]
        assert kinds == [Exited, RestartScheduled, Restarted, Ready] * 2 + [Exited, GaveUp]
        assert process.state is ChildState.GAVE_UP
        assert process.restarts == 2
        assert events.empty()
    finally:
        supervisor.stop_all(grace_s=5)


def test_without_a_policy_an_exit_is_reported_and_the_child_stays_down(tmp_path: Path) -> None:
    events: queue.Queue[ChildEvent] = queue.Queue()
    supervisor = Supervisor(on_event=events.put)
    spec = ProcessSpec(
        name="victim",
        argv=(sys.executable, "-c", "import time; time.sleep(60)"),
        log_path=tmp_path / "v",
    )
    process = supervisor.start(spec)
    try:
        os.kill(process.pid, signal.SIGKILL)
        (exited,) = _take(events, 1)
        assert isinstance(exited, Exited)
        assert exited.status == "killed by SIGKILL"
        assert describe(exited).startswith("victim exited: killed by SIGKILL after ")
        assert process.state is ChildState.EXITED
    finally:
        supervisor.stop_all(grace_s=5)
    assert events.empty()


def test_stopping_during_a_backoff_starts_nothing_and_leaves_no_process(tmp_path: Path) -> None:
    marker = str(tmp_path / "backoff-marker")
    events: queue.Queue[ChildEvent] = queue.Queue()
    slow = RestartPolicy(initial_backoff_s=30, max_backoff_s=30)
    supervisor = Supervisor(restart=slow, on_event=events.put)
    spec = ProcessSpec(
        name="once",
        argv=(sys.executable, "-c", "import sys; sys.exit(2)", marker),
        log_path=tmp_path / "o",
    )
    supervisor.start(spec)
    _exited, scheduled = _take(events, 2)
    assert isinstance(scheduled, RestartScheduled)
    assert scheduled.delay_s == 30
    started = time.monotonic()
    supervisor.stop_all(grace_s=5)
    assert time.monotonic() - started < 5  # the backoff was cut short, not waited out
    assert events.empty()  # no restart after the stop
    assert _processes_with(marker) == []
    assert not [t for t in threading.enumerate() if t.name == "watch-once"]


def test_stopping_while_restarts_happen_leaves_no_process_behind(tmp_path: Path) -> None:
    """Children that crash as fast as they start, restarted after 1 ms: a stop at any moment
    finds each spawn either done (and stops its process) or not yet begun (and never)."""
    marker = str(tmp_path / "race-marker")
    events: queue.Queue[ChildEvent] = queue.Queue()
    policy = RestartPolicy(initial_backoff_s=0.001, max_backoff_s=0.001, max_crashes=10_000)
    supervisor = Supervisor(restart=policy, on_event=events.put)
    for i in range(3):
        spec = ProcessSpec(
            name=f"flappy-{i}",
            argv=(sys.executable, "-c", "import sys; sys.exit(1)", marker),
            log_path=tmp_path / f"f{i}",
        )
        supervisor.start(spec)
    restarted = 0
    while restarted < 10:  # a few rounds of restarts under way in every watcher
        restarted += isinstance(events.get(timeout=10), Restarted)
    supervisor.stop_all(grace_s=5)
    assert _processes_with(marker) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("watch-flappy")]


def test_interrupt_cuts_a_readiness_wait_short(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    supervisor = Supervisor()
    spec = ProcessSpec(
        name="never-ready",
        argv=(
            sys.executable,
            "-c",
            "import sys, time; open(sys.argv[1], 'w'); time.sleep(60)",
            str(fifo),
        ),
        log_path=tmp_path / "n",
        health_url="http://127.0.0.1:9/healthz",
        ready_timeout_s=60,
    )

    def interrupt_once_started() -> None:
        with fifo.open():  # returns when the child has opened the fifo: it runs
            supervisor.interrupt()

    helper = threading.Thread(target=interrupt_once_started)
    helper.start()
    started = time.monotonic()
    with pytest.raises(StartupError, match="never-ready stopped before it was ready"):
        supervisor.start(spec)
    assert time.monotonic() - started < 10
    helper.join()
    pid = supervisor.processes[0].pid
    supervisor.stop_all(grace_s=5)
    assert not _pid_alive(pid)
    with pytest.raises(StartupError, match="the supervisor is stopping"):
        supervisor.start(spec)
