"""The native record API (``/api/v1``): produce with headers and timestamps, stateless reads.

* ``POST /api/v1/topics/{topic}/records?acks=all|1|0`` — records with key, value, headers,
  timestamp and optional partition (``yak.api.records``); the answer has one result per record,
  status 200 when at least one record was written and the first error's status when none was.
  The request is checked whole before anything is sent. ``partitioner=sticky|round_robin|
  load_aware`` chooses the partition of its keyless records without one (default: the proxy's
  ``YAK_PARTITIONER``; ``produce.partitioners``). ``deliver_after_ms`` / ``deliver_at`` per
  record or for the whole body delay delivery to share groups (``produce_delays``). With an
  ``Idempotency-Key`` header a retry gets the first answer (``http.idempotency``).
* ``GET /api/v1/topics/{topic}/partitions/{p}/records?offset=&max_bytes=&timeout_ms=`` — read one
  partition from an explicit offset, no consumer group: waits up to ``timeout_ms`` for a first
  record (woken by the append, not by polling) and answers ``next_offset`` and the high
  watermark. Only records below the high watermark are ever returned. ``filter=`` (docs/
  filters.md) returns only the records it lets through; ``next_offset`` is past every record
  scanned, so a read that scanned only dropped records answers none and a later offset (with
  ``timeout_ms`` it keeps scanning until a record matches or the time is up). A bad filter is
  400 ``INVALID_FILTER`` / ``FILTER_TOO_LARGE`` before anything is read.

Each produce and read observes its stages (``metrics``: ``yak_proxy_produce_stage_seconds``,
``yak_proxy_poll_stage_seconds``) once, with ``time.perf_counter`` pairs.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from functools import partial
from itertools import repeat
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query, Request, Response

from yak.api.records import (
    API_PREFIX,
    INT64_MAX,
    RECORD_BATCH_MEDIA_TYPE,
    Encoding,
    HeaderEncoding,
    PartitionRecords,
    ProduceBatchRequest,
    ProduceBatchResponse,
    ProduceRecordsRequest,
    ProduceRecordsResponse,
    ProducerSession,
    encode_data,
    utf8,
)
from yak.delays import DelaySettings, delay_settings
from yak.errors import (
    InvalidRequestError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.models import TopicRecord
from yak.partitioner import PartitionerName
from yak.record import CompressionType, RecordInput, encode_batch
from yak_rest_proxy.api.native.batch_body import check_batch, is_record_batch
from yak_rest_proxy.api.native.produce_body import fast_outgoing
from yak_rest_proxy.api.native.produce_delays import record_headers
from yak_rest_proxy.api.native.render import renderer
from yak_rest_proxy.consume.reader import FILTER_DOC, filter_param
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.idempotency import (
    IdempotencyKeyHeader,
    fingerprint,
    idempotency_header,
)
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.produce.accumulator import ProducedRecord
from yak_rest_proxy.produce.direct import send_batch
from yak_rest_proxy.produce.publish import (
    OutgoingRecord,
    check_record_count,
    check_records,
    enqueue,
    max_message_bytes,
)
from yak_rest_proxy.quotas.quotas import QuotaKind, Quotas
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["ACKS", "native_router", "produce_batch", "produce_records", "produce_response"]

NATIVE_TAG = "native records"
#: The ``acks`` query values and what they mean to the producer.
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_JSON = "application/json"
_NO_DELAYS = DelaySettings(enabled=False, max_delay_ms=0)


def _header_bytes(value: str | None, encoding: HeaderEncoding, where: str) -> bytes | None:
    if encoding is HeaderEncoding.STRING:
        return None if value is None else utf8(value, where)
    return encode_data(value, Encoding.BASE64, where)


def _header_key(key: str, where: str) -> str:
    utf8(key, where)  # the record encoder writes keys as UTF-8
    return key


def _outgoing(
    body: ProduceRecordsRequest | ProduceBatchRequest,
    now_ms: int = 0,
    delays: DelaySettings = _NO_DELAYS,
) -> list[OutgoingRecord]:
    """The body's records, each with its delay as a header (``produce_delays``; by default as
    on a topic without delays)."""
    records = []
    default_after = default_at = None
    if isinstance(body, ProduceRecordsRequest):
        default_after, default_at = body.deliver_after_ms, body.deliver_at
    for index, item in enumerate(body.records):
        where = f"records[{index}]"
        headers = tuple(
            (
                _header_key(h.key, f"{where}.headers[{i}].key"),
                _header_bytes(h.value, body.header_encoding, f"{where}.headers[{i}]"),
            )
            for i, h in enumerate(item.headers)
        )
        after, at = item.deliver_after_ms, item.deliver_at
        if after is None and at is None:
            after, at = default_after, default_at
        headers = record_headers(headers, after, at, now_ms, delays, where)
        record = RecordInput(
            key=encode_data(item.key, body.key_encoding, f"{where}.key"),
            value=encode_data(item.value, body.value_encoding, f"{where}.value"),
            headers=headers,
            timestamp=item.timestamp,
        )
        records.append(OutgoingRecord(record, item.partition))
    return records


def produce_response(results: Sequence[ProducedRecord | YakError]) -> Response:
    """``ProduceRecordsResponse`` of ``results``, rendered without models (one dict a record):
    status 200 when a record was written, else the first error's status."""
    rendered: list[dict[str, Any]] = []
    first_error: YakError | None = None
    for result in results:
        if isinstance(result, YakError):
            first_error = first_error or result
            error = {"code": result.code, "message": result.message, "retriable": result.retriable}
            rendered.append({"partition": None, "offset": None, "timestamp": None, "error": error})
        else:
            partition, offset, timestamp = result
            rendered.append(
                {"partition": partition, "offset": offset, "timestamp": timestamp, "error": None}
            )
    status = 200
    if first_error is not None and all(r["error"] is not None for r in rendered):
        status = first_error.http_status
    return Response(orjson.dumps({"results": rendered}), status_code=status, media_type=_JSON)


