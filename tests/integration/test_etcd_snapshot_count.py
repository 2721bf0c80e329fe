"""The etcd ``yak up`` runs snapshots every ``SNAPSHOT_COUNT`` entries (a bounded raft log in
memory, ``docs/soak.md``): the installed etcd accepts the flag and serves, and says so in its
metrics (a snapshot once that many writes were applied). It runs with raft's pre-vote (a
member cut off and back does not force an election, ``docs/chaos.md``): its configuration log
line says so."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from yak.etcd_server import SNAPSHOT_COUNT, EmbeddedEtcd, free_ports

pytestmark = pytest.mark.integration


def test_the_embedded_etcd_snapshots_every_snapshot_count_entries(tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    server = EmbeddedEtcd(tmp_path / "etcd", client_port, peer_port, unsafe_no_fsync=True)
    assert f"--snapshot-count={SNAPSHOT_COUNT}" in server.argv()
    with server.start(), httpx.Client(base_url=server.endpoint, timeout=5.0) as client:
        key = base64.b64encode(b"/yak/test/key").decode()
        for value in range(SNAPSHOT_COUNT + 200):
            body = {"key": key, "value": base64.b64encode(str(value).encode()).decode()}
            assert client.post("/v3/kv/put", json=body).status_code == 200
        metrics = client.get("/metrics").text
    snapshots = [
        line
        for line in metrics.splitlines()
        if line.startswith("etcd_debugging_snap_save_total_duration_seconds_count")
    ]
    assert snapshots, metrics[:500]
    assert float(snapshots[0].split()[-1]) >= 1


def test_the_embedded_etcd_runs_with_pre_vote(tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    server = EmbeddedEtcd(tmp_path / "etcd", client_port, peer_port, unsafe_no_fsync=True)
    assert "--pre-vote" in server.argv()
    with server.start(), httpx.Client(base_url=server.endpoint, timeout=5.0) as client:
        assert client.get("/health").json()["health"] == "true"
    logged = server.log_path.read_text()
    assert '"pre-vote":true' in logged, logged[:2000]
