"""``yak queue consume``'s loop against a scripted proxy: records printed, accepted, or rejected
when ``--reject-failed-cmd`` fails for them; ``--max-messages`` releases the rest on close."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from yak.cli.queue_consume import _consume
from yak.cli.record_format import RecordFormat
from yak.sdk import AsyncShareConsumer


class Proxy:
    def __init__(self, values: list[str]) -> None:
        self.values = values
        self.acks: list[tuple[int, int, str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        riding: list[dict[str, Any]] = body.get("acknowledgements") or []
        self.acks += [(e["first_offset"], e["last_offset"], e["type"]) for e in riding]
        if request.url.path.endswith("/acquire"):
            values, self.values = self.values, []
            records = [
                {
                    "topic": "t",
                    "partition": 0,
                    "offset": i,
                    "timestamp": 1,
                    "value": base64.b64encode(v.encode()).decode(),
                    "delivery_count": 1,
                }
                for i, v in enumerate(values)
            ]
            # Answers ride the next acquire (the SDK sends them there, not on their own).
            results = [{**e, "error": None} for e in riding]
            return httpx.Response(
                200,
                json={
                    "member_id": "m",
                    "lock_timeout_ms": 1000,
                    "records": records,
                    "acknowledgement_results": results,
                },
            )
        return httpx.Response(200, json={"results": [{**e, "error": None} for e in riding]})


async def _run(
    proxy: Proxy, limit: int | None, command: str | None, capsys: pytest.CaptureFixture[str]
) -> str:
    consumer = AsyncShareConsumer(
        "http://proxy", "g", "t", transport=httpx.MockTransport(proxy.handle)
    )
    async with consumer:
        await _consume(consumer, RecordFormat("%o:%v\\n"), limit, False, command)
    return capsys.readouterr().out


async def test_records_are_printed_and_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    proxy = Proxy(["a", "b"])
    assert await _run(proxy, None, None, capsys) == "0:a\n1:b\n"
    assert proxy.acks == [(0, 1, "accept")]


async def test_a_failing_command_rejects_its_record(capsys: pytest.CaptureFixture[str]) -> None:
    proxy = Proxy(["good", "bad", "good"])
    await _run(proxy, None, "grep -q good", capsys)
    assert sorted(proxy.acks) == [(0, 0, "accept"), (1, 1, "reject"), (2, 2, "accept")]


async def test_max_messages_releases_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    proxy = Proxy(["a", "b", "c"])
    assert await _run(proxy, 1, None, capsys) == "0:a\n"
    assert sorted(proxy.acks) == [(0, 0, "accept"), (1, 2, "release")]