async def produce_records(
    runtime: ProxyRuntime,
    request: Request,
    topic: str,
    acks: int,
    partitioner: PartitionerName | None = None,
) -> Response:
    """``POST /api/v1/topics/{topic}/records``: the route's work, also served by the fast lane
    (``native.fast_lane``) without FastAPI's routing and parameter handling. ``partitioner``:
    the keyless records' strategy (None: the proxy's setting)."""
    settings = runtime.settings
    started = time.perf_counter()
    topic_state = await runtime.topics.record(topic)
    principal = runtime.quotas.admit(QuotaKind.PRODUCE)
    raw = await read_body(request, settings.max_request_bytes)
    read = time.perf_counter()
    runtime.quotas.charge(QuotaKind.PRODUCE, principal, len(raw))
    key = idempotency_header(request)
    if key is None or not runtime.idempotency.enabled:
        return await _publish(runtime, raw, topic_state, topic, acks, partitioner, started, read)
    work = partial(_publish, runtime, raw, topic_state, topic, acks, partitioner, started, read)
    print_ = fingerprint(request, raw)
    return await runtime.idempotency.once(Quotas.principal(), key, print_, work)


async def _publish(
    runtime: ProxyRuntime,
    raw: bytes,
    topic_state: TopicRecord,
    topic: str,
    acks: int,
    partitioner: PartitionerName | None,
    started: float,
    read: float,
) -> Response:
    """The body checked whole, then its records sent; the answer once they are."""
    settings = runtime.settings
    now_ms = runtime.clock.time_ms()
    outgoing = fast_outgoing(raw, now_ms)
    if outgoing is None:  # not the plain shape (or a delay): the model parses it
        body = parse_model(ProduceRecordsRequest, raw)
        outgoing = _outgoing(body, now_ms, delay_settings(topic_state.configs))
    check_record_count(len(outgoing), settings.max_records_per_request)
    publication = enqueue(
        runtime.producer,
        runtime.partitioner if partitioner is None else runtime.partitioners.get(partitioner),
        runtime.cache.snapshot,
        topic,
        outgoing,
        acks=acks,
    )
    parsed = time.perf_counter()
    results = await publication.results()
    answered = time.perf_counter()
    response = produce_response(results)
    runtime.stats.produce.on_request(read - started, parsed - read, time.perf_counter() - answered)
    return response


