"""Confluent v3 produce: ``POST /v3/clusters/{cluster_id}/topics/{topic}/records``.

The body is one record (``produce_request``) or many, as Concatenated JSON. The cluster and
the topic are checked first (404 / 404 and 404 / 40403, before any record is read); then:

* **Streaming mode** (``Transfer-Encoding: chunked``): the answer is 200 at once and chunked;
  records are read, produced and reported one by one as they arrive (``record_stream``), each
  report a line of JSON, in the records' order, each with its own ``error_code`` (200: written).
  A client may keep the request open and read reports while it sends.
* **A body of known length**: the same reading; if it holds one record, the answer is that
  record's report with its status (200, or the error's: 400 bad base64, 404 / 40402 a missing
  partition, 422 an unsupported type …); if it holds several, 200 and one report per line.
  An empty body is 422 / 42206 (Confluent's "Payload error").

Each record is queued at the producer as soon as it is parsed (so one request's records are
batched per partition like any other's) and counts against the principal's produce quota (a
record over it is reported 429 / 42901). Records are acknowledged with the proxy's ``acks``.
A record in a schema format waits for its schema (``schema_data``) only the first time the
proxy meets that schema; the records behind it wait their turn, so order is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from yak.errors import (
    InvalidRequestError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak.metadata.cache import ClusterSnapshot
from yak_rest_proxy.api.v3.admin_routes import V3_TAG, links_of
from yak_rest_proxy.api.v3.errors import v3_error_body
from yak_rest_proxy.api.v3.models import ProduceRecord
from yak_rest_proxy.api.v3.produce_request import (
    ParsedRecord,
    build_record,
    delivery_report,
    load_record,
)
from yak_rest_proxy.api.v3.record_stream import (
    Pending,
    Ready,
    delivery_reports,
    encode_report,
)
from yak_rest_proxy.api.v3.schema_data import SchemaRef, cached_serde, resolve, schema_refs
from yak_rest_proxy.api.v3.v3_route import V3Route
from yak_rest_proxy.http.body import openapi_body
from yak_rest_proxy.produce.publish import Publication, enqueue
from yak_rest_proxy.quotas.quotas import QuotaKind
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.schemas import Serde

__all__ = ["ReportStream", "check_partition", "records_router", "report_status"]


def check_partition(snapshot: ClusterSnapshot, topic: str, partition: int | None) -> None:
    """404 / 40402 for a ``partition_id`` the topic lacks, said of the record (the producer's
    own check names the record by its index in a request, which a stream does not have)."""
    record = snapshot.topics.get(topic)
    if partition is not None and record is not None and partition >= record.partitions:
        raise UnknownTopicOrPartitionError(
            f"Partition {partition} not found: topic '{topic}' has {record.partitions}",
            topic=topic,
            partition=partition,
        )


def report_status(report: dict[str, Any]) -> int:
    """The HTTP status a report's ``error_code`` stands for (Confluent's five-digit codes
    start with their status: 40403 is a 404)."""
    code = int(report["error_code"])
    return code // 100 if code >= 1000 else code


class ReportStream(Response):
    """A chunked answer of report lines. Unlike starlette's ``StreamingResponse`` it never
    calls ``receive`` (which would take the request body's chunks from the reader)."""

    def __init__(self, reports: AsyncIterator[dict[str, Any]]) -> None:
        super().__init__(status_code=200)
        # No content-length: the server sends the answer chunked.
        self.raw_headers = [(b"content-type", b"application/json")]
        self._reports = reports

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        async for report in self._reports:
            await send(
                {"type": "http.response.body", "body": encode_report(report), "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Delivery:
    """A record at the producer; its report once the producer answers."""

    __slots__ = ("_cluster", "_parsed", "_publication", "_topic")

    def __init__(
        self, cluster: str, topic: str, parsed: ParsedRecord, publication: Publication
    ) -> None:
        self._cluster, self._topic = cluster, topic
        self._parsed, self._publication = parsed, publication

    async def report(self) -> dict[str, Any]:
        (result,) = await self._publication.results()
        return delivery_report(self._cluster, self._topic, self._parsed, result)


async def _chained(
    first: dict[str, Any], second: dict[str, Any], rest: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    yield first
    yield second
    async for report in rest:
        yield report


def records_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix="/v3", tags=[V3_TAG], route_class=V3Route)
    settings = runtime.settings

    def submitter(cluster: str, topic: str) -> Callable[[bytes], Pending | Awaitable[Pending]]:
        def send(body: dict[str, Any], serdes: dict[str, Serde]) -> Pending:
            parsed = build_record(body, runtime.clock.time_ms(), serdes)
            snapshot = runtime.cache.snapshot
            check_partition(snapshot, topic, parsed.outgoing.partition)
            publication = enqueue(
                runtime.producer,
                runtime.partitioner,
                snapshot,
                topic,
                [parsed.outgoing],
                acks=settings.acks,
            )
            return _Delivery(cluster, topic, parsed, publication)

        async def resolving(body: dict[str, Any], refs: dict[str, SchemaRef]) -> Pending:
            try:
                serdes = {f: await resolve(runtime.schemas, ref) for f, ref in refs.items()}
                return send(body, serdes)
            except YakError as exc:
                return Ready(v3_error_body(exc))

        def submit(raw: bytes) -> Pending | Awaitable[Pending]:
            """Sent at once, or (a schema not known yet) once the registry answered."""
            try:
                principal = runtime.quotas.admit(QuotaKind.PRODUCE)
                runtime.quotas.charge(QuotaKind.PRODUCE, principal, len(raw))
                body = load_record(raw)
                refs = schema_refs(body, topic) if runtime.schemas.enabled else {}
                serdes = {}
                for field, ref in refs.items():
                    serde = cached_serde(runtime.schemas, ref)
                    if serde is None:
                        return resolving(body, refs)
                    serdes[field] = serde
                return send(body, serdes)
            except YakError as exc:
                return Ready(v3_error_body(exc))

        return submit

    @router.post(
        "/clusters/{cluster_id}/topics/{topic}/records",
        openapi_extra=openapi_body(ProduceRecord, "application/json"),
    )
    async def produce(request: Request, cluster_id: str, topic: str) -> Response:
        """Produce records: one JSON object per record, concatenated; one report per record.
        With ``Transfer-Encoding: chunked`` the request streams (see the module docstring)."""
        links = links_of(request, runtime, cluster_id)
        await runtime.topics.record(topic)
        streaming = "chunked" in request.headers.get("transfer-encoding", "").lower()
        declared = request.headers.get("content-length", "")
        if not streaming and declared.isdecimal() and int(declared) > settings.max_request_bytes:
            raise MessageTooLargeError(
                f"the request body is {int(declared):,} bytes; the limit is "
                f"{settings.max_request_bytes:,}",
                limit=settings.max_request_bytes,
            )
        reports = delivery_reports(
            request.stream(),
            submitter(links.cluster_id, topic),
            max_record_bytes=settings.max_request_bytes,
        )
        if streaming:
            return ReportStream(reports)
        first = await anext(reports, None)
        if first is None:
            raise InvalidRequestError(
                "Payload error. Request body is empty. Data is required.", kind="empty_payload"
            )
        second = await anext(reports, None)
        if second is None:
            return JSONResponse(first, status_code=report_status(first))
        return ReportStream(_chained(first, second, reports))

    return router
