"""The rest-proxy's offset reset of a group with nothing to reset: a group with no committed
offsets, asked to reset "its" topics, is not found (404), not a malformed request."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from yak.api.groups import OffsetResetRequest
from yak.clock import FakeClock
from yak.errors import GroupIdNotFoundError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak_rest_proxy.consume.group_admin import GroupAdmin

KS = Keyspace("test")


async def test_resetting_a_group_without_committed_offsets_finds_no_group() -> None:
    store = MemoryMetadataStore(FakeClock())
    cache = SimpleNamespace(snapshot=SimpleNamespace(topics={}))
    # Nothing is read from the brokers: no reader.
    admin = GroupAdmin(store, KS, cast(Any, cache), cast(Any, None), clock=FakeClock())
    with pytest.raises(GroupIdNotFoundError) as refused:
        await admin.reset("g", OffsetResetRequest(to="earliest"))
    assert refused.value.http_status == 404
    assert "no committed offsets" in refused.value.message