def _batch_openapi() -> dict[str, Any]:
    """The JSON body's schema and the binary form's media type (bytes, no schema)."""
    extra = openapi_body(ProduceBatchRequest, _JSON)
    extra["requestBody"]["content"][RECORD_BATCH_MEDIA_TYPE] = {
        "schema": {"type": "string", "format": "binary"}
    }
    return extra


def _json_records(
    runtime: ProxyRuntime, topic: str, partition: int, raw: bytes, delays: DelaySettings
) -> tuple[ProduceBatchRequest, list[OutgoingRecord]]:
    """A JSON body parsed and its records checked."""
    body = parse_model(ProduceBatchRequest, raw)
    check_record_count(len(body.records), runtime.settings.max_records_per_request)
    records = _outgoing(body, runtime.clock.time_ms(), delays)
    if any(r.partition is not None for r in records):
        raise InvalidRequestError(
            "records of a batch take no partition: the URL names it", kind="invalid_data"
        )
    for record in records:
        record.partition = partition
    check_records(runtime.cache.snapshot, topic, records)
    return body, records


def _encode_json_batch(
    runtime: ProxyRuntime, topic: str, body: ProduceBatchRequest, records: list[OutgoingRecord]
) -> bytes:
    """The record batch of a JSON body, encoded here with its producer fields."""
    try:
        batch = encode_batch(
            [r.record for r in records],
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
            base_sequence=body.base_sequence,
            compression=CompressionType[body.compression.upper()],
            now_ms=runtime.clock.time_ms(),
        )
    except (ValueError, OverflowError, struct.error) as exc:
        raise InvalidRequestError(f"the batch cannot be encoded: {exc}") from None
    limit = max_message_bytes(runtime.cache.snapshot, topic)
    if len(batch) > limit:
        raise MessageTooLargeError(
            f"the batch is {len(batch):,} bytes; topic {topic!r} accepts at most {limit:,} "
            "(max.message.bytes)",
            topic=topic,
        )
    return batch


def _binary_batch(
    runtime: ProxyRuntime,
    topic: str,
    partition: int,
    partitions: int,
    raw: bytes,
    delays: DelaySettings,
) -> tuple[bytes, int]:
    """The client's record batch, checked (``native.batch_body``), and its record count."""
    if not 0 <= partition < partitions:
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has no partition {partition} (it has {partitions})",
            topic=topic,
            partition=partition,
        )
    header = check_batch(
        raw,
        topic=topic,
        max_message_bytes=max_message_bytes(runtime.cache.snapshot, topic),
        max_records=runtime.settings.max_records_per_request,
        delays=delays,
        now_ms=runtime.clock.time_ms(),
    )
    return raw, header.record_count


async def produce_batch(
    runtime: ProxyRuntime, request: Request, topic: str, partition: int, acks: int
) -> Response:
    """``POST /api/v1/topics/{topic}/partitions/{partition}/batches``: the route's work, also
    served by the fast lane (``native.fast_lane``) for the binary form."""
    settings = runtime.settings
    produce_stats = runtime.stats.produce
    started = time.perf_counter()
    topic_state = await runtime.topics.record(topic)
    binary = is_record_batch(request.headers.get("content-type"))
    principal = runtime.quotas.admit(QuotaKind.PRODUCE)
    raw = await read_body(request, settings.max_request_bytes)
    read = time.perf_counter()
    runtime.quotas.charge(QuotaKind.PRODUCE, principal, len(raw))
    delays = delay_settings(topic_state.configs)
    if binary:
        batch, count = _binary_batch(runtime, topic, partition, topic_state.partitions, raw, delays)
        parsed = time.perf_counter()
    else:
        body, records = _json_records(runtime, topic, partition, raw, delays)
        parsed = time.perf_counter()
        batch, count = _encode_json_batch(runtime, topic, body, records), len(records)
    sent = time.perf_counter()
    produce_stats.sender.observe(sent - parsed)
    result = await send_batch(
        runtime.cache,
        runtime.brokers,
        topic,
        partition,
        batch,
        acks=acks,
        timeout_s=settings.produce_timeout_ms / 1000,
        clock=runtime.clock,
    )
    answered = time.perf_counter()
    produce_stats.broker.observe(answered - sent)
    answer = {  # ProduceBatchResponse
        "partition": partition,
        "base_offset": result.base_offset,
        "offsets": list(range(result.base_offset, result.base_offset + count)),
    }
    response = json_response(answer, _JSON)
    produce_stats.on_request(read - started, parsed - read, time.perf_counter() - answered)
    return response


