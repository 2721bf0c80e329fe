"""``yak up`` starts the local cluster as real processes and Ctrl-C stops all of them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from tests.integration.ports import free_base_port, layout_offsets
from tests.integration.yak_up_process import yak_up
from yak.etcd_binary import find_etcd

pytestmark = pytest.mark.integration


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_yak_up_starts_every_process_and_ctrl_c_stops_them(tmp_path: Path) -> None:
    base = free_base_port(layout_offsets(brokers=1))
    args = ("--data-dir", str(tmp_path), "--base-port", str(base), "--brokers", "1")
    with yak_up(*args, stop_timeout_s=30) as lines:
        chosen = find_etcd().describe()  # e.g. etcd 3.4.23 (/usr/bin/etcd, Debian's etcd-server)
        assert f"{chosen}\n" in lines, lines  # yak up says which etcd runs
        assert f"running {chosen}" in (tmp_path / "logs" / "supervisor.log").read_text()

        cluster = json.loads((tmp_path / "cluster.json").read_text())
        assert cluster["etcd"]["url"] == f"http://127.0.0.1:{base}"
        names = [p["name"] for p in cluster["processes"]]
        assert names == ["coordinator-0", "coordinator-1", "broker-0", "rest-proxy", "console"]
        with httpx.Client(timeout=5) as client:
            assert client.get(f"{cluster['etcd']['url']}/health").json()["health"] == "true"
            for process in cluster["processes"]:
                assert client.get(f"{process['url']}/healthz").status_code == 200
                assert Path(process["log"]).is_file()
        pids = [cluster["etcd"]["pid"], *(p["pid"] for p in cluster["processes"])]
        assert all(_pid_alive(pid) for pid in pids)
    assert "stopped." in lines[-1]  # what yak up printed after the Ctrl-C
    assert not [pid for pid in pids if _pid_alive(pid)]
