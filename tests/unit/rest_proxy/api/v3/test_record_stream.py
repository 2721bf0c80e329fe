import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import ClientDisconnect

from yak.errors import RequestBodyTimeoutError
from yak_rest_proxy.api.v3.record_stream import Pending, Ready, delivery_reports, encode_report


class Later:
    """A report that comes when the test says."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def report(self) -> dict[str, Any]:
        await self.done
        return {"error_code": 200, "offset": self.number}


async def chunks_of(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def records(count: int) -> bytes:
    return b"".join(orjson.dumps({"n": n}) + b"\n" for n in range(count))


async def collect(reports: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [report async for report in reports]


async def test_reports_in_record_order_whatever_order_results_come_in() -> None:
    made: list[Later] = []
    all_submitted = asyncio.Event()

    def submit(raw: bytes) -> Pending:
        made.append(Later(orjson.loads(raw)["n"]))
        if len(made) == 5:
            all_submitted.set()
        return made[-1]

    task = asyncio.ensure_future(
        collect(delivery_reports(chunks_of(records(5)), submit, max_record_bytes=100))
    )
    await all_submitted.wait()
    for later in reversed(made):  # the last record's result first
        later.done.set_result(None)
    assert [r["offset"] for r in await task] == [0, 1, 2, 3, 4]


async def test_at_most_window_records_in_flight() -> None:
    read = 0
    made: list[Later] = []

    async def body() -> AsyncIterator[bytes]:
        nonlocal read
        for n in range(100):
            read += 1
            yield orjson.dumps({"n": n})

    def submit(raw: bytes) -> Pending:
        made.append(Later(orjson.loads(raw)["n"]))
        return made[-1]

    reports = delivery_reports(body(), submit, max_record_bytes=100, window=4)
    first = asyncio.ensure_future(anext(reports))
    for _ in range(50):  # let the reader run until the full queue blocks it (no event marks that)
        await asyncio.sleep(0)
    # one record taken off the queue and awaited, four queued, one waiting to be queued
    assert len(made) == 6
    assert read == 6
    for later in made:
        later.done.set_result(None)
    assert (await first)["offset"] == 0
    await reports.aclose()  # the reader is cancelled, nothing else is read
    assert read < 100


async def test_a_record_that_fails_does_not_stop_the_stream() -> None:
    def submit(raw: bytes) -> Pending:
        n = orjson.loads(raw)["n"]
        return Ready({"error_code": 400, "message": "bad"} if n == 1 else {"error_code": 200})

    reports = await collect(delivery_reports(chunks_of(records(3)), submit, max_record_bytes=100))
    assert [r["error_code"] for r in reports] == [200, 400, 200]


async def test_a_broken_stream_ends_with_one_error_report() -> None:
    def submit(raw: bytes) -> Pending:
        return Ready({"error_code": 200})

    body = chunks_of(records(2) + b"oops" + records(2))
    reports = await collect(delivery_reports(body, submit, max_record_bytes=100))
    assert [r["error_code"] for r in reports] == [200, 200, 400]
    assert "not a JSON object" in reports[-1]["message"]
    too_big = chunks_of(records(1), b'{"n": "' + b"x" * 200)
    reports = await collect(delivery_reports(too_big, submit, max_record_bytes=100))
    assert [r["error_code"] for r in reports] == [200, 413]
    unterminated = chunks_of(records(1), b'{"n": ')
    reports = await collect(delivery_reports(unterminated, submit, max_record_bytes=100))
    assert [r["error_code"] for r in reports] == [200, 400]


async def test_a_stalled_body_and_a_client_that_left() -> None:
    def submit(raw: bytes) -> Pending:
        return Ready({"error_code": 200})

    async def stalls() -> AsyncIterator[bytes]:
        yield records(1)
        raise RequestBodyTimeoutError("the request body stalled")

    reports = await collect(delivery_reports(stalls(), submit, max_record_bytes=100))
    assert [r["error_code"] for r in reports] == [200, 408]

    async def leaves() -> AsyncIterator[bytes]:
        yield records(2)
        raise ClientDisconnect()

    reports = await collect(delivery_reports(leaves(), submit, max_record_bytes=100))
    assert [r["error_code"] for r in reports] == [200, 200]


def test_encoded_report_is_one_line() -> None:
    assert encode_report({"error_code": 200, "offset": 1}) == b'{"error_code":200,"offset":1}\n'
