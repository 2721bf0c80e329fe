"""The native consumer-group API (``/api/v1/groups/{group}/members``).

Members join with a subscription and get partitions from the coordinator; every answer carries
the member's epoch and assignment. Consumption is a long-polling ``GET .../records``, or a
stream: Server-Sent Events (``GET .../stream``, one ``records`` event per non-empty poll and a
comment every idle poll) or a WebSocket (``.../ws``, pull-based: the server sends one batch per
``{"type": "poll"}`` message, so a slow client is never flooded; ``{"type": "commit", ...}``
commits). Backpressure on SSE comes from the connection: the next poll runs only once the
previous event was written to the socket. Commits are explicit unless the member joined with
``auto_commit``; offsets are the next ones to read; an old ``member_epoch`` is fenced. Polls
answer 429 over the principal's fetch quota; streams wait for it instead (``Quotas.throttle``)
and are charged each event's bytes.

A poll whose ``Accept`` names ``application/vnd.yak.fetch.v1`` (``FETCH_MEDIA_TYPE``) is
answered in binary (``yak.api.fetch_answer``): the fetched record batches as the brokers
stored them, no record decoded or rendered here; the encodings do not apply. An ``Accept``
naming only other ``application/vnd.yak.fetch.*`` versions is 406 ``NOT_ACCEPTABLE``; any other
(or none) gets the JSON answer, so a client listing both (``application/vnd.yak.fetch.v1,
application/json;q=0.5``) is served by proxies with and without the binary form.

``filter=`` (docs/filters.md) on the poll, the SSE stream and the WebSocket hands out only the
records it lets through; the member's position moves past every record scanned, so dropped
records count as consumed (commits cover them) and a poll that scanned only dropped records
answers no records with its position advanced (a long poll keeps scanning until a record
matches or its time is up). A filtered poll is answered in JSON even when ``Accept`` asks for
the binary form, which carries the brokers' batches unchanged and so cannot leave records out.
A bad filter is 400 ``INVALID_FILTER`` / ``FILTER_TOO_LARGE`` before the member is touched; on
the WebSocket it is the first message (``{"type": "error", ...}``) and the socket closes.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request, Response, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from yak.api.fetch_answer import encode_fetch_answer
from yak.api.groups import (
    CommitRequest,
    GroupMemberInfo,
    JoinGroupRequest,
    PollResponse,
    SeekRequest,
    TopicPartitionList,
)
from yak.api.records import API_PREFIX, FETCH_MEDIA_TYPE, Encoding, HeaderEncoding
from yak.errors import InvalidRequestError, NotAcceptableError, YakError
from yak.filters import RecordFilter
from yak.metadata.keyspace import validate_member_id
from yak.metadata.models import GroupMember
from yak.names import validate_group_id
from yak.types import TopicPartition
from yak_rest_proxy.api.native.render import partition_renderer
from yak_rest_proxy.consume.consumer import Consumers, Poll, new_instance_id
from yak_rest_proxy.consume.membership.member_state import Member
from yak_rest_proxy.consume.reader import FILTER_DOC, filter_param
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.quotas.quotas import QuotaKind, Quotas
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["MAX_POLL_BYTES", "Encodings", "group_router", "poll_records", "wants_batches"]

GROUP_TAG = "native consumer groups"
_JSON = "application/json"
_BODY_LIMIT = 1024 * 1024
_STREAM_POLL_MS = 5_000
#: The WebSocket close code for a refused request (RFC 6455 §7.4.1).
_POLICY_VIOLATION = 1008
#: The largest ``max_bytes`` a poll may ask for.
MAX_POLL_BYTES = 64 * 1024 * 1024
_FETCH_FAMILY = FETCH_MEDIA_TYPE.rsplit(".", 1)[0] + "."
_BINARY_POLL_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {
            # Asked for with ``Accept``; the body: docs/rest-api.md, "Binary poll".
            FETCH_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}
        }
    },
    406: {"description": "Accept names only fetch versions this proxy does not serve"},
}


def _assignment(member: Member) -> list[TopicPartitionList]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(member.owned):
        by_topic.setdefault(topic, []).append(partition)
    return [TopicPartitionList(topic=t, partitions=ps) for t, ps in by_topic.items()]


class Encodings:
    """The encodings a poll renders keys, values and headers in."""

    def __init__(self, key: Encoding, value: Encoding, header: HeaderEncoding) -> None:
        self.key, self.value, self.header = key, value, header

    def poll_body(self, poll: Poll) -> dict[str, Any]:
        """``PollResponse``'s JSON, records rendered as dicts (no model per record)."""
        render = partition_renderer(self.key, self.value, self.header)
        records: list[dict[str, Any]] = []
        for topic, partition, polled in poll.partitions:
            records += render(topic, partition, polled)
        return {
            "member_epoch": poll.member.epoch,
            "assignment": [a.model_dump(mode="json") for a in _assignment(poll.member)],
            "records": records,
        }


