"""The native share-group record API (``/api/v1/share-groups/{group}/…``): queues (KIP-932).

``POST …/acquire`` long-polls records the member then holds under a lock; ``POST
…/acknowledgements`` accepts, releases, rejects or renews them (bodies:
``yak.api.share_records``). Streams: Server-Sent Events (``GET …/stream?topic=…``: a ``member``
event naming the member id, then one ``records`` event per non-empty acquire and a comment per
idle one; acknowledgements go through the POST) and a WebSocket (``…/ws?topic=…``: records out,
acknowledgements in, on one socket; pull-based like the group WebSocket: ``{"type":
"acquire"}`` answers one ``records`` message, ``{"type": "acknowledge", "acknowledgements":
[...]}`` one ``acknowledged``). Keys, values and headers are rendered like the native poll's.

An acquire (POST or WebSocket message) may carry ``acknowledgements``, the entries of the
acknowledgements route: they are applied before it acquires, at the leaders, inside the
acquire's ShareFetches, and its answer lists ``acknowledgement_results`` (one per entry, in
order) beside the records; refused entries never fail the acquire.

An acknowledgement request answers 200 with one result per entry, unless every entry failed:
then the first entry's error is the answer (409 ``INVALID_RECORD_STATE`` for records the member
does not hold), its ``details.results`` the entries' results. Acquires answer 429 over the
principal's fetch quota; streams wait for it instead. Handlers only parse, call
``ShareConsumers`` and render.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request, Response, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from yak.api.records import API_PREFIX, Encoding, HeaderEncoding
from yak.api.share_records import (
    AckEntry,
    AcknowledgeRequest,
    AcknowledgeResponse,
    AcquireMode,
    AcquireRequest,
    AcquireResponse,
)
from yak.errors import InvalidRequestError, YakError
from yak.protocol.kafka_share import AckType
from yak_rest_proxy.api.native.render import partition_renderer
from yak_rest_proxy.consume.share.acknowledgements import AckRange
from yak_rest_proxy.consume.share.share_consumer import Acquisition, ShareConsumers
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.quotas.quotas import QuotaKind
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["acknowledgement_results", "acquire_body", "share_router"]

SHARE_TAG = "share groups"
_JSON = "application/json"
_BODY_LIMIT = 4 * 1024 * 1024
_STREAM_WAIT_MS = 5_000
_ACK_TYPES = {
    "accept": AckType.ACCEPT,
    "release": AckType.RELEASE,
    "reject": AckType.REJECT,
    "renew": AckType.RENEW,
}


def acquire_body(
    got: Acquisition,
    key: Encoding,
    value: Encoding,
    header: HeaderEncoding,
    acknowledgements: Sequence[AckEntry] = (),
) -> dict[str, Any]:
    """``AcquireResponse``'s JSON, records rendered as dicts (no model per record)."""
    render = partition_renderer(key, value, header)
    records: list[dict[str, Any]] = []
    for part in got.partitions:
        rendered = render(part.topic, part.partition, part.records)
        for body, count in zip(rendered, part.delivery_counts, strict=True):
            body["delivery_count"] = count
        records += rendered
    errors = [
        {"topic": t, "partition": p, "code": e.code, "message": e.message} for t, p, e in got.errors
    ]
    answer: dict[str, Any] = {
        "member_id": got.member_id,
        "lock_timeout_ms": got.lock_timeout_ms,
        "records": records,
        "errors": errors,
    }
    if acknowledgements:
        answer["acknowledgement_results"] = _results(acknowledgements, got.ack_results)
    return answer


def _entries(acknowledgements: Sequence[AckEntry]) -> list[AckRange]:
    return [
        AckRange(e.topic, e.partition, e.first, e.last, _ACK_TYPES[e.type.value])
        for e in acknowledgements
    ]


def acknowledgement_results(
    body: AcknowledgeRequest, errors: Sequence[YakError | None]
) -> dict[str, Any]:
    """``AcknowledgeResponse``'s JSON; raises the first error when every entry failed."""
    results = _results(body.acknowledgements, errors)
    if all(error is not None for error in errors):
        first = errors[0]
        assert first is not None
        first.details = {**first.details, "results": results}
        raise first
    return {"results": results}


def _results(
    entries: Sequence[AckEntry], errors: Sequence[YakError | None]
) -> list[dict[str, Any]]:
    return [
        {
            "topic": e.topic,
            "partition": e.partition,
            "first_offset": e.first,
            "last_offset": e.last,
            "type": e.type.value,
            "error": None if error is None else {"code": error.code, "message": error.message},
        }
        for e, error in zip(entries, errors, strict=True)
    ]


async def _acquire(
    shares: ShareConsumers, group: str, member: str, body: AcquireRequest, max_wait_ms: int
) -> dict[str, Any]:
    got = await shares.acquire(
        group,
        member,
        body.topics,
        max_records=body.max_records,
        timeout_ms=min(body.timeout_ms, max_wait_ms),
        filter=body.filter,
        acknowledgements=_entries(body.acknowledgements),
        whole_batches=body.acquire_mode == AcquireMode.BATCH_OPTIMIZED,
    )
    return acquire_body(
        got, body.key_encoding, body.value_encoding, body.header_encoding, body.acknowledgements
    )


