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


def _answer(request: httpx.Request) -> httpx.Response:
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
