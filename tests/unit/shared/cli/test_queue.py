"""``yak queue``: each command sends the request it should to the proxy's share-group API
(a mock transport answers) and prints the result; usage errors are refused before sending."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from yak.cli import queue
from yak.cli.main import app
from yak.cli.proxy import run_or_exit
from yak.sdk.admin import AsyncAdmin

GROUP = {
    "name": "orders",
    "created_at_ms": 1,
    "dead_letter_topic": "dlq",
    "max_delivery_attempts": 5,
    "lock_duration_ms": 30000,
    "offset_reset": "latest",
}

Sent = list[tuple[str, str, Any]]


LIVE = {
    "totals": {"in_flight": 7, "acquired": 3, "acknowledged": 41, "dead_lettered": 2, "lag": 9},
    "partitions": [
        {
            "topic": "jobs",
            "partition": 0,
            "leader_id": 2,
            "leader_epoch": 1,
            "loaded": True,
            "high_watermark": 50,
            "start_offset": 41,
            "scan_offset": 48,
            "in_flight": 7,
            "acquired": 3,
            "lag": 9,
            "delivery_counts": {"1": 3, "4": 1},
        },
        {
            "topic": "jobs",
            "partition": 1,
            "leader_id": 3,
            "leader_epoch": 0,
            "loaded": False,
            "high_watermark": 12,
        },
    ],
    "topics": [{"topic": "jobs", "acquired": 46, "accepted": 41, "rejected": 2}],
    "errors": [{"broker_id": 4, "error": "cannot reach the broker"}],
}


def _answer(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/api/v1/share-groups/busy":
        return httpx.Response(200, json={**GROUP, "name": "busy", "live": LIVE})
    if request.url.path == "/api/v1/share-groups/missing":
        body = {"code": "GROUP_ID_NOT_FOUND", "message": "share group 'missing' does not exist"}
        return httpx.Response(404, json=body)
    if request.method == "GET" and request.url.path == "/api/v1/share-groups":
        return httpx.Response(200, json={"share_groups": [GROUP]})
    if request.method == "DELETE":
        return httpx.Response(200, json={"name": "orders", "group": {**GROUP, "deleting": True}})
    return httpx.Response(200, json=GROUP)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    requests: Sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        requests.append((request.method, request.url.path, body))
        return _answer(request)

    def admin_call(
        _url: str | None, _key: str | None, _dir: Path, call: Callable[[AsyncAdmin], Awaitable[Any]]
    ) -> Any:
        async def run() -> Any:
            transport = httpx.MockTransport(handler)
            async with AsyncAdmin("http://proxy", transport=transport) as admin:
                return await call(admin)

        return run_or_exit(run())

    monkeypatch.setattr(queue, "admin_call", admin_call)
    return requests


def _run(argv: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["queue", *argv])
    return result.exit_code, result.output


def test_create_sends_the_settings(sent: Sent) -> None:
    code, output = _run(
        ["create", "orders", "--dead-letter-topic", "dlq", "--max-delivery-attempts", "3"]
    )
    assert code == 0, output
    assert sent == [
        (
            "POST",
            "/api/v1/share-groups",
            {
                "name": "orders",
                "dead_letter_topic": "dlq",
                "max_delivery_attempts": 3,
                "lock_duration_ms": 30000,
                "offset_reset": "latest",
            },
        )
    ]
    assert "orders" in output
    assert "dlq" in output


def test_alter_sends_only_what_changes(sent: Sent) -> None:
    code, output = _run(["alter", "orders", "--lock-duration-ms", "5000"])
    assert code == 0, output
    code, output = _run(["alter", "orders", "--no-dead-letter-topic"])
    assert code == 0, output
    assert sent == [
        ("PATCH", "/api/v1/share-groups/orders", {"lock_duration_ms": 5000}),
        ("PATCH", "/api/v1/share-groups/orders", {"dead_letter_topic": None}),
    ]


def test_list_describe_delete(sent: Sent) -> None:
    assert _run(["list"])[0] == 0
    assert _run(["describe", "orders"])[0] == 0
    code, output = _run(["delete", "orders"])
    assert (code, output.strip()) == (0, "deleted share group orders")
    assert [(m, p) for m, p, _ in sent] == [
        ("GET", "/api/v1/share-groups"),
        ("GET", "/api/v1/share-groups/orders"),
        ("DELETE", "/api/v1/share-groups/orders"),
    ]


def test_describe_prints_the_live_state(sent: Sent) -> None:
    argv = ["queue", "describe", "busy", "--topic", "jobs", "--topic", "more"]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "250"})
    code, output = result.exit_code, result.output
    assert code == 0, output
    assert sent == [("GET", "/api/v1/share-groups/busy", None)]
    lines = output.splitlines()
    totals = lines[lines.index(next(x for x in lines if "in flight" in x)) + 2]
    assert [cell.strip() for cell in totals.split("│")[1:6]] == ["7", "0", "3", "41", "2"]
    loaded = next(x for x in lines if "│ 0 " in x and "jobs" in x)
    assert "1x3 4x1" in loaded
    assert "not loaded" in next(x for x in lines if "│ 1 " in x and "jobs" in x)
    assert "broker 4 did not answer: cannot reach the broker" in output


def test_describe_asks_for_the_topics_given(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url.query, "ascii"))
        return _answer(request)

    async def run() -> None:
        async with AsyncAdmin("http://proxy", transport=httpx.MockTransport(handler)) as admin:
            await admin.describe_share_group("busy", ["jobs", "more"])
            await admin.describe_share_group("busy")

    run_or_exit(run())
    assert seen == ["topic=jobs&topic=more", ""]


def test_an_error_prints_its_code(sent: Sent) -> None:
    code, output = _run(["describe", "missing"])
    assert code == 1
    assert "GROUP_ID_NOT_FOUND" in output


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["alter", "orders"], "nothing to change"),
        (["alter", "orders", "--dead-letter-topic", "d", "--no-dead-letter-topic"], "not both"),
        (["create", "orders", "--offset-reset", "middle"], "middle"),
    ],
)
def test_usage_errors_send_nothing(sent: Sent, argv: list[str], message: str) -> None:
    code, output = _run(argv)
    assert code == 2
    assert message in output.replace("\n", " ")
    assert sent == []
