"""CORS: preflights answered in front, allowed origins get their headers, others none, and the
policies the Fetch standard forbids refused at start."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from yak.metadata.memory_store import MemoryMetadataStore
from yak_rest_proxy.app import cors_policy, create_app
from yak_rest_proxy.http.cors import CorsMiddleware, CorsPolicy, parse_origin
from yak_rest_proxy.settings import ProxySettings

PAGE = "http://127.0.0.1:5173"
OTHER = "http://evil.example"


async def _hello(scope: Scope, receive: Receive, send: Send) -> None:
    headers = [(b"content-type", b"text/plain"), (b"x-request-id", b"r1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": scope["method"].encode()})


def _client(**overrides: object) -> httpx.AsyncClient:
    settings = ProxySettings.from_env({}, **({"cors_origins": (PAGE,)} | overrides))
    app = CorsMiddleware(_hello, cors_policy(settings))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy")


def _preflight(origin: str, method: str = "POST", headers: str = "content-type") -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": headers,
    }


def _cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


async def test_preflight_of_an_allowed_origin_is_204_with_its_headers() -> None:
    async with _client() as client:
        answer = await client.options(
            "/topics/t", headers=_preflight(PAGE, headers="Content-Type, Idempotency-Key")
        )
    assert answer.status_code == 204
    assert answer.content == b""
    assert answer.headers["access-control-allow-origin"] == PAGE
    assert answer.headers["access-control-allow-methods"] == "GET, POST, PUT, DELETE"
    assert "Idempotency-Key" in answer.headers["access-control-allow-headers"]
    assert answer.headers["access-control-max-age"] == "600"
    assert "access-control-allow-credentials" not in answer.headers
    assert answer.headers["vary"] == "Origin"


@pytest.mark.parametrize(
    ("origin", "method", "headers"),
    [(OTHER, "POST", ""), (PAGE, "PATCH", ""), (PAGE, "POST", "x-secret, content-type")],
)
async def test_a_refused_preflight_is_403_without_cors_headers(
    origin: str, method: str, headers: str
) -> None:
    async with _client() as client:
        answer = await client.options("/topics/t", headers=_preflight(origin, method, headers))
    assert answer.status_code == 403
    assert "CORS preflight refused" in answer.text
    assert _cors_headers(answer) == {}


async def test_an_allowed_origin_gets_allow_origin_and_exposed_headers() -> None:
    async with _client() as client:
        answer = await client.post("/topics/t", headers={"Origin": PAGE})
    assert answer.text == "POST"  # served by the app, not the middleware
    assert answer.headers["access-control-allow-origin"] == PAGE
    exposed = answer.headers["access-control-expose-headers"].split(", ")
    assert {"RateLimit-Remaining", "Retry-After", "X-Request-Id"} <= set(exposed)
    assert answer.headers["x-request-id"] == "r1"


async def test_a_disallowed_origin_is_served_without_cors_headers() -> None:
    async with _client() as client:
        answer = await client.get("/topics", headers={"Origin": OTHER})
        plain = await client.get("/topics")
    assert answer.text == "GET"
    assert _cors_headers(answer) == {}
    assert answer.headers["vary"] == "Origin"
    assert _cors_headers(plain) == {}
    assert "vary" not in plain.headers


async def test_an_options_request_without_request_method_is_routed() -> None:
    async with _client() as client:
        answer = await client.options("/topics", headers={"Origin": PAGE})
    assert answer.text == "OPTIONS"


async def test_credentials_echo_the_origin() -> None:
    async with _client(cors_credentials=True) as client:
        preflight = await client.options("/topics/t", headers=_preflight(PAGE))
        actual = await client.get("/topics", headers={"Origin": PAGE})
    for answer in (preflight, actual):
        assert answer.headers["access-control-allow-origin"] == PAGE
        assert answer.headers["access-control-allow-credentials"] == "true"


async def test_wildcard_answers_star_and_any_header_echoes_the_request() -> None:
    async with _client(cors_origins=("*",), cors_headers=("*",)) as client:
        preflight = await client.options(
            "/topics/t", headers=_preflight(OTHER, headers="x-anything")
        )
        actual = await client.get("/topics", headers={"Origin": OTHER})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-headers"] == "x-anything"
    assert actual.headers["access-control-allow-origin"] == "*"
    assert "vary" not in actual.headers


def test_wildcard_with_credentials_is_refused() -> None:
    settings = ProxySettings.from_env({"YAK_CORS_ORIGINS": "*", "YAK_CORS_CREDENTIALS": "on"})
    with pytest.raises(ValueError, match="Fetch standard forbids"):
        cors_policy(settings)
    with pytest.raises(ValueError, match="Fetch standard forbids"):
        create_app(settings, store=MemoryMetadataStore())


@pytest.mark.parametrize(
    "origins", [("*", PAGE), ("http://a.example/path",), ("ftp://a.example",), ("HTTP://A.b",)]
)
def test_bad_origin_lists_are_refused(origins: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="origin"):
        CorsPolicy(origins, ("GET",), (), (), credentials=False, max_age_s=1)


def test_parse_origin_normalises() -> None:
    assert parse_origin("HTTPS://Example.COM:8443/") == "https://example.com:8443"
    with pytest.raises(ValueError, match="not scheme://host"):
        parse_origin("example.com")


def test_settings_read_the_cors_variables() -> None:
    env = {
        "YAK_CORS_ORIGINS": f"{PAGE}, https://b.example",
        "YAK_CORS_METHODS": "GET",
        "YAK_CORS_CREDENTIALS": "on",
        "YAK_CORS_MAX_AGE_S": "5",
    }
    policy = cors_policy(ProxySettings.from_env(env))
    assert policy.origins == (PAGE, "https://b.example")
    assert policy.methods == ("GET",)
    assert policy.credentials
    assert policy.max_age_s == 5
    assert not cors_policy(ProxySettings.from_env({})).enabled
    with pytest.raises(ValueError, match="YAK_CORS_CREDENTIALS must be on or off"):
        ProxySettings.from_env({"YAK_CORS_CREDENTIALS": "maybe"})


async def test_the_proxy_app_answers_preflights_in_front() -> None:
    store = MemoryMetadataStore()
    app = create_app(ProxySettings(cors_origins=(PAGE,)), store=store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
        answer = await client.options("/api/v1/topics/t/records", headers=_preflight(PAGE))
        health = await client.get("/healthz", headers={"Origin": PAGE})
    await store.aclose()
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == PAGE
    assert answer.headers["x-request-id"]  # inside the observability middleware
    assert health.headers["access-control-allow-origin"] == PAGE
