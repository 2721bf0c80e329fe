"""The broker's JSON endpoints (FastAPI): list offsets, delete records, hosted partitions.

Thin: validate (pydantic, query parsing), call one function of ``offsets``, return the model.
Per-partition failures are inside the response; request-level ones go through the app's error
table (``yak.web.errors``).

- ``GET /v1/offsets?partition=orders:0&partition=orders:1&timestamp=latest`` — ``timestamp`` is
  ``earliest``, ``latest`` or milliseconds since the epoch;
- ``POST /v1/delete-records`` — ``{"partitions": [{"topic", "partition", "offset"}]}``;
- ``POST /v1/offsets-for-leader-epoch`` — followers find their divergence point (KIP-279);
- ``GET /v1/partitions?topic=orders`` — every replica hosted here (of the given topics) with its
  offsets and role, and the data folder's disk usage;
- ``GET /v1/log-dir`` — the data folder's disk usage and the replicas summed per topic;
- ``GET /v1/scheduled/{topic}/{partition}?after_ms=&after_offset=&limit=`` and ``DELETE
  /v1/scheduled/{topic}/{partition}/{offset}`` — a led partition's scheduled records and their
  cancel (``server.scheduled``, which says why these live here);
- ``GET /v1/share-groups/{group}?topic=orders`` — the group's share-partitions led here
  (loaded ones, and the led partitions of ``topic`` as not loaded: nothing is loaded to answer)
  and its counters here (``share.group_state``).
"""

from __future__ import annotations

import shutil
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from yak.api.scheduled import (
    CancelledSchedule,
    ScheduledPage,
    ScheduledRecordItem,
    ScheduledRecords,
)
from yak.api.share_groups import ShareGroupLeaderState
from yak.errors import InvalidRequestError
from yak.protocol.broker_models import (
    EARLIEST,
    LATEST,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsResponse,
    LogDirResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionsResponse,
)
from yak.types import TopicPartition
from yak_broker.api.share_group_state import leader_state
from yak_broker.server import offsets
from yak_broker.server.broker import Broker
from yak_broker.server.scheduled import cancel_scheduled, list_scheduled

__all__ = ["admin_router", "parse_partition", "parse_timestamp"]


def parse_partition(text: str) -> TopicPartition:
    """``"<topic>:<partition>"`` (topic names cannot hold ``:``)."""
    topic, sep, number = text.rpartition(":")
    if not sep or not topic or not number.isdigit():
        raise InvalidRequestError(f"partition must look like 'topic:0', got {text!r}")
    return TopicPartition(topic, int(number))


def parse_timestamp(text: str) -> int:
    """``earliest`` (-2), ``latest`` (-1) or a timestamp in ms (>= 0)."""
    named = {"earliest": EARLIEST, "latest": LATEST}
    if text.lower() in named:
        return named[text.lower()]
    if text.isdigit():
        return int(text)
    raise InvalidRequestError(f"timestamp must be earliest, latest or ms >= 0, got {text!r}")


def admin_router(broker: Broker) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["broker"])

    @router.get("/offsets")
    async def list_offsets(
        partition: Annotated[list[str], Query(min_length=1)],
        timestamp: str = "latest",
    ) -> ListOffsetsResponse:
        """ListOffsets for partitions this broker leads."""
        tps = [parse_partition(text) for text in partition]
        stamp = parse_timestamp(timestamp)
        results = await offsets.list_offsets_when_ready(broker.replicas, tps, stamp)
        return ListOffsetsResponse(partitions=results)

    @router.post("/delete-records")
    async def delete_records(request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        """Advance log start offsets (DeleteRecords)."""
        results = offsets.delete_records(broker.replicas, request.partitions)
        return DeleteRecordsResponse(partitions=results)

    @router.post("/offsets-for-leader-epoch")
    async def offsets_for_leader_epoch(
        request: OffsetsForLeaderEpochRequest,
    ) -> OffsetsForLeaderEpochResponse:
        """Where each asked leader epoch ends in this leader's log (KIP-101/279)."""
        results = offsets.offsets_for_leader_epoch(broker.replicas, request.partitions)
        return OffsetsForLeaderEpochResponse(partitions=results)

    @router.get("/partitions", response_model=PartitionsResponse)
    async def partitions(
        topic: Annotated[list[str], Query(description="Only these topics (repeatable).")] = [],  # noqa: B006 (FastAPI copies defaults)
    ) -> Response:
        """The partition replicas hosted on this broker (of ``topic`` only, when given)."""
        hosted = await offsets.hosted_partitions(broker.replicas, set(topic) if topic else None)
        data_dir = broker.settings.data_dir
        disk = shutil.disk_usage(data_dir)
        answer = PartitionsResponse(
            broker_id=broker.settings.broker_id,
            partitions=hosted,
            log_dir=str(data_dir.resolve()),
            disk_total_bytes=disk.total,
            disk_free_bytes=disk.free,
        )
        return _json(answer)

    @router.get("/log-dir", response_model=LogDirResponse)
    async def log_dir() -> Response:
        """The data folder's usage and the hosted replicas summed per topic: a dashboard's
        view, one entry per topic however many partitions there are."""
        data_dir = broker.settings.data_dir
        disk = shutil.disk_usage(data_dir)
        answer = LogDirResponse(
            broker_id=broker.settings.broker_id,
            log_dir=str(data_dir.resolve()),
            disk_total_bytes=disk.total,
            disk_free_bytes=disk.free,
            topics=await offsets.hosted_topics(broker.replicas),
        )
        return _json(answer)

    @router.get("/scheduled/{topic}/{partition}")
    async def scheduled(
        topic: str,
        partition: int,
        after_ms: int | None = None,
        after_offset: int = -1,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> ScheduledRecords:
        """The pending scheduled records of a partition led here, in due order."""
        found = list_scheduled(
            broker.replicas,
            broker.delays,
            TopicPartition(topic, partition),
            after_ms=after_ms,
            after_offset=after_offset,
            limit=limit,
        )
        last = found[-1] if len(found) == limit else None
        return ScheduledRecords(
            topic=topic,
            partition=partition,
            records=[
                ScheduledRecordItem(offset=r.offset, deliver_at=r.deliver_at_ms) for r in found
            ],
            next=ScheduledPage(after_ms=last.deliver_at_ms, after_offset=last.offset)
            if last is not None
            else None,
        )

    @router.delete("/scheduled/{topic}/{partition}/{offset}")
    async def cancel(topic: str, partition: int, offset: int) -> CancelledSchedule:
        """Cancel the schedule of the record at ``offset`` (a control batch, replicated)."""
        done = await cancel_scheduled(
            broker.replicas, broker.delays, TopicPartition(topic, partition), offset
        )
        return CancelledSchedule(
            topic=topic, partition=partition, offset=done.offset, deliver_at=done.deliver_at_ms
        )

    @router.get("/share-groups/{group}")
    async def share_group(
        group: str,
        topic: Annotated[list[str], Query(description="Also these topics' led partitions.")] = [],  # noqa: B006 (FastAPI copies defaults)
    ) -> ShareGroupLeaderState:
        """The live state of ``group`` on this broker (404 ``GROUP_ID_NOT_FOUND``)."""
        live = broker.shares.live_state(group, topic)
        return leader_state(broker.settings.broker_id, group, live)

    return router


def _json(answer: BaseModel) -> Response:
    """The model serialised once (a returned model would be validated again against the
    declared response model: at 20,000 replicas that is most of the request's cost)."""
    return Response(answer.model_dump_json(), media_type="application/json")
