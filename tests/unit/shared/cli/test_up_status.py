"""What ``yak up`` reports about its processes: console lines, ``logs/supervisor.log``,
``cluster.json`` with states and restart counts, and ``yak ps`` reading it back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from yak.cli.main import app
from yak.cli.up_status import UpReport, Wakeup
from yak.supervisor import (
    ChildState,
    Exited,
    GaveUp,
    ManagedProcess,
    ProcessSpec,
    Restarted,
    RestartScheduled,
    Supervisor,
)


@pytest.fixture
def finished() -> subprocess.Popen[bytes]:
    """A real, already ended process to stand in for a child's current process."""
    popen = subprocess.Popen([sys.executable, "-c", "pass"])
    popen.wait()
    return popen


def _report(tmp_path: Path, *, restart: bool = True) -> tuple[UpReport, Wakeup]:
    wakeup = Wakeup()
    return UpReport(tmp_path, "local", secure=False, restart=restart, wakeup=wakeup), wakeup


def _broker(
    tmp_path: Path, supervisor: Supervisor, popen: subprocess.Popen[bytes]
) -> ManagedProcess:
    spec = ProcessSpec(
        name="broker-0", argv=("x",), log_path=tmp_path / "logs" / "b.log", url="http://b:1"
    )
    process = ManagedProcess(spec, popen)
    supervisor.processes.append(process)
    return process


def _exited(tmp_path: Path) -> Exited:
    tail = "\n".join(f"line {i}" for i in range(30))
    return Exited("broker-0", 41, "killed by SIGKILL", 12.5, tmp_path / "logs" / "b.log", tail)


def test_a_crash_is_printed_with_its_log_tail_logged_and_counted(
    tmp_path: Path, finished: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    report, wakeup = _report(tmp_path)
    etcd, services = Supervisor(), Supervisor()
    report.watch(etcd, services)
    broker = _broker(tmp_path, services, finished)

    report.event(_exited(tmp_path))
    wakeup.wait()  # the main thread is woken after every event
    broker.state, broker.restarts, broker.last_exit = ChildState.RUNNING, 1, "killed by SIGKILL"
    report.event(RestartScheduled("broker-0", 1.0, 1, 5, 300.0))
    report.event(Restarted("broker-0", finished.pid, 1))

    err = capsys.readouterr().err
    assert "broker-0 exited: killed by SIGKILL after 12.5 s up (pid 41)" in err
    assert "    | line 29" in err
    assert "line 19" not in err  # 10 lines on the console
    log = (tmp_path / "logs" / "supervisor.log").read_text()
    assert "broker-0: restarting in 1 s (crash 1 within 300 s; gives up at 5)" in log
    assert "    | line 0\n" in log  # up to 40 lines there: the whole tail of 30
    assert f"broker-0 restarted (pid {finished.pid}, restart 1)" in log

    document = json.loads((tmp_path / "cluster.json").read_text())
    (entry,) = document["processes"]
    assert entry["pid"] == finished.pid
    assert (entry["state"], entry["restarts"], entry["last_exit"]) == (
        "running",
        1,
        "killed by SIGKILL",
    )
    assert document["supervisor"]["running"] is True
    assert report.summary() == "restarts: broker-0 1"
    wakeup.close()


def test_a_give_up_is_loud_and_the_report_sees_nothing_left_running(
    tmp_path: Path, finished: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    report, wakeup = _report(tmp_path)
    services = Supervisor()
    report.watch(Supervisor(), services)
    broker = _broker(tmp_path, services, finished)
    assert not report.all_down()
    broker.state = ChildState.GAVE_UP
    report.event(GaveUp("broker-0", 5, 300.0))
    assert "GAVE UP on broker-0: 5 crashes within 300 s" in capsys.readouterr().err
    assert report.all_down()
    assert report.summary() == "restarts: broker-0 0 (gave up)"
    wakeup.close()


def test_with_no_restart_an_exit_says_it_is_not_restarted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, wakeup = _report(tmp_path, restart=False)
    report.watch(Supervisor(), Supervisor())
    report.event(_exited(tmp_path))
    assert "not restarted (--no-restart)" in capsys.readouterr().err
    wakeup.close()


def test_yak_ps_prints_the_states_and_says_when_yak_up_is_gone(
    tmp_path: Path, finished: subprocess.Popen[bytes]
) -> None:
    report, wakeup = _report(tmp_path)
    services = Supervisor()
    report.watch(Supervisor(), services)
    broker = _broker(tmp_path, services, finished)
    broker.state, broker.restarts, broker.last_exit = ChildState.BACKOFF, 3, "exited with code 3"
    report.write_status()
    runner = CliRunner()

    shown = runner.invoke(app, ["ps", "--data-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    (row,) = [line for line in shown.output.splitlines() if "broker-0" in line]
    assert [cell.strip() for cell in row.strip("│ ").split("│")] == [
        "broker-0",
        str(finished.pid),
        "backoff",
        "3",
        "exited with code 3",
        "http://b:1",
    ]
    assert "not running" not in shown.output  # this process wrote it and runs

    report.stopping()
    report.write_status()
    stopped = runner.invoke(app, ["ps", "--data-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert "is not running; this is its last run" in stopped.output
    wakeup.close()


def test_yak_ps_without_a_cluster_file_fails_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ps", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "has `yak up` run here?" in result.output


@pytest.mark.parametrize(
    ("seconds", "bound"),
    [
        ("0", "0.1"),
        ("-1", "0.1"),
        ("31", "30"),
    ],
)
def test_a_restart_backoff_out_of_range_is_refused_before_anything_starts(
    tmp_path: Path, seconds: str, bound: str
) -> None:
    argv = ["up", "--data-dir", str(tmp_path), "--restart-backoff", seconds]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "Invalid value for '--restart-backoff'" in result.output
    assert bound in result.output.split("--restart-backoff", 1)[1]  # the bound it broke
    assert list(tmp_path.iterdir()) == []  # no etcd, no cluster.json, no logs
