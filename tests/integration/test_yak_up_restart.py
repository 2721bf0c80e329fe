"""``yak up`` as a supervisor on real processes: a broker killed with ``kill -9`` comes back
with the same id, data folder and port and is healthy again; Ctrl-C during the backoff of its
next restart stops everything and leaves no process behind (checked in /proc).

Before the kill, etcd is compacted past the broker's registration: the restarted broker finds
its dead predecessor still registered (a broker's lease lasts 6 s, the restart comes after
1 s) and must wait for it from a revision etcd still has. Before that fix it exited with
RevisionCompactedError, the soak's failed starts (docs/soak.md); here that would show as a
second crash before the broker is ready again.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.ports import free_base_port, layout_offsets
from yak.metadata.etcd_store import EtcdMetadataStore

pytestmark = pytest.mark.integration


class Output:
    """``yak up``'s output lines, read on a thread so a wait can have a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stream = proc.stdout
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, text: str, timeout_s: float = 30) -> list[str]:
        """The lines up to the first one holding ``text`` (fails after ``timeout_s``)."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"no {text!r} within {timeout_s} s:\n" + "".join(self.lines))
            if line is None:
                pytest.fail(f"yak up ended before {text!r}:\n" + "".join(self.lines))
            self.lines.append(line)
            seen.append(line)
            if text in line:
                return seen

    def close(self) -> None:
        """After ``yak up`` ended: the reader sees the end of its output, then the pipe closes."""
        self._thread.join(timeout=30)
        self._stream.close()

    def rest(self) -> str:
        self._thread.join(timeout=30)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def _processes_of(data_dir: Path) -> list[int]:
    """Live processes (not zombies) started for ``data_dir``: its path is in their command
    line or their environment (``YAK_DATA_DIR``)."""
    marker = str(data_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in text and state != "Z":
            found.append(int(entry.name))
    return found


async def _compact(etcd_url: str) -> None:
    """Writes elsewhere in etcd, then a compaction past everything before them."""
    store = EtcdMetadataStore.from_url(etcd_url)
    try:
        revision = 0
        for i in range(20):
            revision = await store.put(f"test-churn/{i}", b"x")
        await store.compact(revision)
    finally:
        await store.aclose()


def _live_brokers(coordinator: str, want: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (id, port) of the registered brokers as the coordinator sees them, once they are
    ``want`` (another process's view: polled, for at most 10 s)."""
    live: list[tuple[int, int]] = []
    deadline = time.monotonic() + 10
    with httpx.Client(timeout=5) as client:
        while time.monotonic() < deadline:
            brokers = client.get(f"{coordinator}/admin/v1/cluster").json()["brokers"]
            live = [(b["broker_id"], b["port"]) for b in brokers if b.get("status", "up") == "up"]
            if live == want:
                break
            time.sleep(0.1)
    return live


def _broker(cluster: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in cluster["processes"] if p["name"] == "broker-0")


def test_a_killed_broker_comes_back_and_ctrl_c_during_a_backoff_leaves_nothing(
    tmp_path: Path,
) -> None:
    yak = Path(sys.executable).with_name("yak")
    base = free_base_port(layout_offsets(brokers=1, coordinators=1))
    argv = [str(yak), "up", "--data-dir", str(tmp_path), "--base-port", str(base)]
    # Backoffs of 4 s, then 8 s: the Ctrl-C below must land inside the second. With the default
    # 1 s and 2 s, a CI machine under the whole suite took longer than 2 s between the line being
    # printed and the test's signal arriving, and the restart had already happened.
    argv += ["--brokers", "1", "--coordinators", "1", "--restart-backoff", "4"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = Output(proc)
    try:
        output.until("is up")
        cluster = json.loads((tmp_path / "cluster.json").read_text())
        first = _broker(cluster)
        asyncio.run(_compact(cluster["etcd"]["url"]))

        os.kill(first["pid"], signal.SIGKILL)
        story = "".join(output.until("broker-0 is ready again"))
        assert "broker-0 exited: killed by SIGKILL" in story
        assert "broker-0: restarting in 4 s (crash 1 " in story
        assert "crash 2" not in story  # the restarted broker started first time
        second = _broker(json.loads((tmp_path / "cluster.json").read_text()))
        assert second["pid"] != first["pid"]
        assert (second["state"], second["restarts"]) == ("running", 1)
        assert second["last_exit"] == "killed by SIGKILL"
        assert second["url"] == first["url"] == f"http://127.0.0.1:{base + 20}"
        env = _environ(second["pid"])
        assert env["YAK_NODE_ID"] == "0"
        assert env["YAK_DATA_DIR"] == str(tmp_path / "broker-0")
        with httpx.Client(timeout=5) as client:
            assert client.get(f"{second['url']}/readyz").status_code == 200
        coordinator = cluster["processes"][0]["url"]
        assert _live_brokers(coordinator, want=[(0, base + 20)]) == [(0, base + 20)]

        os.kill(second["pid"], signal.SIGKILL)
        output.until("broker-0: restarting in 8 s")
        proc.send_signal(signal.SIGINT)  # during the 8 s backoff
        proc.wait(timeout=30)
        rest = output.rest()
        assert proc.returncode == 0, rest
        after = rest[rest.index("broker-0: restarting in 8 s") :]
        assert "restarted" not in after  # the pending restart did not happen
        assert "stopping (SIGINT) ..." in after
        assert "restarts: broker-0 1" in after
        assert "stopped." in after
        assert _processes_of(tmp_path) == []
        final = json.loads((tmp_path / "cluster.json").read_text())
        assert final["supervisor"]["running"] is False
        assert {p["state"] for p in [final["etcd"], *final["processes"]]} == {"stopped"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        output.close()


def test_sigterm_during_startup_stops_what_was_started(tmp_path: Path) -> None:
    """SIGTERM while the services are still starting: what runs is stopped, nothing else
    starts (before, a SIGTERM then ended ``yak up`` at once and left its children running)."""
    yak = Path(sys.executable).with_name("yak")
    base = free_base_port(layout_offsets(brokers=1, coordinators=1))
    argv = [str(yak), "up", "--data-dir", str(tmp_path), "--base-port", str(base)]
    argv += ["--brokers", "1", "--coordinators", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = Output(proc)
    try:
        output.until("coordinator-0")  # etcd and a coordinator run; the broker is starting
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        rest = output.rest()
        assert proc.returncode == 0, rest
        assert "stopping (SIGTERM) ..." in rest
        assert "is up" not in rest
        assert "rest-proxy" not in rest
        assert _processes_of(tmp_path) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        output.close()
