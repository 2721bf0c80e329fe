"""A watch whose stream goes silent — its member stopped, as a network partition leaves it: no
reset, no error — resumes on another member by its progress probe alone, with the HTTP/2
keepalive turned off; and a quiet watch on a healthy member is never left (etcd answers its
probes)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from yak.errors import MetadataStoreError
from yak.etcd_cluster import EmbeddedEtcdCluster
from yak.metadata import etcd_store
from yak.metadata.etcd_store import EtcdMetadataStore

pytestmark = pytest.mark.integration

#: Default probe: a quiet stream is asked after 2 s and left 3 s later.
RESUMED_WITHIN_S = 20.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedEtcdCluster]:
    with EmbeddedEtcdCluster(tmp_path / "etcd", 3, unsafe_no_fsync=True) as started:
        yield started


@pytest.fixture
def no_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Channels without HTTP/2 keepalive pings: only the watch's own probe can tell."""
    monkeypatch.setattr(etcd_store, "_KEEPALIVE", ())


async def _put_until_it_lands(store: EtcdMetadataStore, key: bytes, value: bytes) -> int:
    """When the stopped member led the raft group, writes time out until the others elect."""
    deadline = asyncio.get_running_loop().time() + RESUMED_WITHIN_S
    while True:
        try:
            return await store.put(key, value)
        except MetadataStoreError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_a_silent_stream_resumes_on_another_member_without_keepalive(
    cluster: EmbeddedEtcdCluster, no_keepalive: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="yak.metadata")
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=2.0)
    other = EtcdMetadataStore.from_url(cluster.members[2].endpoint, timeout_s=2.0)
    stopped = None
    try:
        async with store.watch_prefix(b"/q/") as watch:
            await other.put(b"/q/1", b"1")
            assert (await asyncio.wait_for(anext(watch), RESUMED_WITHIN_S)).key == b"/q/1"
            stopped = cluster.members[cluster.index_of(store.port)].pid
            assert stopped is not None
            assert stopped != cluster.members[2].pid
            os.kill(stopped, signal.SIGSTOP)
            # Missed by the silent stream; the watch's store itself makes no call.
            revisions = [await _put_until_it_lands(other, b"/q/2", b"2")]
            revisions.append(await other.put(b"/q/3", b"3"))
            events = [await asyncio.wait_for(anext(watch), RESUMED_WITHIN_S) for _ in range(2)]
            assert [(e.key, e.mod_revision) for e in events] == [
                (b"/q/2", revisions[0]),
                (b"/q/3", revisions[1]),
            ]
        assert "answered nothing" in caplog.text
        assert "resumed at revision" in caplog.text
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        await store.aclose()
        await other.aclose()


async def test_a_quiet_watch_on_a_healthy_member_is_kept(
    cluster: EmbeddedEtcdCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """etcd answers every progress request: a stream with nothing to say is not left."""
    caplog.set_level(logging.INFO, logger="yak.metadata")
    probe = etcd_store.WatchProbe(interval_s=0.2, timeout_s=1.0)
    store = EtcdMetadataStore.from_url(cluster.endpoints, timeout_s=2.0, watch_probe=probe)
    try:
        async with store.watch_prefix(b"/k/") as watch:
            await asyncio.sleep(3.0)  # ~15 probes, each answered
            revision = await store.put(b"/k/1", b"1")
            event = await asyncio.wait_for(anext(watch), 10)
            assert (event.key, event.mod_revision) == (b"/k/1", revision)
        assert "resumed" not in caplog.text
        assert "answered nothing" not in caplog.text
        assert "not answering" not in caplog.text
    finally:
        await store.aclose()
