"""The admin API and the ``yak topics``/``yak cluster`` CLI against a real coordinator."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
import pytest

from yak.etcd_server import free_ports
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace

pytestmark = pytest.mark.integration

YAK = str(Path(sys.executable).with_name("yak"))


async def yak(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        YAK, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def cluster_keys(store: EtcdMetadataStore, ks: Keyspace) -> list[tuple[bytes, int]]:
    result = await store.range_prefix(ks.root)
    return [(kv.key, kv.mod_revision) for kv in result.kvs if not kv.key.endswith(b"controller")]


INVALID = [
    ({"name": "no/slash"}, 400, "INVALID_TOPIC_EXCEPTION"),
    ({"name": "t", "partitions": 0}, 400, "INVALID_PARTITIONS"),
    ({"name": "t", "replication_factor": 3}, 400, "INVALID_REPLICATION_FACTOR"),
    ({"name": "t", "configs": {"retention.ms": "x"}}, 400, "INVALID_CONFIG"),
    ({"name": "t", "configs": {"bogus": "1"}}, 400, "INVALID_CONFIG"),
    ({"name": "t", "partitions": "lots"}, 400, "INVALID_REQUEST"),
    ({"name": "exists"}, 409, "TOPIC_ALREADY_EXISTS"),
]


async def test_invalid_requests_change_nothing(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1, 2)
    c0 = await coordinators("c0")
    await wait_for_controller([c0.url])
    async with httpx.AsyncClient(base_url=f"{c0.url}/admin/v1", timeout=10) as http:
        assert (await http.post("/topics", json={"name": "exists"})).status_code == 201
        before = await cluster_keys(etcd_store, keyspace)
        for body, status, code in INVALID:
            response = await http.post("/topics", json=body)
            assert (response.status_code, response.json()["code"]) == (status, code), body
            assert response.json()["message"]
        assert await cluster_keys(etcd_store, keyspace) == before
        response = await http.post("/topics/exists/partitions", json={"count": 1})
        assert (response.status_code, response.json()["code"]) == (400, "INVALID_PARTITIONS")
        response = await http.delete("/topics/missing")
        assert (response.status_code, response.json()["code"]) == (
            404,
            "UNKNOWN_TOPIC_OR_PARTITION",
        )
        assert await cluster_keys(etcd_store, keyspace) == before


async def test_cli_topics_and_cluster(
    coordinators, brokers, wait_for_controller, tmp_path: Path
) -> None:
    await brokers(1, 2, 3)
    c0 = await coordinators("c0")
    c1 = await coordinators("c1")
    await wait_for_controller([c0.url])
    # Like `yak up`: the CLI finds the coordinators in <data-dir>/cluster.json.
    (tmp_path / "cluster.json").write_text(
        json.dumps(
            {
                "processes": [
                    {"name": "coordinator-0", "url": c1.url},
                    {"name": "coordinator-1", "url": c0.url},
                ]
            }
        )
    )
    where = ("--data-dir", str(tmp_path))

    rc, out, err = await yak(
        "topics", "create", "clicks", "--partitions", "3", "--replication-factor", "2",
        "--config", "retention.ms=60000", *where,
    )  # fmt: skip
    assert rc == 0, err
    assert "created topic clicks" in out

    rc, out, err = await yak("topics", "list", *where)
    assert rc == 0, err
    assert "clicks" in out

    rc, out, err = await yak("topics", "describe", "clicks", "--coordinator", c0.url)
    assert rc == 0, err
    assert "retention.ms=60000" in out
    assert "replication factor 2" in out

    rc, out, err = await yak(
        "topics", "alter", "clicks", "--partitions", "4", "--config", "cleanup.policy=compact",
        *where,
    )  # fmt: skip
    assert rc == 0, err
    assert "cleanup.policy=compact" in out

    rc, out, err = await yak("cluster", "status", *where)
    assert rc == 0, err
    assert "controller: c0" in out
    assert "3 brokers, 3 up" in out

    rc, out, err = await yak("topics", "create", "clicks", *where)
    assert rc == 1
    assert err.strip().startswith("error: TOPIC_ALREADY_EXISTS:")
    assert "Traceback" not in err

    rc, out, err = await yak("topics", "delete", "clicks", *where)
    assert rc == 0, err
    assert "topic clicks deleted" in out

    rc, out, err = await yak("topics", "describe", "clicks", *where)
    assert rc == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err

    (port,) = free_ports(1)
    rc, out, err = await yak("topics", "list", "--coordinator", f"http://127.0.0.1:{port}")
    assert rc == 1
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error: NETWORK_EXCEPTION: cannot reach the coordinator")
