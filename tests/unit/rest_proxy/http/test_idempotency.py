"""Idempotency-Key: the shared record's protocol on an in-memory store and a fake clock, then the
three produce routes end to end in process (the native one through the fast lane)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak.clock import FakeClock
from yak.errors import (
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.idempotency_records import (
    IdempotencyRecord,
    idempotency_key,
    idempotency_prefix,
)
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak_rest_proxy.http.idempotency import Idempotency, fingerprint, parse_key
from yak_rest_proxy.settings import ProxySettings

KEYSPACE = Keyspace("idem")
DAY = 24 * 3600


class Counter:
    """A route's work: counts its runs, answers 200 with the run number."""

    def __init__(self) -> None:
        self.runs = 0
        self.started = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> Response:
        self.runs += 1
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        return Response(f'{{"run": {self.runs}}}', 200, media_type="application/json")


@pytest.fixture
async def store() -> AsyncIterator[MemoryMetadataStore]:
    memory = MemoryMetadataStore(FakeClock())
    yield memory
    await memory.aclose()


def _proxies(store: MemoryMetadataStore, clock: FakeClock, n: int = 2) -> list[Idempotency]:
    return [
        Idempotency(store, KEYSPACE, clock, window_s=DAY, work_timeout_ms=30_000) for _ in range(n)
    ]


async def test_a_retry_on_another_proxy_gets_the_first_answer(store: MemoryMetadataStore) -> None:
    clock = FakeClock()
    first, second = _proxies(store, clock)
    work = Counter()
    answer = await first.once("User:a", "k1", "print", work)
    again = await second.once("User:a", '"k1"', "print", work)  # quoted: a Structured Field
    assert work.runs == 1
    assert again.body == answer.body == b'{"run": 1}'
    assert again.headers["idempotent-replayed"] == "true"
    assert again.media_type == "application/json"
    other = await second.once("User:b", "k1", "print", work)  # principals never share keys
    assert other.body == b'{"run": 2}'


async def test_the_same_key_with_another_request_is_refused(store: MemoryMetadataStore) -> None:
    (proxy,) = _proxies(store, FakeClock(), 1)
    work = Counter()
    await proxy.once("User:a", "k", "print-1", work)
    with pytest.raises(IdempotencyKeyReusedError):
        await proxy.once("User:a", "k", "print-2", work)
    assert work.runs == 1


async def test_a_concurrent_duplicate_is_told_to_retry(store: MemoryMetadataStore) -> None:
    clock = FakeClock()
    first, second = _proxies(store, clock)
    work = Counter()
    work.gate = asyncio.Event()
    running = asyncio.create_task(first.once("User:a", "k", "p", work))
    await work.started.wait()
    with pytest.raises(IdempotencyKeyInUseError) as raised:
        await second.once("User:a", "k", "p", work)
    assert raised.value.retriable
    work.gate.set()
    await running
    replay = await second.once("User:a", "k", "p", work)
    assert replay.body == b'{"run": 1}'
    assert work.runs == 1


async def test_a_refused_request_frees_its_key(store: MemoryMetadataStore) -> None:
    (proxy,) = _proxies(store, FakeClock(), 1)

    async def refused() -> Response:
        raise UnknownTopicOrPartitionError("no such topic")

    with pytest.raises(UnknownTopicOrPartitionError):
        await proxy.once("User:a", "k", "p", refused)
    assert (await store.range_prefix(idempotency_prefix(KEYSPACE))).kvs == ()
    work = Counter()
    assert (await proxy.once("User:a", "k", "p", work)).body == b'{"run": 1}'


async def test_a_dead_proxys_reservation_is_taken_over_after_its_deadline(
    store: MemoryMetadataStore,
) -> None:
    clock = FakeClock()
    (proxy,) = _proxies(store, clock, 1)
    key = idempotency_key(KEYSPACE, "User:a", "k")
    lease = await store.grant_lease(DAY)
    deadline = clock.time_ms() + 35_000
    await store.put(key, IdempotencyRecord.pending("p", deadline).encode(), lease=lease)
    work = Counter()
    with pytest.raises(IdempotencyKeyInUseError):
        await proxy.once("User:a", "k", "p", work)
    clock.advance(36)
    assert (await proxy.once("User:a", "k", "p", work)).body == b'{"run": 1}'
    found = await store.get(key)
    assert found is not None
    assert IdempotencyRecord.decode(found.value).state == "done"


async def test_records_expire_after_the_window_and_leases_are_shared() -> None:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    proxy = Idempotency(store, KEYSPACE, clock, window_s=240, work_timeout_ms=1_000)
    work = Counter()
    await proxy.once("User:a", "k1", "p", work)
    await proxy.once("User:a", "k2", "p", work)
    clock.advance(239)
    assert (await proxy.once("User:a", "k1", "p", work)).body == b'{"run": 1}'
    clock.advance(250 - 239)  # window + period (240 / 24 = 10 s) since the lease was granted
    await asyncio.sleep(0)
    assert (await store.range_prefix(idempotency_prefix(KEYSPACE))).kvs == ()
    assert (await proxy.once("User:a", "k1", "p", work)).body == b'{"run": 3}'
    await store.aclose()


