"""An in-process stand-in for the rest-proxy's native API, as an ``httpx.MockTransport``.

Enough of ``/api/v1`` for the SDK's unit tests: topic metadata, producer sessions, idempotent
batches (the binary form, a Kafka record batch decoded with ``yak.record``, or JSON) with the
broker's duplicate detection (a batch sent again returns its first offsets, a
gap is ``OUT_OF_ORDER_SEQUENCE_NUMBER``), plain records, and one consumer-group member, whose
polls answer JSON (``to_poll``) or, with ``binary`` and to a poll accepting it, the binary form
(``to_fetch``).
``faults`` are errors to answer instead of (``before``) or after writing (``lose``: the write
happens, the answer is lost as a dropped connection would lose it).
"""

from __future__ import annotations

import base64
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx

from yak.api.fetch_answer import FetchedBatches, encode_fetch_answer
from yak.api.records import FETCH_MEDIA_TYPE, RECORD_BATCH_MEDIA_TYPE
from yak.errors import YakError
from yak.record import CompressionType, decode_batch

__all__ = ["FakeProxy", "Written"]


@dataclass
class Written:
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    sequence: int = -1


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _error(exc: YakError) -> httpx.Response:
    return httpx.Response(exc.http_status, json=exc.to_dict())


@dataclass
class FakeProxy:
    partitions: dict[str, int] = field(default_factory=dict)
    logs: dict[tuple[str, int], list[Written]] = field(default_factory=dict)
    #: (method, path suffix) -> queue of ("before" | "lose", error) to apply to matching requests
    faults: dict[str, deque[tuple[str, YakError | None]]] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    max_batch_records: int | None = None
    next_producer_id: int = 1000
    # producer id -> partition -> (first sequence, last sequence, offsets) of the last batch
    _last: dict[int, dict[tuple[str, int], tuple[int, int, list[int]]]] = field(
        default_factory=dict
    )
    # the group member
    assignment: list[tuple[str, int]] = field(default_factory=list)
    to_poll: deque[list[dict[str, Any]]] = field(default_factory=deque)
    to_fetch: deque[list[FetchedBatches]] = field(default_factory=deque)
    #: Whether polls may be answered in binary (False: a proxy without the binary form).
    binary: bool = False
    commits: list[dict[str, Any]] = field(default_factory=list)
    seeks: list[dict[str, Any]] = field(default_factory=list)
    member_gone: bool = False
    joins: int = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def fail(self, where: str, how: str, error: YakError | None = None) -> None:
        self.faults.setdefault(where, deque()).append((how, error))

    def values(self, topic: str, partition: int) -> list[bytes | None]:
        return [w.value for w in self.logs.get((topic, partition), [])]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path.removeprefix("/api/v1")
        kind = path.rsplit("/", 1)[-1]
        if kind == "batches":
            self.batches.append(_batch_body(request))
        queued = self.faults.get(kind)
        fault = queued.popleft() if queued else None
        if fault is not None and fault[0] == "before":
            assert fault[1] is not None
            return _error(fault[1])
        response = self._route(request, path)
        if fault is not None and fault[0] == "lose":
            raise httpx.ReadError("connection lost after the write")
        return response

    def _route(self, request: httpx.Request, path: str) -> httpx.Response:
        binary = request.headers.get("content-type") == RECORD_BATCH_MEDIA_TYPE
        body: Any = json.loads(request.content) if request.content and not binary else None
        parts = path.strip("/").split("/")
        if parts[0] == "topics" and len(parts) == 2:
            count = self.partitions.get(parts[1])
            if count is None:
                return httpx.Response(
                    404, json={"code": "UNKNOWN_TOPIC_OR_PARTITION", "message": "no such topic"}
                )
            return httpx.Response(200, json=_topic(parts[1], count))
        if parts == ["producers"]:
            self.next_producer_id += 1
            return httpx.Response(
                201, json={"producer_id": self.next_producer_id, "producer_epoch": 0}
            )
        if parts[0] == "topics" and parts[-1] == "batches":
            return self._batch(parts[1], int(parts[3]), self.batches[-1])
        if parts[0] == "topics" and parts[-1] == "records":
            return self._records(parts[1], body)
        if parts[0] == "groups":
            return self._group(request.method, parts, body, request)
        return httpx.Response(404, json={"code": "UNKNOWN_SERVER_ERROR", "message": path})

    def _batch(self, topic: str, partition: int, body: dict[str, Any]) -> httpx.Response:
        records = body["records"]
        if self.max_batch_records is not None and len(records) > self.max_batch_records:
            return httpx.Response(
                413, json={"code": "MESSAGE_TOO_LARGE", "message": "batch too large"}
            )
        pid, first = body["producer_id"], body["base_sequence"]
        last = self._last.setdefault(pid, {}).get((topic, partition))
        if last is not None and last[0] == first:
            return httpx.Response(200, json=_answer(partition, last[2]))  # a duplicate
        expected = 0 if last is None else last[1] + 1
        if first != expected:
            return httpx.Response(
                409, json={"code": "OUT_OF_ORDER_SEQUENCE_NUMBER", "message": f"want {expected}"}
            )
        log = self.logs.setdefault((topic, partition), [])
        offsets = []
        for i, record in enumerate(records):
            offsets.append(len(log))
            log.append(Written(record["key"], record["value"], pid, first + i))
        self._last[pid][(topic, partition)] = (first, first + len(records) - 1, offsets)
        return httpx.Response(200, json=_answer(partition, offsets))

    def _records(self, topic: str, body: dict[str, Any]) -> httpx.Response:
        results = []
        for record in body["records"]:
            log = self.logs.setdefault((topic, record["partition"]), [])
            results.append(
                {
                    "partition": record["partition"],
                    "offset": len(log),
                    "timestamp": 5,
                    "error": None,
                }
            )
            log.append(Written(_unb64(record.get("key")), _unb64(record.get("value"))))
        return httpx.Response(200, json={"results": results})

    def _member(self) -> dict[str, Any]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.assignment:
            by_topic.setdefault(topic, []).append(partition)
        return {
            "member_epoch": 3,
            "assignment": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    def _group(
        self, method: str, parts: list[str], body: Any, request: httpx.Request
    ) -> httpx.Response:
        group = parts[1]
        if len(parts) == 3 and method == "POST":
            self.joins += 1
            self.member_gone = False
            member_id = (body or {}).get("member_id") or "m-1"
            info: dict[str, Any] = {
                "group_id": group,
                "member_id": member_id,
                "member_epoch": 0,
                "assignment": [],
            }
            return httpx.Response(201, json=info)
        if self.member_gone:
            return httpx.Response(404, json={"code": "UNKNOWN_MEMBER_ID", "message": "expired"})
        action = parts[4] if len(parts) > 4 else ""
        if method == "DELETE":
            return httpx.Response(204)
        accept = request.headers.get("accept", "")
        if action == "records" and self.binary and FETCH_MEDIA_TYPE in accept:
            fetched = self.to_fetch.popleft() if self.to_fetch else []
            by_topic: dict[str, list[int]] = {}
            for topic, partition in self.assignment:
                by_topic.setdefault(topic, []).append(partition)
            body = b"".join(encode_fetch_answer(3, list(by_topic.items()), fetched))
            return httpx.Response(200, content=body, headers={"content-type": FETCH_MEDIA_TYPE})
        if action == "records":
            records = self.to_poll.popleft() if self.to_poll else []
            return httpx.Response(200, json={**self._member(), "records": records})
        if action == "commit":
            self.commits.append(body)
            owned = set(self.assignment)
            for offset in body.get("offsets") or []:
                if (offset["topic"], offset["partition"]) not in owned:
                    return httpx.Response(
                        409, json={"code": "FENCED_MEMBER_EPOCH", "message": "not owned"}
                    )
            return httpx.Response(
                200, json={"group_id": group, "member_id": parts[3], **self._member()}
            )
        if action == "seek":
            self.seeks.append(body)
            return httpx.Response(204)
        return httpx.Response(404, json={"code": "UNKNOWN_SERVER_ERROR", "message": str(parts)})


def _batch_body(request: httpx.Request) -> dict[str, Any]:
    """A batch request as a dict of the JSON form's fields, keys and values as bytes."""
    if request.headers.get("content-type") == RECORD_BATCH_MEDIA_TYPE:
        header, records = decode_batch(request.content)  # checks framing and CRC
        assert header.size == len(request.content), "one batch, nothing after it"
        return {
            "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence,
            "compression": CompressionType(header.compression).name.lower(),
            "records": [
                {"key": r.key, "value": r.value, "headers": r.headers, "timestamp": r.timestamp}
                for r in records
            ],
        }
    body: dict[str, Any] = json.loads(request.content)
    for record in body["records"]:
        record["key"], record["value"] = _unb64(record.get("key")), _unb64(record.get("value"))
    return body


def _topic(name: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": "id",
        "partition_count": count,
        "replication_factor": 1,
        "configs": {},
        "partitions": [
            {
                "partition": p,
                "leader": 0,
                "leader_epoch": 0,
                "partition_epoch": 0,
                "replicas": [0],
                "isr": [0],
            }
            for p in range(count)
        ],
    }


def _answer(partition: int, offsets: list[int]) -> dict[str, Any]:
    return {"partition": partition, "base_offset": offsets[0], "offsets": offsets}