def native_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=[NATIVE_TAG])
    settings = runtime.settings
    poll_stats = runtime.stats.poll

    @router.post(
        "/topics/{topic}/records",
        response_model=ProduceRecordsResponse,
        openapi_extra=openapi_body(ProduceRecordsRequest, _JSON),
    )
    async def produce(
        request: Request,
        topic: str,
        acks: Annotated[Literal["all", "-1", "1", "0"], Query()] = "all",
        partitioner: Annotated[
            PartitionerName | None,
            Query(description="Keyless records' partitioner (default: the proxy's setting)."),
        ] = None,
        _key: IdempotencyKeyHeader = None,
    ) -> Response:
        """Produce records; per-record results in request order."""
        return await produce_records(runtime, request, topic, ACKS[acks], partitioner)

    @router.post("/producers", status_code=201, response_model=ProducerSession)
    async def new_producer() -> Response:
        """An idempotent producer identity (a producer id from etcd, epoch 0)."""
        producer_id = await runtime.producer_ids.allocate()
        return json_response(ProducerSession(producer_id=producer_id, producer_epoch=0), _JSON, 201)

    @router.post(
        "/topics/{topic}/partitions/{partition}/batches",
        response_model=ProduceBatchResponse,
        openapi_extra=_batch_openapi(),
        name="produce_batch",  # the operationId the route always had
    )
    async def produce_batch_route(
        request: Request,
        topic: str,
        partition: int,
        acks: Annotated[Literal["all", "-1", "1"], Query()] = "all",
    ) -> Response:
        """Append one idempotent batch: a retry of it returns its first offsets, never a copy.

        The body is JSON (``ProduceBatchRequest``) or, with Content-Type
        ``application/vnd.yak.recordbatch.v2``, one Kafka record batch v2 the client encoded
        (its producer id, epoch and base sequence in the batch header), forwarded as it is.
        """
        return await produce_batch(runtime, request, topic, partition, ACKS[acks])

    @router.get("/topics/{topic}/partitions/{partition}/records", response_model=PartitionRecords)
    async def read(
        topic: str,
        partition: int,
        offset: Annotated[int, Query(ge=0, le=INT64_MAX, description="First offset to read.")] = 0,
        max_bytes: Annotated[int, Query(ge=1, le=64 * 1024 * 1024)] = 1024 * 1024,
        timeout_ms: Annotated[int, Query(ge=0, description="Longest wait for a record.")] = 0,
        key_encoding: Encoding = Encoding.STRING,
        value_encoding: Encoding = Encoding.JSON,
        header_encoding: HeaderEncoding = HeaderEncoding.STRING,
        filter_text: Annotated[str | None, Query(alias="filter", description=FILTER_DOC)] = None,
    ) -> Response:
        """Read one partition from ``offset`` (no consumer group, no committed state)."""
        record_filter = filter_param(filter_text)
        await runtime.topics.record(topic)
        principal = runtime.quotas.admit(QuotaKind.FETCH)
        wait = min(timeout_ms, settings.consumer_request_max_timeout_ms)
        (read,) = await runtime.reader.fetch(
            [(topic, partition, offset)],
            max_wait_ms=wait,
            max_bytes=max_bytes,
            record_filter=record_filter,
        )
        if read.error is not None:
            raise read.error
        rendering = time.perf_counter()
        body = {  # PartitionRecords
            "topic": topic,
            "partition": partition,
            "records": list(
                map(
                    renderer(key_encoding, value_encoding, header_encoding),
                    repeat(topic),
                    repeat(partition),
                    read.records,
                )
            ),
            "next_offset": read.next_offset,
            "high_watermark": read.high_watermark,
            "log_start_offset": read.log_start_offset,
        }
        response = json_response(body, _JSON)
        poll_stats.render.observe(time.perf_counter() - rendering)
        runtime.quotas.charge(QuotaKind.FETCH, principal, len(response.body))
        return response

    return router