async def test_a_lost_lease_is_replaced(store: MemoryMetadataStore) -> None:
    (proxy,) = _proxies(store, FakeClock(), 1)
    work = Counter()
    await proxy.once("User:a", "k1", "p", work)
    (kv,) = (await store.range_prefix(idempotency_prefix(KEYSPACE))).kvs
    assert kv.lease
    await store.revoke_lease(kv.lease)  # e.g. etcd restored from a backup
    assert (await proxy.once("User:a", "k1", "p", work)).body == b'{"run": 2}'
    assert (await proxy.once("User:a", "k1", "p", work)).body == b'{"run": 2}'


@pytest.mark.parametrize("bad", ["", '""', "x" * 256, "tab\tkey", "é"])
def test_malformed_keys_are_refused(bad: str) -> None:
    with pytest.raises(InvalidRequestError, match="Idempotency-Key"):
        parse_key(bad)


def test_the_fingerprint_covers_path_query_type_and_body() -> None:
    def request(path: str, query: bytes = b"", content_type: bytes = b"a/b") -> Request:
        headers = [(b"content-type", content_type)]
        scope = {"type": "http", "method": "POST", "path": path, "query_string": query}
        return Request({**scope, "headers": headers})

    base = fingerprint(request("/topics/t"), b"{}")
    assert base == fingerprint(request("/topics/t"), b"{}")
    assert base != fingerprint(request("/topics/u"), b"{}")
    assert base != fingerprint(request("/topics/t", b"acks=1"), b"{}")
    assert base != fingerprint(request("/topics/t", content_type=b"c/d"), b"{}")
    assert base != fingerprint(request("/topics/t"), b"{ }")


def test_the_record_round_trips_and_refuses_garbage() -> None:
    record = IdempotencyRecord.done("f", 200, "application/json", b"\x00body")
    assert IdempotencyRecord.decode(record.encode()) == record
    with pytest.raises(ValueError, match="not an idempotency record"):
        IdempotencyRecord.decode(b'{"state": "lost"}')
    results = b'{"results": [' + b",".join([b'{"partition": 0, "offset": 1}'] * 10_000) + b"]}"
    large = IdempotencyRecord.done("f", 200, "application/json", results)
    assert len(large.encode()) < len(results) // 20  # kept compressed: far under etcd's limit
    assert IdempotencyRecord.decode(large.encode()).body == results


ROUTES = [
    ("/topics/t", {"records": [{"value": {"n": 1}}]}, "application/vnd.kafka.json.v2+json"),
    ("/topics/t/partitions/0", {"records": [{"value": 1}]}, "application/vnd.kafka.json.v2+json"),
    ("/api/v1/topics/t/records", {"records": [{"value": {"n": 1}}]}, "application/json"),
]


async def _log_end(client: httpx.AsyncClient) -> int:
    answer = await client.get("/topics/t/partitions/0/offsets")
    return int(answer.json()["end_offset"])


@pytest.mark.parametrize(("path", "body", "media"), ROUTES)
async def test_produce_routes_replay_and_refuse(
    tmp_path: Path, path: str, body: dict[str, object], media: str
) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        headers = {"Content-Type": media, "Idempotency-Key": "order-17"}
        first = await client.post(path, json=body, headers=headers)
        assert first.status_code == 200, first.text
        end = await _log_end(client)
        again = await client.post(path, json=body, headers=headers)
        assert again.status_code == 200
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert await _log_end(client) == end  # nothing written twice
        reused = await client.post(path, json={"records": [{"value": 2}]}, headers=headers)
        assert reused.status_code == 422
        code = reused.json().get("error_code", reused.json().get("code"))
        assert code in (42206, "IDEMPOTENCY_KEY_REUSED")
        plain = await client.post(path, json=body, headers={"Content-Type": media})
        assert plain.status_code == 200
        assert await _log_end(client) == end + 1  # without the header: written each time


async def test_the_openapi_document_declares_the_header(tmp_path: Path) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        document = (await client.get("/openapi.json")).json()
    templates = (
        "/topics/{topic}",
        "/topics/{topic}/partitions/{partition}",
        "/api/v1/topics/{topic}/records",
    )
    for template in templates:
        parameters = document["paths"][template]["post"]["parameters"]
        declared = [p for p in parameters if p["name"] == "Idempotency-Key"]
        assert [p["in"] for p in declared] == ["header"], template
        assert "422" in document["paths"][template]["post"]["responses"]  # KEY_REUSED


@pytest.mark.parametrize(("path", "body", "media"), ROUTES)
async def test_a_malformed_key_is_refused_and_nothing_written(
    tmp_path: Path, path: str, body: dict[str, object], media: str
) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings()) as (client, _app):
        headers = {"Content-Type": media, "Idempotency-Key": "k" * 300}
        answer = await client.post(path, json=body, headers=headers)
        assert answer.status_code == (400 if path.startswith("/api/") else 422), answer.text
        assert await _log_end(client) == 0


async def test_the_window_setting_zero_ignores_the_header(tmp_path: Path) -> None:
    async with proxy_and_broker(tmp_path, ProxySettings(idempotency_window_s=0)) as (client, _):
        headers = {"Idempotency-Key": "k"}
        for _ in range(2):
            answer = await client.post(
                "/api/v1/topics/t/records", json=ROUTES[2][1], headers=headers
            )
            assert "idempotent-replayed" not in answer.headers
        assert await _log_end(client) == 2
