"""``AsyncPartitionReader``: stateless reads of one partition from an offset, no group.

``GET /api/v1/topics/{t}/partitions/{p}/records`` with base64 encodings: records as bytes from
``offset`` on, where to read next, and the partition's log start offset and high watermark.
``timeout_ms`` makes the read a long poll, woken by the append. Nothing is stored anywhere:
the caller keeps its own position (``PartitionRead.next_offset``). A read refused with 429
over the principal's fetch quota is sent again after its ``Retry-After``, for at most
``max_throttle_ms`` in all (default 60 s), then ``ThrottlingQuotaExceededError`` is raised.

``filter`` (docs/filters.md; the reader's, or one read's) is applied by the proxy, never here:
only matching records come back and ``next_offset`` is past every record the proxy scanned, so
reading on from it never sees a dropped record again; a read may answer no records and a later
``next_offset``. A bad filter raises ``InvalidFilterError``.
"""

from __future__ import annotations

from typing import NamedTuple

import httpx

from yak.api.admin import TopicDescription
from yak.api.records import PartitionRecords
from yak.clients._http import segment
from yak.closing import AsyncClosing
from yak.errors import OffsetOutOfRangeError
from yak.sdk._client import ApiClient
from yak.sdk.records import ConsumerRecord, consumer_record

__all__ = ["AsyncPartitionReader", "PartitionRead"]

_BASE64 = "base64"


class PartitionRead(NamedTuple):
    records: list[ConsumerRecord]
    #: The offset to read next (the asked one when nothing came back).
    next_offset: int
    high_watermark: int
    log_start_offset: int


class AsyncPartitionReader(AsyncClosing):
    """Reads partitions through the rest-proxy at ``url``."""

    def __init__(
        self,
        url: str,
        *,
        request_timeout_ms: int = 30_000,
        max_throttle_ms: int = 60_000,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        filter: str | None = None,
    ) -> None:
        self.filter = filter
        self._request_timeout_s = request_timeout_ms / 1000
        self._max_throttle_s = max_throttle_ms / 1000
        self._api = ApiClient(
            url,
            timeout_s=self._request_timeout_s,
            transport=transport,
            api_key=api_key,
            username=username,
            password=password,
        )

    async def aclose(self) -> None:
        await self._api.aclose()

    async def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has (``UnknownTopicOrPartitionError`` if none)."""
        return (
            await self._api.call("GET", f"/topics/{segment(topic)}", TopicDescription)
        ).partition_count

    async def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1024 * 1024,
        timeout_ms: int = 0,
        filter: str | None = None,
    ) -> PartitionRead:
        """Records from ``offset`` (``OffsetOutOfRangeError`` outside the log), only those
        ``filter`` (else the reader's) lets through."""
        params: dict[str, str | int] = {
            "offset": offset,
            "max_bytes": max_bytes,
            "timeout_ms": timeout_ms,
            "key_encoding": _BASE64,
            "value_encoding": _BASE64,
            "header_encoding": _BASE64,
        }
        chosen = filter if filter is not None else self.filter
        if chosen is not None:
            params["filter"] = chosen
        answer = await self._api.call(
            "GET",
            f"/topics/{segment(topic)}/partitions/{partition}/records",
            PartitionRecords,
            params=params,
            timeout_s=timeout_ms / 1000 + self._request_timeout_s,
            throttle_budget_s=self._max_throttle_s,
        )
        return PartitionRead(
            [consumer_record(r) for r in answer.records],
            answer.next_offset,
            answer.high_watermark,
            answer.log_start_offset,
        )

    async def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's log start offset and high watermark."""
        try:
            read = await self.read(topic, partition, 0, max_bytes=1)
        except OffsetOutOfRangeError as exc:  # records below the log start were deleted
            start = exc.details.get("log_start_offset")
            if not isinstance(start, int):
                raise
            read = await self.read(topic, partition, start, max_bytes=1)
        return read.log_start_offset, read.high_watermark
