"""``yak up --etcd-members 3``: three etcd members on loopback, every service given all three;
SIGKILL of the member every service talks to (the first) costs nothing: brokers keep their
registrations on the same leases, records are produced, and a topic created after the kill
reaches the brokers through their watches, now on another member."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.ports import free_base_port, layout_offsets
from tests.integration.yak_up_process import yak_cli, yak_up
from yak.metadata.etcd_store import EtcdMetadataStore

pytestmark = pytest.mark.integration

_BIN = Path(sys.executable).parent
_LEASE_TTL_S = 6  # the brokers' default


class Up:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.document: dict[str, Any] = json.loads((data_dir / "cluster.json").read_text())

    def url(self, name: str) -> str:
        (process,) = [p for p in self.document["processes"] if p["name"] == name]
        return str(process["url"])

    def yak(self, *args: str) -> str:
        return yak_cli(self.data_dir, *args)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    data_dir = tmp_path_factory.mktemp("etcd-members")
    offsets = (*layout_offsets(brokers=2, coordinators=1), 2, 3, 4, 5)
    base = free_base_port(offsets)
    args = ("--data-dir", str(data_dir), "--base-port", str(base))
    with yak_up(
        *args, "--brokers", "2", "--coordinators", "1", "--etcd-members", "3", "--no-restart"
    ):
        yield Up(data_dir)


def _produce(proxy: str, topic: str, deadline_s: float = 30.0) -> None:
    records = {"records": [{"value": {"n": n}} for n in range(3)]}
    deadline = time.monotonic() + deadline_s
    with httpx.Client(timeout=10) as http:
        while (
            answer := http.post(f"{proxy}/api/v1/topics/{topic}/records", json=records)
        ).status_code != 200:
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.2)


async def _registrations(endpoints: str) -> dict[bytes, int]:
    store = EtcdMetadataStore.from_url(endpoints)
    try:
        found = await store.range_prefix("/yak/local/brokers/")
        return {kv.key: kv.lease for kv in found.kvs}
    finally:
        await store.aclose()


def test_three_members_every_service_knows_all(up: Up) -> None:
    members = up.document["etcd_members"]
    assert [m["name"] for m in members] == ["etcd-0", "etcd-1", "etcd-2"]
    urls = ",".join(m["url"] for m in members)
    for process in up.document["processes"]:
        environ = Path(f"/proc/{process['pid']}/environ").read_bytes().split(b"\0")
        assert f"YAK_ETCD={urls}".encode() in environ, process["name"]
    for index in range(3):
        assert (up.data_dir / f"etcd-{index}" / "member").is_dir()


def test_killing_the_member_in_use_costs_the_services_nothing(up: Up) -> None:
    members = up.document["etcd_members"]
    survivors = ",".join(m["url"] for m in members[1:])
    topic = f"before-{uuid.uuid4().hex[:6]}"
    up.yak("topics", "create", topic, "--partitions", "2", "--replication-factor", "2")
    proxy = up.url("rest-proxy")
    _produce(proxy, topic)
    leases = asyncio.run(_registrations(survivors))
    assert len(leases) == 2

    os.kill(members[0]["pid"], signal.SIGKILL)  # every service starts on the first member
    time.sleep(2 * _LEASE_TTL_S)  # the brokers' leases live only if refreshed elsewhere

    assert asyncio.run(_registrations(survivors)) == leases  # same keys, same leases
    _produce(proxy, topic, deadline_s=10)
    after = f"after-{uuid.uuid4().hex[:6]}"  # the brokers learn of it through their watches
    up.yak("topics", "create", after, "--partitions", "2", "--replication-factor", "2")
    _produce(proxy, after)
    status = up.yak("cluster", "status")
    assert "offline: 0" in status.replace("Offline", "offline"), status
