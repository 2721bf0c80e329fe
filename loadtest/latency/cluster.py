"""The cluster one build is measured on: etcd, a coordinator, three brokers and a rest-proxy
running that build's code (``yak_cluster``), with the pids whose CPU the benchmark reads
(``Yak``). Every process is stopped on exit and its log kept under ``LOGS``.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtest.latency.baseline import ROOT
from loadtest.local_cluster import LocalCluster, local_cluster, start_etcd

__all__ = ["LOGS", "Yak", "yak_cluster"]

LOGS = ROOT / ".artifacts" / "bench-latency-logs"


@dataclass
class Yak:
    """A running cluster of one build: its processes' pids by name (``etcd``, ``coordinator``,
    ``broker-N``, ``rest-proxy-0``) and the code path its services run on."""

    cluster: LocalCluster
    python_path: tuple[str, ...]
    pids: dict[str, int]

    @property
    def proxy_url(self) -> str:
        return self.cluster.proxy_url(0)


@contextmanager
def yak_cluster(label: str, python_path: tuple[str, ...]) -> Iterator[Yak]:
    """etcd, a coordinator, 3 brokers and a rest-proxy on ``python_path``'s code; all
    stopped on exit, their logs then copied to ``LOGS/<label>``."""
    with tempfile.TemporaryDirectory(prefix=f"yak-bench-latency-{label}-") as tmp:
        folder = Path(tmp)
        etcd = start_etcd(folder, unsafe_no_fsync=True)
        try:
            cluster_id = f"latency{uuid.uuid4().hex[:8]}"
            with local_cluster(folder, etcd, cluster_id, python_path=python_path) as cluster:
                cluster.start_proxy(0)
                pids = {p.spec.name: p.pid for p in cluster.supervisor.processes}
                if etcd.pid is not None:
                    pids["etcd"] = etcd.pid
                yield Yak(cluster, python_path, pids)
        finally:
            etcd.stop()
            if (folder / "logs").is_dir():  # every process's log, kept for a post-mortem
                shutil.rmtree(LOGS / label, ignore_errors=True)
                shutil.copytree(folder / "logs", LOGS / label)
