"""What only the etcd adapter can show: failures of the server become MetadataStoreError."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from yak.errors import MetadataStoreError
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.etcd_store import EtcdMetadataStore

WAIT_S = 10.0


def test_from_url_takes_host_and_port() -> None:
    store = EtcdMetadataStore.from_url("http://10.1.2.3:2479", timeout_s=2.0)
    assert (store.host, store.port, store.timeout_s) == ("10.1.2.3", 2479, 2.0)
    assert EtcdMetadataStore.from_url("localhost:2379").host == "localhost"


async def test_an_unreachable_server_raises_metadata_store_error() -> None:
    (port,) = free_ports(1)  # nothing listens there
    store = EtcdMetadataStore("127.0.0.1", port, timeout_s=2.0)
    try:
        with pytest.raises(MetadataStoreError):
            await store.get(b"k")
        with pytest.raises(MetadataStoreError):
            await store.grant_lease(5)
        with pytest.raises(MetadataStoreError):
            async with store.watch_prefix(b"k"):
                pass
    finally:
        await store.aclose()


@pytest.mark.integration
async def test_losing_the_server_ends_a_watch_with_metadata_store_error(tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    server = EmbeddedEtcd(tmp_path, client_port, peer_port, unsafe_no_fsync=True)
    await asyncio.to_thread(server.start)
    store = EtcdMetadataStore.from_url(server.endpoint, timeout_s=2.0)
    try:
        async with store.watch_prefix(b"/w/") as watch:
            await store.put(b"/w/a", b"1")
            assert (await asyncio.wait_for(anext(watch), WAIT_S)).key == b"/w/a"
            await asyncio.to_thread(server.stop)
            with pytest.raises(MetadataStoreError):
                await asyncio.wait_for(anext(watch), WAIT_S)
        with pytest.raises(MetadataStoreError):
            await store.put(b"/w/b", b"2")
    finally:
        await store.aclose()
        await asyncio.to_thread(server.stop)


@pytest.mark.integration
async def test_the_etcd_store_fixture_reaches_the_session_etcd(
    etcd_store: EtcdMetadataStore, etcd_prefix: str, etcd: EmbeddedEtcd
) -> None:
    assert etcd_store.port == etcd.client_port
    revision = await etcd_store.put(f"{etcd_prefix}k", b"v")
    found = await etcd_store.get(f"{etcd_prefix}k")
    assert found is not None
    assert found.mod_revision == revision


@pytest.mark.integration
async def test_cancelled_read_only_transactions_leave_the_server_running(tmp_path: Path) -> None:
    """etcd 3.5.1 panics and exits when a read-only txn is cancelled while it reads; the
    adapter never cancels one mid-flight (the rest-proxy's fuzz run took etcd down so)."""
    from tests.conftest import start_etcd
    from yak.metadata.store import GetOp, PutOp

    server = start_etcd(tmp_path)
    store = EtcdMetadataStore.from_url(server.endpoint)
    try:
        keys = [f"/cancel/{i}".encode() for i in range(50)]
        await store.txn([], [PutOp(k, b"x" * 200) for k in keys])
        for round_ in range(300):
            call = asyncio.ensure_future(store.txn([], [GetOp(k) for k in keys]))
            await asyncio.sleep((round_ % 7) * 0.0002)
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError, MetadataStoreError):
                await call
        assert server.running(), "etcd died"
        assert (await store.get(keys[0])) is not None
    finally:
        await store.aclose()
        server.stop()


@pytest.mark.integration
async def test_a_prefix_is_read_in_pages_as_one_snapshot(
    etcd: EmbeddedEtcd, etcd_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefix of more keys than a page: every key once, in order, and the later pages read
    at the first page's revision, so a write between pages is not seen half-way."""
    store = EtcdMetadataStore("127.0.0.1", etcd.client_port, range_page=2)
    try:
        for index in range(5):
            last = await store.put(f"{etcd_prefix}k{index}", str(index).encode())
        await store.put(f"{etcd_prefix[:-1]}~outside", b"x")  # beyond the prefix
        whole = await store.range_prefix(etcd_prefix)
        assert [kv.key.decode()[len(etcd_prefix) :] for kv in whole.kvs] == [
            f"k{index}" for index in range(5)
        ]
        assert [kv.value for kv in whole.kvs] == [str(index).encode() for index in range(5)]
        assert whole.revision >= last

        pages = 0
        unary = store._unary

        async def write_between_pages(stub: str, method: str, request: Any, **kw: Any) -> Any:
            nonlocal pages
            answer = await unary(stub, method, request, **kw)
            if method == "Range":
                pages += 1
                if pages == 1:  # after the first page: a new key that sorts last
                    await store.put(f"{etcd_prefix}k9", b"late")
            return answer

        monkeypatch.setattr(store, "_unary", write_between_pages)
        read = await store.range_prefix(etcd_prefix)
        assert pages == 3
        assert [kv.key.decode()[len(etcd_prefix) :] for kv in read.kvs] == [
            f"k{index}" for index in range(5)
        ]
        monkeypatch.undo()
        after = await store.range_prefix(etcd_prefix)
        assert after.kvs[-1].value == b"late"
        assert after.revision > read.revision
    finally:
        await store.aclose()