@functools.lru_cache(maxsize=64)
def wants_batches(accept: str | None) -> bool:
    """Whether a poll's ``Accept`` header asks for the binary answer (see the module
    docstring); ``NotAcceptableError`` if it lists only fetch versions not served here."""
    if not accept:
        return False
    other_fetch = anything_else = False
    for item in accept.split(","):
        media, *params = item.split(";")
        media = media.strip().lower()
        if not media or _quality(params) <= 0:
            continue
        if media == FETCH_MEDIA_TYPE:
            return True
        if media.startswith(_FETCH_FAMILY):
            other_fetch = True
        else:
            anything_else = True
    if other_fetch and not anything_else:
        raise NotAcceptableError(
            f"Accept {accept!r}: this proxy answers a poll as {FETCH_MEDIA_TYPE} "
            "or application/json",
            accepted=[FETCH_MEDIA_TYPE, _JSON],
        )
    return False


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def _member_info(group: str, member: Member) -> GroupMemberInfo:
    return GroupMemberInfo(
        group_id=group,
        member_id=member.member_id,
        member_epoch=member.epoch,
        assignment=_assignment(member),
    )


def _paused(values: list[str]) -> frozenset[TopicPartition]:
    found = set()
    for value in values:
        topic, _, partition = value.rpartition(":")
        if not topic or not partition.isdigit():
            raise InvalidRequestError(f"paused={value!r}: use topic:partition")
        found.add(TopicPartition(topic, int(partition)))
    return frozenset(found)


async def poll_records(
    runtime: ProxyRuntime,
    consumers: Consumers,
    group: str,
    member: str,
    *,
    timeout_ms: int,
    max_bytes: int,
    encodings: Encodings,
    paused: frozenset[TopicPartition] = frozenset(),
    batches: bool = False,
    record_filter: RecordFilter | None = None,
) -> Response:
    """The poll route's work, shared with the fast lane (``native/fast_lane.py``);
    ``batches``: the binary answer unless filtered (see the module docstring)."""
    wait = min(timeout_ms, runtime.settings.consumer_request_max_timeout_ms)
    principal = runtime.quotas.admit(QuotaKind.FETCH)
    batches = batches and record_filter is None
    polled = await consumers.poll(
        group,
        member,
        timeout_ms=wait,
        max_bytes=max_bytes,
        paused=paused,
        raw=batches,
        record_filter=record_filter,
    )
    rendering = time.perf_counter()
    if batches:
        assignment = [(a.topic, a.partitions) for a in _assignment(polled.member)]
        parts = encode_fetch_answer(polled.member.epoch, assignment, polled.batches)
        body = b"".join(parts)
        media_type = FETCH_MEDIA_TYPE
    else:
        body = orjson.dumps(encodings.poll_body(polled))
        media_type = _JSON
    runtime.stats.poll.render.observe(time.perf_counter() - rendering)
    runtime.quotas.charge(QuotaKind.FETCH, principal, len(body))
    return Response(body, media_type=media_type)


