"""EmbeddedEtcd and the ``etcd`` fixture start a real etcd and never leave one behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from yak.etcd_binary import find_etcd
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.supervisor import StartupError

pytestmark = pytest.mark.integration

CONFTEST = Path(__file__).parents[3] / "conftest.py"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_free_ports_are_distinct() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5
    assert all(1024 <= port <= 65535 for port in ports)


def test_the_chosen_binary_is_a_recommended_etcd_and_its_version_is_what_it_prints() -> None:
    binary = find_etcd()
    out = subprocess.run([binary.path, "--version"], capture_output=True, check=True, text=True)
    assert f"etcd Version: {binary.version}" in out.stdout
    assert binary.recommended or os.environ.get("YAK_ETCD_ALLOW_NOT_RECOMMENDED")


def test_start_answers_health_and_stop_leaves_no_process(tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    server = EmbeddedEtcd(tmp_path / "data", client_port, peer_port, unsafe_no_fsync=True)
    with server:
        pid = server.pid
        assert pid is not None
        assert server.running()
        assert httpx.get(f"{server.endpoint}/health").json()["health"] == "true"
    assert not pid_alive(pid)
    assert server.pid is None
    server.stop()  # idempotent
    log = server.log_path.read_text()
    assert log.startswith(f"yak: starting {server.binary.describe()}\n")  # which etcd ran
    assert "serving client traffic" in log  # 3.4 and 3.5 both say so once they listen


def test_a_failed_start_raises_and_leaves_no_process(tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    server = EmbeddedEtcd(tmp_path / "data", client_port, peer_port, ready_timeout_s=20)
    with (
        socket.create_server(("127.0.0.1", client_port)),  # etcd cannot bind its port
        pytest.raises(StartupError, match="exited with code"),
    ):
        server.start()
    assert not server.running()
    assert server.pid is None


@pytest.mark.parametrize("ending", ["assert False", "raise KeyboardInterrupt"])
def test_the_fixture_stops_etcd_when_a_test_fails_or_is_interrupted(
    tmp_path: Path, ending: str
) -> None:
    pid_file = tmp_path / "etcd.pid"
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    (tmp_path / "test_uses_etcd.py").write_text(
        "from pathlib import Path\n\n"
        "def test_it(etcd):\n"
        f"    Path({str(pid_file)!r}).write_text(str(etcd.pid))\n"
        f"    {ending}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0, run.stdout
    pid = int(pid_file.read_text())
    assert not pid_alive(pid), f"etcd {pid} outlived the test session:\n{run.stdout}"
