"""Confluent v2 produce: ``POST /topics/{topic}`` and ``POST /topics/{topic}/partitions/{p}``.

The body's embedded format comes from its Content-Type (``http.content``); the whole request is
checked (JSON, shape, base64, partitions, sizes; in the avro, jsonschema and protobuf formats every
key and value against its schema: ``schema_records``) before any record is sent, so a refused
request writes nothing. As in Confluent's proxy, records that fail once sent are reported in their
``offsets`` entry (``error_code`` 50003 when retrying may succeed, else 50002) and the status is
still 200; ``docs/rest-api.md`` lists where Yak differs. Records are acknowledged with the proxy's
``acks`` setting (default all in-sync replicas). With an ``Idempotency-Key`` header a retry gets
the first answer, from any proxy (``http.idempotency``). Each request observes its ``read``,
``parse`` and ``render`` stages (``metrics.ProduceStats``) once.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from functools import partial

from fastapi import APIRouter, Request, Response
from starlette.types import Scope

from yak.errors import InvalidRequestError, UnknownServerError, YakError
from yak.observability.http import ROUTE_TEMPLATE
from yak.record import RecordInput
from yak_rest_proxy.api.v2.embedded import from_embedded
from yak_rest_proxy.api.v2.metadata_routes import V2_TAG
from yak_rest_proxy.api.v2.models import V2ProduceRequest, V2ProduceResponse
from yak_rest_proxy.api.v2.produce_body import parse_produce_request
from yak_rest_proxy.api.v2.schema_records import encode_column, record_serdes
from yak_rest_proxy.http.body import openapi_body, read_body
from yak_rest_proxy.http.content import EmbeddedFormat, negotiate, request_format
from yak_rest_proxy.http.errors import v2_error, v2_error_response
from yak_rest_proxy.http.idempotency import (
    IdempotencyKeyHeader,
    fingerprint,
    idempotency_header,
)
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.produce.publish import OutgoingRecord, check_record_count, enqueue
from yak_rest_proxy.quotas.quotas import QuotaKind, Quotas
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["plain_produce", "produce_router", "produce_v2"]

_log = logging.getLogger(__name__)
#: A request's work (``native.fast_lane.Work``, which this dialect may not import).
Work = Callable[[Request], Awaitable[Response]]

_PRODUCE_TYPES = (
    "application/vnd.kafka.json.v2+json",
    "application/vnd.kafka.binary.v2+json",
    "application/json",
)
#: Documented only where a schema registry is configured (elsewhere they are 415).
_SCHEMA_TYPES = (
    "application/vnd.kafka.avro.v2+json",
    "application/vnd.kafka.jsonschema.v2+json",
    "application/vnd.kafka.protobuf.v2+json",
)


def produce_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(tags=[V2_TAG])
    types = _PRODUCE_TYPES + (_SCHEMA_TYPES if runtime.settings.schema_registry_url else ())
    produce = partial(produce_v2, runtime)

    @router.post(
        "/topics/{topic}",
        response_model=V2ProduceResponse,
        openapi_extra=openapi_body(V2ProduceRequest, *types),
    )
    async def produce_to_topic(
        request: Request, topic: str, _key: IdempotencyKeyHeader = None
    ) -> Response:
        """Produce records; each goes to its ``partition``, else by key hash, else sticky."""
        return await produce(request, topic, None)

    @router.post(
        "/topics/{topic}/partitions/{partition}",
        response_model=V2ProduceResponse,
        openapi_extra=openapi_body(V2ProduceRequest, *types),
    )
    async def produce_to_partition(
        request: Request, topic: str, partition: int, _key: IdempotencyKeyHeader = None
    ) -> Response:
        """Produce records to one partition."""
        return await produce(request, topic, partition)

    return router


def raise_partition_conflict(where: str, given: int | None, url_partition: int) -> None:
    raise InvalidRequestError(
        f"{where}.partition is {given} but the URL names partition {url_partition}",
        kind="invalid_data",
    )


async def produce_v2(
    runtime: ProxyRuntime, request: Request, topic: str, partition: int | None
) -> Response:
    """A v2 produce request's work (both routes; the plain one also from the fast lane,
    ``native.fast_lane``): typed errors raised, for the caller's v2 dialect."""
    started = time.perf_counter()
    media = negotiate(request.headers.get("accept"))
    fmt = request_format(request.headers.get("content-type"))
    await runtime.topics.record(topic)
    principal = runtime.quotas.admit(QuotaKind.PRODUCE)
    raw = await read_body(request, runtime.settings.max_request_bytes)
    read = time.perf_counter()
    runtime.quotas.charge(QuotaKind.PRODUCE, principal, len(raw))
    work = partial(_publish, runtime, raw, topic, partition, fmt, media, started, read)
    key = idempotency_header(request)
    if key is None or not runtime.idempotency.enabled:
        return await work()
    print_ = fingerprint(request, raw)
    return await runtime.idempotency.once(Quotas.principal(), key, print_, work)