def share_router(runtime: ProxyRuntime, shares: ShareConsumers) -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/share-groups/{{group}}", tags=[SHARE_TAG])
    max_wait_ms = runtime.settings.consumer_request_max_timeout_ms
    quotas = runtime.quotas

    @router.post(
        "/acquire",
        response_model=AcquireResponse,
        openapi_extra=openapi_body(AcquireRequest, _JSON),
    )
    async def acquire(request: Request, group: str) -> Response:
        """Records of ``topics`` the member now holds under a lock (a long poll)."""
        body = parse_model(AcquireRequest, await read_body(request, _BODY_LIMIT))
        principal = quotas.admit(QuotaKind.FETCH)
        member = body.member_id or shares.new_member_id()
        answer = orjson.dumps(await _acquire(shares, group, member, body, max_wait_ms))
        quotas.charge(QuotaKind.FETCH, principal, len(answer))
        return Response(answer, media_type=_JSON)

    @router.post(
        "/acknowledgements",
        response_model=AcknowledgeResponse,
        responses={409: {"description": "every entry failed (e.g. INVALID_RECORD_STATE)"}},
        openapi_extra=openapi_body(AcknowledgeRequest, _JSON),
    )
    async def acknowledge(request: Request, group: str) -> Response:
        """Accept, release, reject or renew records the member holds; a result per entry."""
        body = parse_model(AcknowledgeRequest, await read_body(request, _BODY_LIMIT))
        errors = await shares.acknowledge(group, body.member_id, _entries(body.acknowledgements))
        return json_response(acknowledgement_results(body, errors), _JSON)

    @router.get("/stream", response_class=StreamingResponse)
    async def stream(
        group: str,
        topic: Annotated[list[str], Query(description="A topic to read (repeatable).")],
        member_id: str | None = None,
        filter: str | None = None,
        max_records: Annotated[int, Query(ge=1, le=10_000)] = 500,
        key_encoding: Encoding = Encoding.STRING,
        value_encoding: Encoding = Encoding.JSON,
        header_encoding: HeaderEncoding = HeaderEncoding.STRING,
    ) -> StreamingResponse:
        """Server-Sent Events: ``member``, then ``records`` per acquire; ``error`` then end."""
        member = member_id or shares.new_member_id()
        await shares.validate(group, member, topic, filter)  # 4xx before the stream starts
        body = AcquireRequest(
            topics=topic,
            member_id=member,
            max_records=max_records,
            timeout_ms=_STREAM_WAIT_MS,
            filter=filter,
            key_encoding=key_encoding,
            value_encoding=value_encoding,
            header_encoding=header_encoding,
        )
        principal = quotas.principal()

        async def events() -> AsyncIterator[bytes]:
            yield b"event: member\ndata: " + orjson.dumps({"member_id": member}) + b"\n\n"
            while True:
                await quotas.throttle(QuotaKind.FETCH, principal)
                try:
                    answer = await _acquire(shares, group, member, body, max_wait_ms)
                except YakError as exc:
                    yield b"event: error\ndata: " + orjson.dumps(exc.to_dict()) + b"\n\n"
                    return
                if not answer["records"]:
                    yield b": idle\n\n"
                    continue
                event = b"event: records\ndata: " + orjson.dumps(answer) + b"\n\n"
                quotas.charge(QuotaKind.FETCH, principal, len(event))
                yield event

        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @router.websocket("/ws")
    async def websocket(
        socket: WebSocket,
        group: str,
        topic: Annotated[list[str], Query()],
        member_id: str | None = None,
        filter: str | None = None,
        key_encoding: Encoding = Encoding.STRING,
        value_encoding: Encoding = Encoding.JSON,
        header_encoding: HeaderEncoding = HeaderEncoding.STRING,
    ) -> None:
        """``{"type": "acquire", "max_records"?, "timeout_ms"?, "acknowledgements"?}`` answers
        ``{"type": "records", ...}``; ``{"type": "acknowledge", "acknowledgements": [...]}``
        answers ``{"type": "acknowledged", "results": [...]}``; failures ``{"type": "error",
        ...}``."""
        await socket.accept()
        member = member_id or shares.new_member_id()
        base = {
            "topics": topic,
            "member_id": member,
            "filter": filter,
            "key_encoding": key_encoding,
            "value_encoding": value_encoding,
            "header_encoding": header_encoding,
        }
        principal = quotas.principal()
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message: Any = await socket.receive_json()
                try:
                    reply = await _ws_reply(shares, group, member, base, message, max_wait_ms)
                except YakError as exc:
                    reply = {"type": "error", **exc.to_dict()}
                text = orjson.dumps(reply).decode()
                if reply["type"] == "records":
                    quotas.charge(QuotaKind.FETCH, principal, len(text))
                await socket.send_text(text)

    return router


async def _ws_reply(
    shares: ShareConsumers,
    group: str,
    member: str,
    base: dict[str, Any],
    message: Any,
    max_wait_ms: int,
) -> dict[str, Any]:
    kind = message.get("type") if isinstance(message, dict) else None
    fields = {k: v for k, v in message.items() if k != "type"} if kind else {}
    try:
        if kind == "acquire":
            body = AcquireRequest.model_validate({**base, **fields})
            return {"type": "records", **await _acquire(shares, group, member, body, max_wait_ms)}
        if kind == "acknowledge":
            acks = AcknowledgeRequest.model_validate({"member_id": member, **fields})
            errors = await shares.acknowledge(group, member, _entries(acks.acknowledgements))
            return {"type": "acknowledged", **acknowledgement_results(acks, errors)}
    except ValidationError as exc:
        raise InvalidRequestError(f"invalid {kind} message: {exc.errors()[0]['msg']}") from None
    raise InvalidRequestError(f"unknown message type {kind!r}: use acquire or acknowledge")
