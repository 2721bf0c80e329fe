"""``ObservabilityMiddleware``: route-template labels, request ids, ``/metrics``."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractContextManager, nullcontext

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from yak.observability.http import (
    ROUTE_TEMPLATE,
    UNMATCHED,
    ObservabilityMiddleware,
    install_observability,
)
from yak.observability.metrics import ServiceMetrics
from yak.observability.request_id import current_request_id
from yak.web.cluster_secret import ClusterSecretMiddleware


class _CopyScope:
    """Routes a copy of the scope, as ``StripTrailingSlash`` does."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/"):
            scope = {**scope, "path": scope["path"].rstrip("/")}
        await self.app(scope, receive, send)


def _app(metrics: ServiceMetrics) -> FastAPI:
    app = FastAPI()
    router = APIRouter()

    @router.get("/topics/{topic}/partitions/{partition}")
    async def partition(topic: str, partition: int) -> dict[str, str | None]:
        return {"request_id": current_request_id()}

    @router.post("/boom")
    async def boom() -> None:
        raise RuntimeError("bug")

    async def plain(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok", status_code=201)

    app.include_router(router)
    app.router.routes.append(Route("/v1/produce", plain, methods=["POST"]))
    app.add_middleware(_CopyScope)
    install_observability(app, metrics)
    return app


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def _count(text: str, **labels: str) -> float:
    wanted = tuple(sorted({"service": "test", **labels}.items()))
    return _samples(text, "yak_http_request_duration_seconds_count").get(wanted, 0.0)


@pytest.fixture
def metrics() -> ServiceMetrics:
    return ServiceMetrics("test")


@pytest.fixture
async def client(metrics: ServiceMetrics):
    app = _app(metrics)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
        yield client


async def test_requests_are_counted_by_route_template_not_raw_path(client) -> None:
    for topic in ("a", "b", "c"):
        assert (await client.get(f"/topics/{topic}/partitions/0")).status_code == 200
    assert (await client.post("/v1/produce")).status_code == 201
    text = (await client.get("/metrics")).text
    route = "/topics/{topic}/partitions/{partition}"
    assert _count(text, route=route, method="GET", status="200") == 3
    assert _count(text, route="/v1/produce", method="POST", status="201") == 1
    assert "/topics/a/" not in text


async def test_unknown_paths_share_one_label_and_errors_count_as_500(client) -> None:
    for path in ("/nope", "/x/y/z", "/random-123"):
        assert (await client.get(path)).status_code == 404
    assert (await client.post("/boom")).status_code == 500
    assert (await client.get("/topics/a/partitions/x")).status_code == 422
    text = (await client.get("/metrics")).text
    assert _count(text, route=UNMATCHED, method="GET", status="404") == 3
    assert _count(text, route="/boom", method="POST", status="500") == 1
    route = "/topics/{topic}/partitions/{partition}"
    assert _count(text, route=route, method="GET", status="422") == 1


async def test_a_route_served_from_a_copied_scope_is_still_labelled(client) -> None:
    assert (await client.get("/topics/a/partitions/1/")).status_code == 200
    text = (await client.get("/metrics")).text
    route = "/topics/{topic}/partitions/{partition}"
    assert _count(text, route=route, method="GET", status="200") == 1


async def test_odd_methods_are_bucketed(client) -> None:
    assert (await client.request("PROPFIND", "/nope")).status_code == 404
    text = (await client.get("/metrics")).text
    assert _count(text, route=UNMATCHED, method="OTHER", status="404") == 1


async def test_the_callers_request_id_is_current_and_returned(client) -> None:
    response = await client.get("/topics/a/partitions/0", headers={"x-request-id": "abc-1"})
    assert response.json() == {"request_id": "abc-1"}
    assert response.headers["x-request-id"] == "abc-1"


async def test_a_missing_or_invalid_request_id_is_replaced(client) -> None:
    first = await client.get("/topics/a/partitions/0")
    given = first.headers["x-request-id"]
    assert len(given) == 32
    assert first.json() == {"request_id": given}
    second = await client.get("/topics/a/partitions/0", headers={"x-request-id": "x" * 500})
    assert second.headers["x-request-id"] != "x" * 500
    assert len(second.headers["x-request-id"]) == 32


async def test_metrics_has_the_process_metrics_and_prometheus_content_type(client) -> None:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    assert "process_resident_memory_bytes" in response.text
    assert "yak_etcd_request_duration_seconds" in response.text


async def test_the_access_log_writes_one_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    async def ok(_request: Request) -> JSONResponse:
        return JSONResponse({})

    metrics = ServiceMetrics("test")
    inner = FastAPI()
    inner.router.routes.append(Route("/t/{x}", ok))
    app = ObservabilityMiddleware(
        inner, metrics=metrics, routes=lambda: inner.router.routes, access_log=True
    )
    caplog.set_level(logging.INFO, logger="yak.access")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
        await client.get("/t/1", headers={"x-request-id": "log-me"})
    (record,) = [r for r in caplog.records if r.name == "yak.access"]
    assert record.__dict__["route"] == "/t/{x}"
    assert record.__dict__["status"] == 200
    assert "GET /t/1 200" in record.getMessage()


async def test_etcd_latency_is_observed_per_operation(metrics: ServiceMetrics) -> None:
    metrics.observe_etcd("lease keep-alive", 0.002, True)
    metrics.observe_etcd("get", 0.5, False)
    text = (await metrics.render()).decode()
    counts = _samples(text, "yak_etcd_request_duration_seconds_count")
    ok = (("operation", "lease_keep-alive"), ("result", "ok"), ("service", "test"))
    assert counts[ok] == 1
    assert counts[(("operation", "get"), ("result", "error"), ("service", "test"))] == 1


async def test_a_failing_before_scrape_hook_does_not_fail_the_scrape(
    metrics: ServiceMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> None:
        raise RuntimeError("etcd down")

    metrics.before_scrape.append(broken)
    assert b"process_open_fds" in await metrics.render()
    assert "refreshing metrics before a scrape failed" in caplog.text


async def test_metrics_needs_no_cluster_secret(metrics: ServiceMetrics) -> None:
    app = FastAPI()
    app.add_middleware(ClusterSecretMiddleware, secret="s3cret-s3cret-s3cret")
    install_observability(app, metrics)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://broker") as client:
        assert (await client.get("/metrics")).status_code == 200
        refused = await client.get("/v1/fetch")
    assert refused.status_code == 401
    assert refused.headers["x-request-id"]  # refusals are timed and carry an id too


@pytest.mark.parametrize(
    ("given", "raised", "counted"),
    [
        (201, None, "201"),
        (0, None, "499"),  # returned without answering: nobody saw an answer
        (0, asyncio.CancelledError, "499"),  # the client went away first
        (0, RuntimeError, "500"),
        (404, RuntimeError, "404"),  # an answer had started: its status stands
        (0, KeyboardInterrupt, "499"),
    ],
)
def test_observing_a_request_served_outside_the_middleware(
    metrics: ServiceMetrics, given: int, raised: type[BaseException] | None, counted: str
) -> None:
    middleware = ObservabilityMiddleware(_app(metrics), metrics=metrics)
    scope = {"type": "http", "method": "POST", "path": "/x", "headers": [], ROUTE_TEMPLATE: "/x"}
    expected: AbstractContextManager[object] = (
        pytest.raises(raised) if raised is not None else nullcontext()
    )
    with expected, middleware.observing(scope) as observed:
        assert current_request_id() == observed.header[1].decode()
        observed.status = given
        if raised is not None:
            raise raised()
    assert current_request_id() is None  # the request's id is no longer current
    text = generate_latest(metrics.registry).decode()
    assert _count(text, route="/x", method="POST", status=counted) == 1
