"""``AsyncShareConsumer`` and its blocking twin against a scripted proxy (``httpx.MockTransport``):
answers are batched into ranges and ride the next acquire or go alone on ``flush``, the member id
the proxy gives is kept, refused answers come back as ``AckFailure``, an unreachable proxy keeps
the answers for the next request, and ``aclose`` releases what is still held."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import httpx
import pytest

from yak.errors import InvalidRecordStateError, NetworkError
from yak.sdk import AsyncShareConsumer, ShareConsumer, ShareRecord

PREFIX = "/api/v1/share-groups/g"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Proxy:
    """Hands out ``batches`` (lists of (partition, offset)) one per acquire; records every
    acknowledgement body's entries (``acks``; those that rode an acquire also in ``riding``);
    answers INVALID_RECORD_STATE for offsets in ``refused``."""

    def __init__(self, *batches: list[tuple[int, int]]) -> None:
        self.batches = list(batches)
        self.acquires: list[dict[str, Any]] = []
        self.acks: list[list[dict[str, Any]]] = []
        self.riding: list[list[dict[str, Any]]] = []
        self.refused: set[int] = set()
        self.down = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if self.down:
            raise httpx.ConnectError("down")
        if request.url.path == f"{PREFIX}/acquire":
            self.acquires.append(body)
            batch = self.batches.pop(0) if self.batches else []
            records = [
                {
                    "topic": "t",
                    "partition": p,
                    "offset": o,
                    "timestamp": 1,
                    "key": None,
                    "value": _b64(f"v{o}"),
                    "headers": [{"key": "h", "value": _b64("x")}],
                    "delivery_count": 1,
                }
                for p, o in batch
            ]
            member = body.get("member_id") or "given-1"
            answer = {"member_id": member, "lock_timeout_ms": 30_000, "records": records}
            if body.get("acknowledgements"):
                self.riding.append(body["acknowledgements"])
                answer["acknowledgement_results"] = self._results(body["acknowledgements"])
            return httpx.Response(200, json=answer)
        assert request.url.path == f"{PREFIX}/acknowledgements"
        results = self._results(body["acknowledgements"])
        if all(r["error"] for r in results):
            refused = InvalidRecordStateError("lock expired", results=results)
            return httpx.Response(409, json=refused.to_dict())
        return httpx.Response(200, json={"results": results})

    def _results(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.acks.append(entries)
        results = []
        for e in entries:
            bad = any(o in self.refused for o in range(e["first_offset"], e["last_offset"] + 1))
            error = {"code": "INVALID_RECORD_STATE", "message": "lock expired"} if bad else None
            results.append({"first_offset": e["first_offset"], **e, "error": error})
        return results


def _consumer(proxy: Proxy, **options: Any) -> AsyncShareConsumer:
    return AsyncShareConsumer(
        "http://proxy", "g", "t", transport=httpx.MockTransport(proxy.handle), **options
    )


def _ranges(entries: list[dict[str, Any]]) -> list[tuple[int, int, int, str]]:
    return [(e["partition"], e["first_offset"], e["last_offset"], e["type"]) for e in entries]


async def test_answers_go_as_ranges_with_the_next_acquire() -> None:
    proxy = Proxy([(0, 0), (0, 1), (0, 2), (0, 3), (1, 5)], [])
    async with _consumer(proxy, filter='key == "a"', max_records=50) as consumer:
        records = await consumer.acquire(timeout_ms=0)
        assert [(r.partition, r.offset, r.value, r.delivery_count) for r in records][:2] == [
            (0, 0, b"v0", 1),
            (0, 1, b"v1", 1),
        ]
        assert records[0].headers == (("h", b"x"),)
        assert consumer.member_id == "given-1"
        for record in records[:2]:
            await record.ack()
        await records[2].reject()
        records[3].ack()  # not awaiting is fine: the answer is noted at once
        await records[4].release()
        assert proxy.acks == []  # batched
        await consumer.acquire(timeout_ms=0)
        (sent,) = proxy.acks
        assert proxy.riding == [sent]  # one request: the answers rode the acquire
        assert sorted(_ranges(sent)) == [
            (0, 0, 1, "accept"),
            (0, 2, 2, "reject"),
            (0, 3, 3, "accept"),
            (1, 5, 5, "release"),
        ]
        second = proxy.acquires[1]
        assert (second["member_id"], second["filter"], second["max_records"]) == (
            "given-1",
            'key == "a"',
            50,
        )
        assert second["value_encoding"] == "base64"


async def test_the_last_answer_wins_and_a_renewal_after_it_is_moot() -> None:
    proxy = Proxy([(0, 0), (0, 1)])
    async with _consumer(proxy) as consumer:
        first, second = await consumer.acquire(timeout_ms=0)
        await first.release()
        await first.ack()
        await first.renew()
        await second.renew()
        assert await consumer.flush() == []
        assert sorted(_ranges(proxy.acks[0])) == [(0, 0, 0, "accept"), (0, 1, 1, "renew")]


async def test_refused_answers_come_back_as_failures() -> None:
    proxy = Proxy([(0, 0), (0, 1)])
    async with _consumer(proxy) as consumer:
        first, second = await consumer.acquire(timeout_ms=0)
        proxy.refused = {1}
        await first.ack()
        await second.release()
        (failure,) = await consumer.flush()
        assert (failure.partition, failure.first_offset, failure.type) == (0, 1, "release")
        assert isinstance(failure.error, InvalidRecordStateError)
        await first.ack()
        proxy.refused = {0}
        (failure,) = await consumer.flush()  # every entry refused: the 409, read per entry
        assert isinstance(failure.error, InvalidRecordStateError)


async def test_an_unreachable_proxy_keeps_the_answers_for_the_next_flush() -> None:
    proxy = Proxy([(0, 0)])
    async with _consumer(proxy) as consumer:
        (record,) = await consumer.acquire(timeout_ms=0)
        await record.ack()
        proxy.down = True
        with pytest.raises(NetworkError):
            await consumer.flush()
        proxy.down = False
        assert await consumer.flush() == []
        assert [_ranges(a) for a in proxy.acks] == [[(0, 0, 0, "accept")]]


async def test_an_acquire_that_fails_keeps_its_answers_for_the_next_request() -> None:
    proxy = Proxy([(0, 0)], [])
    async with _consumer(proxy) as consumer:
        (record,) = await consumer.acquire(timeout_ms=0)
        await record.ack()
        proxy.down = True
        with pytest.raises(NetworkError):
            await consumer.acquire(timeout_ms=0)
        proxy.down = False
        assert await consumer.acquire(timeout_ms=0) == []
        assert [_ranges(a) for a in proxy.riding] == [[(0, 0, 0, "accept")]]


async def test_refused_answers_that_rode_an_acquire_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxy = Proxy([(0, 0), (0, 1)], [])
    async with _consumer(proxy) as consumer:
        first, second = await consumer.acquire(timeout_ms=0)
        proxy.refused = {1}
        await first.ack()
        await second.release()
        with caplog.at_level(logging.WARNING, logger="yak.sdk.share_consumer"):
            await consumer.acquire(timeout_ms=0)
        (logged,) = caplog.records
        assert "first_offset=1" in logged.getMessage()
        assert "'release'" in logged.getMessage()
        assert proxy.riding == proxy.acks  # no request of their own


async def test_closing_releases_what_is_still_held() -> None:
    proxy = Proxy([(0, 0), (0, 1), (0, 2)])
    consumer = _consumer(proxy, member_id="m1")
    records = await consumer.acquire(timeout_ms=0)
    await records[1].ack()
    await consumer.aclose()
    assert sorted(_ranges(proxy.acks[0])) == [
        (0, 0, 0, "release"),
        (0, 1, 1, "accept"),
        (0, 2, 2, "release"),
    ]
    assert proxy.acquires[0]["member_id"] == "m1"


async def test_iteration_acquires_as_needed() -> None:
    proxy = Proxy([(0, 0)], [], [(0, 1)])
    got: list[ShareRecord] = []
    async with _consumer(proxy) as consumer:
        async for record in consumer:
            got.append(record)
            await record.ack()
            if len(got) == 2:
                break
    assert [r.offset for r in got] == [0, 1]
    assert [_ranges(a) for a in proxy.acks] == [[(0, 0, 0, "accept")], [(0, 1, 1, "accept")]]


def test_the_blocking_twin_notes_answers_from_its_thread() -> None:
    proxy = Proxy([(0, 0), (0, 1)])
    with ShareConsumer(
        "http://proxy", "g", ["t"], transport=httpx.MockTransport(proxy.handle)
    ) as consumer:
        records = consumer.acquire(timeout_ms=0)
        records[0].ack()
        records[1].reject()
        assert consumer.flush() == []
        assert consumer.member_id == "given-1"
    assert sorted(_ranges(proxy.acks[0])) == [(0, 0, 0, "accept"), (0, 1, 1, "reject")]
