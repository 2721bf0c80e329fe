"""Quotas, overrides and request limits in process (in-memory store, security off)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request

from yak.clock import FakeClock
from yak.errors import ThrottlingQuotaExceededError
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.sdk._client import throttle_ms
from yak.security.quota_overrides import QuotaOverrides
from yak.security.quota_store import QuotaConfig, QuotaStore
from yak_rest_proxy.http.body import read_body
from yak_rest_proxy.http.errors import install_error_handlers, v2_error
from yak_rest_proxy.http.read_timeout import BodyReadTimeout
from yak_rest_proxy.quotas.quotas import ANONYMOUS, QuotaKind, Quotas
from yak_rest_proxy.settings import ProxySettings

CLUSTER = "quotas"


@pytest.fixture
async def overrides() -> AsyncIterator[tuple[QuotaStore, QuotaOverrides]]:
    store = MemoryMetadataStore()
    keyspace = Keyspace(CLUSTER)
    following = QuotaOverrides(store, keyspace)
    await following.start()
    yield QuotaStore(store, keyspace), following
    await following.stop()
    await store.aclose()


async def test_quotas_off_admit_nothing(overrides: tuple[QuotaStore, QuotaOverrides]) -> None:
    _, following = overrides
    quotas = Quotas(following)
    assert not quotas.active
    assert quotas.admit(QuotaKind.PRODUCE) is None
    quotas.charge(QuotaKind.PRODUCE, None, 10**9)


async def test_default_quota_throttles_anonymous_with_retry_after(
    overrides: tuple[QuotaStore, QuotaOverrides],
) -> None:
    _, following = overrides
    clock = FakeClock()
    quotas = Quotas(following, produce_bytes_per_s=1_000, clock=clock)
    principal = quotas.admit(QuotaKind.PRODUCE)
    assert principal == ANONYMOUS
    quotas.charge(QuotaKind.PRODUCE, principal, 3_500)
    with pytest.raises(ThrottlingQuotaExceededError) as raised:
        quotas.admit(QuotaKind.PRODUCE)
    error = raised.value
    assert error.http_status == 429
    assert error.retriable
    assert error.details["retry_after_s"] == 3  # 2.5 s of debt, rounded up
    assert error.details["retry_after_ms"] == 2_500
    assert throttle_ms(error) == 2_500
    assert v2_error(error) == (429, 42901)
    assert quotas.admit(QuotaKind.FETCH) is None or quotas.rate(QuotaKind.FETCH, ANONYMOUS) == 0
    clock.advance(2.5)
    assert quotas.admit(QuotaKind.PRODUCE) == ANONYMOUS


async def test_an_override_in_the_store_applies_at_once(
    overrides: tuple[QuotaStore, QuotaOverrides],
) -> None:
    store, following = overrides
    quotas = Quotas(following, produce_bytes_per_s=0)
    assert not _active(quotas)
    revision = await store.put(ANONYMOUS, QuotaConfig(produce_bytes_per_s=100))
    await following.wait_for_revision(revision)
    assert _active(quotas)
    assert quotas.rate(QuotaKind.PRODUCE, ANONYMOUS) == 100
    assert quotas.rate(QuotaKind.FETCH, ANONYMOUS) == 0
    assert await store.list() == {ANONYMOUS: QuotaConfig(100, None)}
    await following.wait_for_revision(await store.delete(ANONYMOUS))
    assert not _active(quotas)


def test_quota_values_are_checked() -> None:
    assert QuotaConfig.from_json(QuotaConfig(5, None).to_json()) == QuotaConfig(5, None)
    with pytest.raises(ValueError, match="integers >= 0"):
        QuotaConfig.from_json(b'{"produce_bytes_per_s": -1}')


def test_limit_settings_from_the_environment() -> None:
    settings = ProxySettings.from_env(
        {
            "YAK_MAX_RECORDS_PER_REQUEST": "5",
            "YAK_QUOTA_PRODUCE_BYTES_PER_S": "1000",
            "YAK_QUOTA_FETCH_BYTES_PER_S": "2000",
            "YAK_MAX_CONSUMERS_PER_PRINCIPAL": "3",
            "YAK_REQUEST_READ_TIMEOUT_MS": "500",
        }
    )
    assert settings.max_records_per_request == 5
    assert (settings.quota_produce_bytes_per_s, settings.quota_fetch_bytes_per_s) == (1000, 2000)
    assert settings.max_consumers_per_principal == 3
    assert settings.request_read_timeout_ms == 500
    defaults = ProxySettings()
    assert defaults.quota_produce_bytes_per_s == 0
    assert defaults.max_records_per_request == 10_000
    with pytest.raises(ValueError, match="unlimited"):
        ProxySettings(quota_fetch_bytes_per_s=-1)


async def test_a_stalled_body_answers_408() -> None:
    """A raw socket sends headers and part of a body, then stalls."""
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/topics/{topic}")
    async def take(request: Request, topic: str) -> dict[str, int]:
        return {"size": len(await read_body(request, 1 << 20))}

    app.add_middleware(BodyReadTimeout, timeout_s=0.3)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            ok = await http.post("/topics/t", content=b"x" * 100)
            assert ok.json() == {"size": 100}
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /topics/t HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nabc")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        answer = head + await asyncio.wait_for(reader.readexactly(length), 5)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"40801" in answer
    finally:
        server.should_exit = True
        await serving
        listener.close()


def _active(quotas: Quotas) -> bool:
    return quotas.active  # a call, so the type checker does not narrow the property


async def test_a_stream_waits_out_its_debt_instead_of_failing(
    overrides: tuple[QuotaStore, QuotaOverrides],
) -> None:
    _, following = overrides
    quotas = Quotas(following, fetch_bytes_per_s=10_000)
    principal = quotas.principal()
    assert principal == ANONYMOUS
    started = asyncio.get_running_loop().time()
    await quotas.throttle(QuotaKind.FETCH, principal)  # a full bucket: no wait
    assert asyncio.get_running_loop().time() - started < 0.05
    quotas.charge(QuotaKind.FETCH, principal, 10_000 + 3_000)  # the burst, then 0.3 s of debt
    await quotas.throttle(QuotaKind.FETCH, principal)
    waited = asyncio.get_running_loop().time() - started
    assert 0.25 <= waited < 1.0
    await Quotas(following).throttle(QuotaKind.FETCH, principal)  # no quota: never waits
