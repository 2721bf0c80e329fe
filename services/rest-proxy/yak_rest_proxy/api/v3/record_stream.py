"""A produce stream: records read from the request as they arrive, reports written in order.

``delivery_reports(chunks, submit, ...)`` reads the body's chunks, splits them into records
(``json_stream``), hands each to ``submit`` — which parses it and queues it at the producer at
once, returning a ``Pending`` report, or an awaitable of one when the record must wait for
something first (its schema: the reading waits, so records keep their order) — and yields the
reports, one per record, in the records' order, as each record's result comes. Records are produced
while later ones are still being read, so one long request streams; the producer batches them per
partition as it does any request's.

Bounded memory: at most ``window`` records are between ``submit`` and their report; when the client
does not read its reports (or the brokers are slow) the reader stops reading the body, and TCP
pushes back on the client. The split buffer holds one record at most (``max_record_bytes``).

Errors: a record that cannot be produced gets its own error report and the stream goes on. A stream
that cannot go on — not JSON objects, a record over the size limit, a body that stalls
(``REQUEST_BODY_TIMEOUT``) — ends with one last error report for it. A client that goes away ends
the reading; the reports of what it sent are still awaited, not written. Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import orjson
from starlette.requests import ClientDisconnect

from yak.errors import UnknownServerError, YakError
from yak_rest_proxy.api.v3.errors import v3_error_body
from yak_rest_proxy.api.v3.json_stream import JsonSplitter

__all__ = ["Pending", "Ready", "delivery_reports", "encode_report"]

log = logging.getLogger(__name__)

#: Records between ``submit`` and their report, at most.
WINDOW = 256


class Pending(Protocol):
    """A record's report, to come."""

    async def report(self) -> dict[str, Any]: ...


class Ready:
    """A report known at once (a record refused before it reached the producer)."""

    __slots__ = ("_report",)

    def __init__(self, report: dict[str, Any]) -> None:
        self._report = report

    async def report(self) -> dict[str, Any]:
        return self._report


_END = None


async def _read(
    chunks: AsyncIterator[bytes],
    submit: Callable[[bytes], Pending | Awaitable[Pending]],
    queue: asyncio.Queue[Pending | None],
    max_record_bytes: int,
) -> None:
    splitter = JsonSplitter(max_record_bytes)
    try:
        async for chunk in chunks:
            for record in splitter.feed(chunk):
                pending = submit(record)
                if inspect.isawaitable(pending):  # the record waits for something first
                    pending = await pending
                await queue.put(pending)
        splitter.finish()
    except YakError as exc:  # the stream cannot go on: one last report says why
        await queue.put(Ready(v3_error_body(exc)))
    except ClientDisconnect:
        pass  # nobody left to read more reports than those queued
    except Exception as exc:  # a bug: the stream ends with a 500 report, not a hang
        log.exception("reading a produce stream failed")
        failed = UnknownServerError(f"internal error: {type(exc).__name__}")
        await queue.put(Ready(v3_error_body(failed)))
    # Not in a ``finally``: a cancelled reader (the answer was closed) must not wait for
    # room in a queue nobody reads any more.
    await queue.put(_END)


async def delivery_reports(
    chunks: AsyncIterator[bytes],
    submit: Callable[[bytes], Pending | Awaitable[Pending]],
    *,
    max_record_bytes: int,
    window: int = WINDOW,
) -> AsyncGenerator[dict[str, Any], None]:
    """One report per record of ``chunks``, in order; see the module docstring."""
    queue: asyncio.Queue[Pending | None] = asyncio.Queue(window)
    reader = asyncio.get_running_loop().create_task(_read(chunks, submit, queue, max_record_bytes))
    try:
        while (pending := await queue.get()) is not _END:
            yield await pending.report()
        await reader  # done: it queued the end last
    finally:
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


def encode_report(report: dict[str, Any]) -> bytes:
    """One report as a line of the streamed answer."""
    return orjson.dumps(report) + b"\n"