def group_router(runtime: ProxyRuntime, consumers: Consumers) -> APIRouter:
    router = APIRouter(prefix=f"{API_PREFIX}/groups/{{group}}/members", tags=[GROUP_TAG])
    settings = runtime.settings
    member_path = "/{member}"

    @router.post(
        "",
        status_code=201,
        response_model=GroupMemberInfo,
        openapi_extra=openapi_body(JoinGroupRequest, _JSON),
    )
    async def join(request: Request, group: str) -> Response:
        """Join ``group`` with a subscription; partitions come from the coordinator."""
        validate_group_id(group)
        body = parse_model(JoinGroupRequest, await read_body(request, _BODY_LIMIT))
        await consumers.validate_subscription(body.topics, body.topic_pattern)
        member_id = body.member_id or new_instance_id(settings.node_id)
        try:
            validate_member_id(member_id)
        except ValueError:
            raise InvalidRequestError(
                f"member_id {member_id!r} is not valid: use 1-249 of [a-zA-Z0-9._-]"
            ) from None
        record = GroupMember(
            member_id=member_id,
            joined_at_ms=consumers.now_ms(),
            subscription=tuple(dict.fromkeys(body.topics)),
            subscription_pattern=body.topic_pattern,
            assignor=body.assignor,
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            auto_offset_reset=body.auto_offset_reset,
            auto_commit=body.auto_commit,
            client_host=request.client.host if request.client else "",
        )
        await consumers.create(group, record, body.session_timeout_ms)
        info = GroupMemberInfo(group_id=group, member_id=member_id, member_epoch=0, assignment=[])
        return json_response(info, _JSON, 201)

    @router.get(member_path, response_model=GroupMemberInfo)
    async def describe(group: str, member: str) -> Response:
        """The member's epoch and current assignment."""
        return json_response(_member_info(group, await consumers.instance(group, member)), _JSON)

    @router.delete(member_path, status_code=204)
    async def leave(group: str, member: str) -> Response:
        """Leave the group now (auto-committing first if the member auto-commits)."""
        await consumers.delete(group, member)
        return Response(status_code=204)

    @router.get(member_path + "/records", response_model=PollResponse, responses=_BINARY_POLL_DOC)
    async def poll(
        request: Request,
        group: str,
        member: str,
        timeout_ms: Annotated[int, Query(ge=0)] = 1_000,
        max_bytes: Annotated[int, Query(ge=1, le=MAX_POLL_BYTES)] = 1024 * 1024,
        key_encoding: Encoding = Encoding.STRING,
        value_encoding: Encoding = Encoding.JSON,
        header_encoding: HeaderEncoding = HeaderEncoding.STRING,
        paused: Annotated[
            list[str] | None,
            Query(description="Partitions not to read now, as topic:partition (repeatable)."),
        ] = None,
        filter_text: Annotated[str | None, Query(alias="filter", description=FILTER_DOC)] = None,
    ) -> Response:
        """Records from the member's partitions, as soon as there are any (or at the timeout);
        with ``Accept: application/vnd.yak.fetch.v1``, their record batches in binary."""
        record_filter = filter_param(filter_text)
        binary = wants_batches(request.headers.get("accept"))
        return await poll_records(
            runtime,
            consumers,
            group,
            member,
            timeout_ms=timeout_ms,
            max_bytes=max_bytes,
            encodings=Encodings(key_encoding, value_encoding, header_encoding),
            paused=_paused(paused or []),
            batches=binary,
            record_filter=record_filter,
        )

    @router.post(
        member_path + "/commit",
        response_model=GroupMemberInfo,
        openapi_extra=openapi_body(CommitRequest, _JSON, required=False),
    )
    async def commit(request: Request, group: str, member: str) -> Response:
        """Commit next offsets (or every polled position); fenced by ownership and epoch."""
        raw = await read_body(request, _BODY_LIMIT)
        body = parse_model(CommitRequest, raw, empty_ok=True)
        offsets = None
        if body.offsets is not None:
            offsets = {TopicPartition(o.topic, o.partition): o.offset for o in body.offsets}
        state = await consumers.commit(
            group, member, offsets, last_processed=False, member_epoch=body.member_epoch
        )
        return json_response(_member_info(group, state), _JSON)

    @router.post(
        member_path + "/seek", status_code=204, openapi_extra=openapi_body(SeekRequest, _JSON)
    )
    async def seek(request: Request, group: str, member: str) -> Response:
        """Move positions: to an offset, the earliest or latest, or a timestamp."""
        body = parse_model(SeekRequest, await read_body(request, _BODY_LIMIT))
        for index, entry in enumerate(body.partitions):
            given = [entry.offset is not None, entry.to is not None, entry.timestamp is not None]
            if sum(given) != 1:
                raise InvalidRequestError(
                    f"partitions[{index}]: give exactly one of offset, to, timestamp",
                    kind="invalid_data",
                )
            tp = TopicPartition(entry.topic, entry.partition)
            if entry.offset is not None:
                await consumers.seek(group, member, {tp: entry.offset})
            else:
                target = entry.to if entry.to is not None else entry.timestamp
                assert target is not None
                await consumers.seek_to(group, member, [tp], target)
        return Response(status_code=204)

    @router.get(member_path + "/stream", response_class=StreamingResponse)
    async def stream(
        group: str,
        member: str,
        max_bytes: Annotated[int, Query(ge=1, le=MAX_POLL_BYTES)] = 1024 * 1024,
        key_encoding: Encoding = Encoding.STRING,
        value_encoding: Encoding = Encoding.JSON,
        header_encoding: HeaderEncoding = HeaderEncoding.STRING,
        filter_text: Annotated[str | None, Query(alias="filter", description=FILTER_DOC)] = None,
    ) -> StreamingResponse:
        """Server-Sent Events: one ``records`` event per batch; ``error`` then end on failure."""
        record_filter = filter_param(filter_text)  # 400 before the stream starts
        await consumers.instance(group, member)  # 404 before the stream starts
        encodings = Encodings(key_encoding, value_encoding, header_encoding)
        quotas = runtime.quotas
        principal = quotas.principal()

        async def events() -> AsyncIterator[bytes]:
            while True:
                await quotas.throttle(QuotaKind.FETCH, principal)
                try:
                    polled = await consumers.poll(
                        group,
                        member,
                        timeout_ms=_STREAM_POLL_MS,
                        max_bytes=max_bytes,
                        record_filter=record_filter,
                    )
                except YakError as exc:
                    yield b"event: error\ndata: " + orjson.dumps(exc.to_dict()) + b"\n\n"
                    return
                if not polled.partitions:
                    yield b": idle\n\n"
                    continue
                body = encodings.poll_body(polled)
                event = b"event: records\ndata: " + orjson.dumps(body) + b"\n\n"
                quotas.charge(QuotaKind.FETCH, principal, len(event))
                yield event

        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @router.websocket(member_path + "/ws")
    async def websocket(
        socket: WebSocket,
        group: str,
        member: str,
        key_encoding: Encoding = Encoding.STRING,
        value_encoding: Encoding = Encoding.JSON,
        header_encoding: HeaderEncoding = HeaderEncoding.STRING,
        filter_text: Annotated[str | None, Query(alias="filter", description=FILTER_DOC)] = None,
    ) -> None:
        """Pull-based stream: ``{"type": "poll", "timeout_ms"?, "max_bytes"?}`` answers one
        ``{"type": "records", ...}``; ``{"type": "commit", "offsets"?: [...]}`` answers
        ``{"type": "committed"}``; failures answer ``{"type": "error", "code", "message"}``.
        A bad ``filter`` is answered so at once, and the socket closed (1008)."""
        await socket.accept()
        try:
            record_filter = filter_param(filter_text)
        except YakError as exc:
            await socket.send_text(orjson.dumps({"type": "error", **exc.to_dict()}).decode())
            await socket.close(code=_POLICY_VIOLATION)
            return
        encodings = Encodings(key_encoding, value_encoding, header_encoding)
        fetch = _Fetch(runtime.quotas, runtime.quotas.principal(), record_filter)
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message: Any = await socket.receive_json()
                try:
                    reply = await _ws_reply(
                        consumers,
                        group,
                        member,
                        message,
                        encodings,
                        settings.consumer_request_max_timeout_ms,
                        fetch,
                    )
                except YakError as exc:
                    reply = {"type": "error", **exc.to_dict()}
                text = orjson.dumps(reply).decode()
                if reply["type"] == "records":
                    fetch.charge(len(text))
                await socket.send_text(text)

    return router


