"""``yak queue scheduled``/``cancel`` send the requests they should (a mock transport answers,
pages followed, every partition when none is named) and print the result or the error's code;
``yak produce --deliver-after/--deliver-at`` parse their values and delay every record."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import typer
from typer.testing import CliRunner

from yak.cli import produce, scheduled
from yak.cli.main import app
from yak.cli.proxy import run_or_exit
from yak.cli.scheduled import parse_deliver_at, parse_duration_ms
from yak.sdk.admin import AsyncAdmin

Sent = list[tuple[str, str, dict[str, str]]]
DUE = 1_800_000_000_000
TOPIC = {
    "name": "jobs",
    "topic_id": "x",
    "partition_count": 2,
    "replication_factor": 1,
    "configs": {"delayed.delivery.enable": "true"},
    "partitions": [],
}


def _answer(request: httpx.Request) -> httpx.Response:
    path, params = request.url.path, request.url.params
    if path == "/api/v1/topics/jobs":
        return httpx.Response(200, json=TOPIC)
    if path == "/api/v1/topics/jobs/partitions/0/scheduled":
        if "after_ms" not in params:  # first page of two
            records = [{"offset": 4, "deliver_at": DUE}]
            page = {"after_ms": DUE, "after_offset": 4}
            return httpx.Response(
                200, json={"topic": "jobs", "partition": 0, "records": records, "next": page}
            )
        records = [{"offset": 9, "deliver_at": DUE + 1}]
        return httpx.Response(200, json={"topic": "jobs", "partition": 0, "records": records})
    if path == "/api/v1/topics/jobs/partitions/1/scheduled":
        return httpx.Response(200, json={"topic": "jobs", "partition": 1, "records": []})
    if path.endswith("/scheduled/7"):
        body = {"code": "RECORD_ALREADY_DUE", "message": "the record at offset 7 was due"}
        return httpx.Response(409, json=body)
    done = {"topic": "jobs", "partition": 1, "offset": 3, "deliver_at": DUE}
    return httpx.Response(200, json=done)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    requests: Sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append((request.method, request.url.path, dict(request.url.params)))
        return _answer(request)

    def admin_call(
        _url: str | None, _key: str | None, _dir: Path, call: Callable[[AsyncAdmin], Awaitable[Any]]
    ) -> Any:
        async def run() -> Any:
            transport = httpx.MockTransport(handler)
            async with AsyncAdmin("http://proxy", transport=transport) as admin:
                return await call(admin)

        return run_or_exit(run())

    monkeypatch.setattr(scheduled, "admin_call", admin_call)
    return requests


def _run(argv: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, argv)
    return result.exit_code, result.output


def test_durations_and_times_parse_or_are_usage_errors() -> None:
    assert [parse_duration_ms(t) for t in ("500ms", "30s", "2m", "1h", "7d")] == [
        500,
        30_000,
        120_000,
        3_600_000,
        604_800_000,
    ]
    assert parse_deliver_at("2026-12-06T10:00:00Z") == 1_796_551_200_000
    assert parse_deliver_at("2026-12-06T11:00:00+01:00") == 1_796_551_200_000
    assert parse_deliver_at("1796551200000") == 1_796_551_200_000
    for bad in ("30", "-1s", "1.5s", "s", "10 years"):
        with pytest.raises(typer.BadParameter):
            parse_duration_ms(bad)
    for bad in ("2026-12-06T10:00:00", "tomorrow"):
        with pytest.raises(typer.BadParameter):
            parse_deliver_at(bad)


def test_scheduled_lists_every_partition_following_pages(sent: Sent) -> None:
    code, output = _run(["queue", "scheduled", "jobs"])
    assert code == 0, output
    assert [(m, p) for m, p, _ in sent] == [
        ("GET", "/api/v1/topics/jobs"),
        ("GET", "/api/v1/topics/jobs/partitions/0/scheduled"),
        ("GET", "/api/v1/topics/jobs/partitions/0/scheduled"),
        ("GET", "/api/v1/topics/jobs/partitions/1/scheduled"),
    ]
    assert sent[2][2]["after_ms"] == str(DUE)
    assert sent[2][2]["after_offset"] == "4"
    assert "2027-01-15T08:00:00.000+00:00" in output  # DUE
    assert " 9 " in output


def test_scheduled_of_one_partition_and_cancel(sent: Sent) -> None:
    code, _output = _run(["queue", "scheduled", "jobs", "--partition", "1", "--limit", "5"])
    assert code == 0
    assert sent == [("GET", "/api/v1/topics/jobs/partitions/1/scheduled", sent[0][2])]
    assert sent[0][2]["limit"] == "5"
    code, output = _run(["queue", "cancel", "jobs", "1", "3"])
    assert (code, output.strip()) == (
        0,
        "cancelled jobs-1@3 (was due 2027-01-15T08:00:00.000+00:00)",
    )
    assert sent[-1][:2] == ("DELETE", "/api/v1/topics/jobs/partitions/1/scheduled/3")


def test_cancel_prints_the_refusal_code(sent: Sent) -> None:
    code, output = _run(["queue", "cancel", "jobs", "0", "7"])
    assert code == 1
    assert "RECORD_ALREADY_DUE" in output


class _Producer:
    """Stands in for the SDK producer: records what ``send`` was asked."""

    sends: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, _url: str, **_options: Any) -> None:
        pass

    async def __aenter__(self) -> _Producer:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None

    async def send(self, topic: str, value: bytes, **options: Any) -> asyncio.Future[Any]:
        self.sends.append({"topic": topic, "value": value, **options})
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def flush(self) -> None:
        return None


def test_produce_delays_every_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(produce, "AsyncProducer", _Producer)
    _Producer.sends = []
    base = ["produce", "jobs", "--url", "http://proxy", "--data-dir", str(tmp_path)]
    code, output = _run([*base, "--value", "a", "--deliver-after", "30s"])
    assert code == 0, output
    code, output = _run([*base, "--value", "b", "--deliver-at", "2026-12-06T10:00:00Z"])
    assert code == 0, output
    assert [(s["value"], s["deliver_after_ms"], s["deliver_at"]) for s in _Producer.sends] == [
        (b"a", 30_000, None),
        (b"b", None, 1_796_551_200_000),
    ]
    code, output = _run([*base, "--value", "c", "--deliver-after", "30s", "--deliver-at", "1"])
    assert code == 2
    assert "not both" in output
    code, _output = _run([*base, "--value", "c", "--deliver-after", "soon"])
    assert code == 2
    assert len(_Producer.sends) == 2
