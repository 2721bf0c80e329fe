"""RateLimit headers: the bucket's state as the draft's fields, on the answers a quota applies
to (the fast lane's too), with Retry-After on the 429; none without a quota or when off."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak.clock import FakeClock
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security.quota_overrides import QuotaOverrides
from yak_rest_proxy.http.ratelimit_headers import RateLimitState, rate_limit_headers
from yak_rest_proxy.quotas.quotas import ANONYMOUS, QuotaKind, Quotas
from yak_rest_proxy.settings import ProxySettings

QUOTA = 1_000
NATIVE = "/api/v1/topics/t/records"


def _body(size: int) -> dict[str, object]:
    return {"records": [{"value": "x" * size}], "value_encoding": "string"}


def test_the_state_of_a_bucket() -> None:
    assert RateLimitState.of_bucket(1_000, 1.0, 1_000) == RateLimitState(1_000, 1_000, 0, 1)
    assert RateLimitState.of_bucket(1_000, 1.0, 250.5) == RateLimitState(1_000, 250, 1, 1)
    in_debt = RateLimitState.of_bucket(1_000, 2.0, -1_500)  # 3.5 s to refill 2,000 + 1,500
    assert in_debt == RateLimitState(2_000, 0, 4, 2)
    assert rate_limit_headers(in_debt) == [
        (b"ratelimit-limit", b"2000"),
        (b"ratelimit-remaining", b"0"),
        (b"ratelimit-reset", b"4"),
        (b"ratelimit-policy", b"2000;w=2"),
    ]


async def test_quotas_report_the_principals_usage() -> None:
    store = MemoryMetadataStore()
    overrides = QuotaOverrides(store, Keyspace("rl"))
    await overrides.start()
    clock = FakeClock()
    quotas = Quotas(overrides, produce_bytes_per_s=QUOTA, clock=clock)
    assert quotas.usage(QuotaKind.PRODUCE, ANONYMOUS) == RateLimitState(QUOTA, QUOTA, 0, 1)
    assert quotas.usage(QuotaKind.FETCH, ANONYMOUS) is None  # no fetch quota
    quotas.charge(QuotaKind.PRODUCE, ANONYMOUS, 400)
    assert quotas.usage(QuotaKind.PRODUCE, ANONYMOUS) == RateLimitState(QUOTA, 600, 1, 1)
    clock.advance(0.4)
    assert quotas.usage(QuotaKind.PRODUCE, ANONYMOUS) == RateLimitState(QUOTA, QUOTA, 0, 1)
    await overrides.stop()
    await store.aclose()


async def test_produce_answers_carry_the_headers_and_the_429_retry_after(
    tmp_path: Path,
) -> None:
    settings = ProxySettings(quota_produce_bytes_per_s=QUOTA)
    async with proxy_and_broker(tmp_path, settings) as (client, _app):
        first = await client.post(NATIVE, json=_body(300))  # the fast lane's answer
        assert first.status_code == 200
        assert first.headers["ratelimit-limit"] == str(QUOTA)
        assert first.headers["ratelimit-policy"] == f"{QUOTA};w=1"
        remaining = int(first.headers["ratelimit-remaining"])
        assert remaining < QUOTA - 300  # the body's bytes are counted
        assert first.headers["ratelimit-reset"] == "1"
        v2 = await client.post(
            "/topics/t",
            json={"records": [{"value": "y" * 800}]},
            headers={"content-type": "application/vnd.kafka.json.v2+json"},
        )
        assert v2.status_code == 200
        assert v2.headers["ratelimit-remaining"] == "0"  # into debt now
        refused = await client.post(NATIVE, json=_body(10))
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers["ratelimit-remaining"] == "0"
        assert int(refused.headers["ratelimit-reset"]) >= 1
        metadata = await client.get("/topics")  # no quota applies to it
        assert "ratelimit-limit" not in metadata.headers


@pytest.mark.parametrize(
    "settings",
    [ProxySettings(), ProxySettings(quota_produce_bytes_per_s=QUOTA, ratelimit_headers=False)],
    ids=["no quota", "headers off"],
)
async def test_no_headers_without_a_quota_or_when_off(
    tmp_path: Path, settings: ProxySettings
) -> None:
    async with proxy_and_broker(tmp_path, settings) as (client, _app):
        answer = await client.post(NATIVE, json=_body(10))
    assert answer.status_code == 200
    assert not any(name.startswith("ratelimit") for name in answer.headers)


def test_the_setting_reads_its_variable() -> None:
    assert ProxySettings.from_env({}).ratelimit_headers
    assert not ProxySettings.from_env({"YAK_RATELIMIT_HEADERS": "off"}).ratelimit_headers
    with pytest.raises(ValueError, match="YAK_RATELIMIT_HEADERS must be on or off"):
        ProxySettings.from_env({"YAK_RATELIMIT_HEADERS": "sometimes"})


async def test_the_headers_are_exposed_to_pages_by_default(tmp_path: Path) -> None:
    settings = ProxySettings(quota_produce_bytes_per_s=QUOTA, cors_origins=("http://page",))
    async with proxy_and_broker(tmp_path, settings) as (client, _app):
        answer = await client.post(NATIVE, json=_body(10), headers={"Origin": "http://page"})
    assert answer.headers["access-control-allow-origin"] == "http://page"
    exposed = answer.headers["access-control-expose-headers"]
    assert all(name in exposed for name in ("RateLimit-Remaining", "Retry-After"))
    assert isinstance(answer, httpx.Response)
    assert answer.headers["ratelimit-limit"] == str(QUOTA)
