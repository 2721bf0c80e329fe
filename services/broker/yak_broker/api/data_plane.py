"""The binary data plane: ``POST /v1/produce`` and ``POST /v1/fetch`` as plain Starlette routes.

No FastAPI dependency solving or pydantic on this path: each route reads the raw body (bounded
by ``max_request_bytes``: a larger body gets 413 ``MESSAGE_TOO_LARGE`` before it is read),
decodes it with ``yak.protocol.broker_wire``, calls one domain function and writes the bytes
back. A malformed request raises ``InvalidRequestError`` (400), mapped by the app's one error
table (``yak.web.errors``) — nothing was appended.

Status codes: 200 with per-partition results when at least one partition succeeded; when every
partition failed, the status of the first partition's error (e.g. 400 ``CORRUPT_MESSAGE``,
404 ``UNKNOWN_TOPIC_OR_PARTITION``, 421 ``NOT_LEADER_OR_FOLLOWER``) with the same body, so
simple clients can look at the status alone. ``acks=0`` produces answer ``204 No Content``
after the append, with no body: like Kafka, the producer learns nothing (errors are logged).

Metrics (``metrics.BrokerTopicStats``): each request counts once by kind (produce, consumer
fetch, follower fetch); a fetch adds each partition's returned bytes (and, for consumers, the
records its batch headers count) to the topic's bytes-out or replication bytes-out counter.
The HTTP transport's own produce stages are timed here: ``receive`` (from the route's start:
the body read and decoded) and ``answer`` (the response encoded); the domain functions time
the rest (``append_partitions``; ``delayed_fetch`` with this transport's ``FetchStages``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from yak.errors import NetworkError
from yak.protocol.broker_wire import (
    FRAME_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    PartitionError,
    ProduceResult,
    decode_fetch_request,
    decode_produce_request,
    encode_fetch_response,
    encode_produce_response,
)
from yak.web.body import read_body
from yak_broker.server.appender import append_partitions
from yak_broker.server.broker import Broker
from yak_broker.server.fetcher import serve_fetch

__all__ = ["data_plane_routes"]

_log = logging.getLogger(__name__)


def _status(errors: Sequence[PartitionError | None]) -> int:
    """200 unless every partition failed: then the first error's status."""
    if errors and all(error is not None for error in errors):
        first = errors[0]
        assert first is not None
        return first.exception().http_status
    return 200


def data_plane_routes(broker: Broker) -> list[Route]:
    """The produce and fetch routes of ``broker``."""
    settings = broker.settings
    stats = broker.replicas.stats

    async def produce(request: Request) -> Response:
        stats.produce_requests.inc()
        started = time.perf_counter()
        body = await read_body(request, settings.max_request_bytes, on_disconnect=NetworkError)
        produce_request = decode_produce_request(body)
        stats.produce_receive.observe(time.perf_counter() - started)
        results = await append_partitions(produce_request, broker.replicas)
        if produce_request.acks == 0:
            _log_dropped(results)
            return Response(status_code=204)
        answering = time.perf_counter()
        response = Response(
            encode_produce_response(results),
            status_code=_status([r.error for r in results]),
            media_type=JSON_CONTENT_TYPE,
        )
        stats.produce_answer.observe(time.perf_counter() - answering)
        return response

    async def fetch(request: Request) -> Response:
        body = await read_body(request, settings.max_request_bytes, on_disconnect=NetworkError)
        partitions = await serve_fetch(
            decode_fetch_request(body),
            broker.replicas,
            max_wait_limit_ms=settings.max_wait_ms_limit,
        )
        return Response(
            encode_fetch_response(partitions),
            status_code=_status([p.error for p in partitions]),
            media_type=FRAME_CONTENT_TYPE,
        )

    return [
        Route("/v1/produce", produce, methods=["POST"], name="produce"),
        Route("/v1/fetch", fetch, methods=["POST"], name="fetch"),
    ]


def _log_dropped(results: Sequence[ProduceResult]) -> None:
    for result in results:
        if result.error is not None:
            _log.info(
                "acks=0 produce to %s-%d failed: %s %s",
                result.topic,
                result.partition,
                result.error.code,
                result.error.message,
            )
