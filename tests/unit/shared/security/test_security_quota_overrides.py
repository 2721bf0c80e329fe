"""QuotaOverrides on the in-memory store: overrides written by QuotaStore are followed (put,
change, delete) and a malformed value is logged and ignored."""

from __future__ import annotations

import logging

import pytest

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security.quota_overrides import QuotaOverrides
from yak.security.quota_store import QuotaConfig, QuotaStore, quota_prefix

KS = Keyspace("quotas")


async def test_overrides_are_followed_and_malformed_ones_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryMetadataStore()
    writer = QuotaStore(store, KS)
    await writer.put("User:early", QuotaConfig(produce_bytes_per_s=5))
    following = QuotaOverrides(store, KS)
    await following.start()
    try:
        assert following.overrides == {"User:early": QuotaConfig(produce_bytes_per_s=5)}
        await following.wait_for_revision(
            await writer.put("User:alice", QuotaConfig(fetch_bytes_per_s=100))
        )
        await following.wait_for_revision(
            await writer.put("User:alice", QuotaConfig(fetch_bytes_per_s=200))
        )
        assert following.overrides["User:alice"].fetch_bytes_per_s == 200
        await following.wait_for_revision(await writer.delete("User:early"))
        assert "User:early" not in following.overrides
        with caplog.at_level(logging.ERROR, logger="yak.security.quota_overrides"):
            revision = await store.put(f"{quota_prefix(KS)}User:bad", b'{"fetch_bytes_per_s": -1}')
            await following.wait_for_revision(revision)
        assert "User:bad" not in following.overrides
        assert any("malformed quota" in r.getMessage() for r in caplog.records)
    finally:
        await following.stop()
        await store.aclose()