async def _publish(
    runtime: ProxyRuntime,
    raw: bytes,
    topic: str,
    partition: int | None,
    fmt: EmbeddedFormat,
    media: str,
    started: float,
    read: float,
) -> Response:
    """The body checked whole, then its records sent; the answer once they are."""
    settings = runtime.settings
    body = parse_produce_request(raw)
    items = body.records
    check_record_count(len(items), settings.max_records_per_request)
    now_ms = runtime.clock.time_ms()
    records = []
    key_serde = value_serde = None
    if fmt.schema_based:
        key_serde, value_serde = await record_serdes(
            runtime.schemas, fmt, topic, body.schemas, items
        )
        keys = encode_column(key_serde, [k for k, _, _ in items], "key")
        values = encode_column(value_serde, [v for _, v, _ in items], "value")
    for index, (key, value, given) in enumerate(items):
        if partition is not None and given not in (None, partition):
            raise_partition_conflict(f"records[{index}]", given, partition)
        if fmt.schema_based:
            key_bytes, value_bytes = keys[index], values[index]
        else:
            key_bytes = None if key is None else from_embedded(key, fmt, index, "key")
            value_bytes = None if value is None else from_embedded(value, fmt, index, "value")
        record = RecordInput(key=key_bytes, value=value_bytes, timestamp=now_ms)
        records.append(OutgoingRecord(record, partition if partition is not None else given))
    publication = enqueue(
        runtime.producer,
        runtime.partitioner,
        runtime.cache.snapshot,
        topic,
        records,
        acks=settings.acks,
    )
    parsed = time.perf_counter()
    results = await publication.results()
    answered = time.perf_counter()
    offsets = []
    for result in results:
        if isinstance(result, YakError):
            _, code = v2_error(result)
            error_code = 50003 if result.retriable else code if code < 50000 else 50002
            offsets.append(
                {
                    "partition": None,
                    "offset": None,
                    "error_code": error_code,
                    "error": result.message,
                }
            )
        else:
            offsets.append(
                {
                    "partition": result.partition,
                    "offset": result.offset,
                    "error_code": None,
                    "error": None,
                }
            )
    response = json_response(
        {
            "offsets": offsets,
            "key_schema_id": None if key_serde is None else key_serde.schema_id,
            "value_schema_id": None if value_serde is None else value_serde.schema_id,
        },
        media,
    )
    runtime.stats.produce.on_request(read - started, parsed - read, time.perf_counter() - answered)
    return response


_PLAIN = re.compile(r"/topics/([^/]+)")
_PLAIN_ROUTE = "/topics/{topic}"


def plain_produce(runtime: ProxyRuntime) -> Callable[[Scope], Work | None]:
    """The fast lane's matcher (``native.fast_lane``, ``others``) for the plain v2 produce:
    ``POST /topics/{topic}`` with no query and no ``Idempotency-Key`` (whose format FastAPI's
    header parameter checks). Its work answers as the route does, errors in the v2 dialect."""

    async def work(request: Request, topic: str) -> Response:
        try:
            return await produce_v2(runtime, request, topic, None)
        except YakError as exc:
            return v2_error_response(exc)
        except Exception as exc:  # as the app's handler of anything unexpected answers
            _log.exception("unhandled error serving POST %s", request.url.path)
            return v2_error_response(UnknownServerError(f"internal error: {type(exc).__name__}"))

    def match(scope: Scope) -> Work | None:
        if scope["method"] != "POST" or scope["query_string"]:
            return None
        found = _PLAIN.fullmatch(scope["path"])
        if found is None or any(name == b"idempotency-key" for name, _ in scope["headers"]):
            return None
        scope[ROUTE_TEMPLATE] = _PLAIN_ROUTE
        return partial(work, topic=found[1])

    return match