class _Fetch:
    """A stream's fetch: the principal its quota is charged to, the quotas, its filter."""

    def __init__(
        self, quotas: Quotas, principal: str, record_filter: RecordFilter | None = None
    ) -> None:
        self._quotas, self._principal = quotas, principal
        self.record_filter = record_filter

    async def throttle(self) -> None:
        await self._quotas.throttle(QuotaKind.FETCH, self._principal)

    def charge(self, size: int) -> None:
        self._quotas.charge(QuotaKind.FETCH, self._principal, size)


async def _ws_reply(
    consumers: Consumers,
    group: str,
    member: str,
    message: Any,
    encodings: Encodings,
    max_timeout_ms: int,
    fetch: _Fetch,
) -> dict[str, Any]:
    kind = message.get("type") if isinstance(message, dict) else None
    if kind == "poll":
        await fetch.throttle()
        timeout = min(int(message.get("timeout_ms", 1_000)), max_timeout_ms)
        max_bytes = int(message.get("max_bytes", 1024 * 1024))
        polled = await consumers.poll(
            group,
            member,
            timeout_ms=max(0, timeout),
            max_bytes=max(1, max_bytes),
            record_filter=fetch.record_filter,
        )
        return {"type": "records", **encodings.poll_body(polled)}
    if kind == "commit":
        fields = {k: v for k, v in message.items() if k != "type"}
        try:
            body = CommitRequest.model_validate(fields)
        except ValidationError as exc:
            raise InvalidRequestError(f"invalid commit message: {exc.errors()[0]['msg']}") from None
        offsets = None
        if body.offsets is not None:
            offsets = {TopicPartition(o.topic, o.partition): o.offset for o in body.offsets}
        state = await consumers.commit(
            group, member, offsets, last_processed=False, member_epoch=body.member_epoch
        )
        return {"type": "committed", "member_epoch": state.epoch}
    raise InvalidRequestError(f"unknown message type {kind!r}: use poll or commit")
