"""``YakHttp``: the blocking native-API (``/api/v1``) calls the ``yak`` data source makes.

Spark runs readers and writers in worker processes, one task at a time per Python worker, and
pickles them there; so this client is synchronous, cheap to open, and opened inside
``read()`` / ``write()`` (never kept on a pickled object). ``urls`` are bootstrap rest-proxies:
any proxy serves any request, so a request that cannot reach one (``NetworkError``) moves on to
the next, starting from ``start`` (to spread tasks over proxies); a retriable error is retried
a few times, and every other error is the typed ``YakError`` of the answer.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from typing import Literal, TypeVar

import httpx
from pydantic import BaseModel

from yak.api.admin import PartitionOffset, TopicDescription, TopicList
from yak.api.records import (
    API_PREFIX,
    PartitionRecords,
    ProduceBatchRequest,
    ProduceBatchResponse,
    ProduceRecord,
    RecordHeader,
)
from yak.clients._http import error_from_response, segment
from yak.closing import Closing
from yak.errors import KafkaTimeoutError, NetworkError, OffsetOutOfRangeError, YakError
from yak.sdk.idempotence import BatchStamp

__all__ = ["OutgoingRecord", "YakHttp"]

_M = TypeVar("_M", bound=BaseModel)
_B64 = "base64"
_ATTEMPTS = 5
_BACKOFF_S = 0.2

#: key, value, headers, partition-less record of an idempotent batch.
OutgoingRecord = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


class YakHttp(Closing):
    """Blocking calls to the rest-proxies at ``urls`` (see the module docstring)."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout_s: float,
        start: int = 0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one rest-proxy URL")
        self._urls = [urls[(start + i) % len(urls)] for i in range(len(urls))]
        self._timeout_s = timeout_s
        self._http = httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        model: type[_M],
        *,
        body: BaseModel | None = None,
        params: dict[str, str | int] | None = None,
    ) -> _M:
        """Every call here is safe to repeat (reads, and idempotent batches): a retriable
        error (no leader, a timeout, no proxy reachable) is retried ``_ATTEMPTS`` times."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return self._attempt(method, path, model, body, params)
            except YakError as exc:
                if not exc.retriable or attempt == _ATTEMPTS:
                    raise
                time.sleep(_BACKOFF_S * attempt)
        raise AssertionError("unreachable")

    def _attempt(
        self,
        method: str,
        path: str,
        model: type[_M],
        body: BaseModel | None,
        params: dict[str, str | int] | None,
    ) -> _M:
        content = None if body is None else body.model_dump_json(exclude_none=True)
        headers = None if content is None else {"content-type": "application/json"}
        failure: Exception | None = None
        for index, url in enumerate(self._urls):
            try:
                answer = self._http.request(
                    method,
                    f"{url}{API_PREFIX}{path}",
                    content=content,
                    headers=headers,
                    params=params,
                )
            except httpx.TimeoutException as exc:
                raise KafkaTimeoutError(
                    f"{method} {url}{API_PREFIX}{path}: no answer within {self._timeout_s:g} s"
                ) from exc
            except httpx.TransportError as exc:
                failure = exc
                continue
            if index:  # keep using the proxy that answered
                self._urls = self._urls[index:] + self._urls[:index]
            if answer.is_error:
                raise error_from_response(answer)
            return model.model_validate_json(answer.content)
        raise NetworkError(f"no rest-proxy of {self._urls} answers: {failure}") from failure

    def describe_topic(self, topic: str) -> TopicDescription:
        return self._call("GET", f"/topics/{segment(topic)}", TopicDescription)

    def list_topics(self) -> TopicList:
        return self._call("GET", "/topics", TopicList)

    def offset_for(
        self, topic: str, partition: int, timestamp: int | Literal["earliest", "latest"]
    ) -> int:
        """ListOffsets: log start, high watermark, or the first offset at ``timestamp`` ms."""
        path = f"/topics/{segment(topic)}/partitions/{partition}/offsets"
        return self._call("GET", path, PartitionOffset, params={"timestamp": str(timestamp)}).offset

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        record_filter: str | None = None,
    ) -> PartitionRecords:
        """A stateless read from ``offset`` (keys, values, headers base64); no waiting. With
        ``record_filter`` only the records it passes, ``next_offset`` past all scanned."""
        params: dict[str, str | int] = {
            "offset": offset,
            "max_bytes": max_bytes,
            "timeout_ms": 0,
            "key_encoding": _B64,
            "value_encoding": _B64,
            "header_encoding": _B64,
        }
        if record_filter is not None:
            params["filter"] = record_filter
        path = f"/topics/{segment(topic)}/partitions/{partition}/records"
        return self._call("GET", path, PartitionRecords, params=params)

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's log start offset and high watermark, in one request if it can."""
        try:
            page = self.read(topic, partition, 0, 1)
        except OffsetOutOfRangeError as exc:  # the log no longer starts at 0
            start = exc.details.get("log_start_offset")
            if not isinstance(start, int):
                raise
            page = self.read(topic, partition, start, 1)
        return page.log_start_offset, page.high_watermark

    def produce_batch(
        self,
        topic: str,
        partition: int,
        stamp: BatchStamp,
        records: Sequence[OutgoingRecord],
        compression: str,
    ) -> ProduceBatchResponse:
        """Append one idempotent batch; the same ``stamp`` again returns the first offsets."""
        body = ProduceBatchRequest.model_validate(
            {
                "producer_id": stamp.producer_id,
                "producer_epoch": stamp.producer_epoch,
                "base_sequence": stamp.base_sequence,
                "compression": compression,
                "key_encoding": _B64,
                "value_encoding": _B64,
                "header_encoding": _B64,
                "records": [
                    ProduceRecord(
                        key=_b64(key),
                        value=_b64(value),
                        headers=[RecordHeader(key=k, value=_b64(v)) for k, v in headers],
                    )
                    for key, value, headers in records
                ],
            }
        )
        path = f"/topics/{segment(topic)}/partitions/{partition}/batches"
        return self._call("POST", path, ProduceBatchResponse, body=body)
