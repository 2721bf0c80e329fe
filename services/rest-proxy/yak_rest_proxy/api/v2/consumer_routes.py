"""Confluent v2 consumers: ``/consumers/{group}`` and ``/consumers/{group}/instances/{id}/...``.

Thin handlers over ``consumers.Consumers``: the instance lives in etcd, so a client may send
each request to any proxy. Where Yak differs from Confluent (records returned as soon as there
are any, a longer wait cap, timestamps and headers in records, Yak's extra create fields, the
``filter`` parameter of ``GET .../records``: a Yak extension, docs/filters.md) is listed in
``docs/rest-api.md``.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request, Response

from yak.errors import InvalidConfigError, InvalidRequestError
from yak.metadata.keyspace import validate_member_id
from yak.metadata.models import GroupMember
from yak.names import validate_group_id
from yak.record import Headers
from yak.types import TopicPartition
from yak_rest_proxy.api.v2.embedded import to_embedded
from yak_rest_proxy.api.v2.metadata_routes import V2_TAG
from yak_rest_proxy.api.v2.models import (
    AUTO_OFFSET_RESETS,
    FETCH_MIN_BYTES,
    INSTANCE_TIMEOUT_MS,
    V2CommitRequest,
    V2CommittedOffsets,
    V2ConsumerRecord,
    V2CreateConsumer,
    V2CreatedConsumer,
    V2Partitions,
    V2Positions,
    V2Subscription,
)
from yak_rest_proxy.api.v2.schema_consume import schema_records_body
from yak_rest_proxy.consume.consumer import Consumers, PolledPartition, new_instance_id
from yak_rest_proxy.consume.reader import FILTER_DOC, filter_param
from yak_rest_proxy.http.body import openapi_body, parse_model, read_body
from yak_rest_proxy.http.content import EmbeddedFormat, negotiate, request_format
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.quotas.quotas import QuotaKind
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.settings import ProxySettings

__all__ = ["consumer_router"]

_V2_TYPES = ("application/vnd.kafka.v2+json", "application/json")
_BODY_LIMIT = 1024 * 1024
_FORMATS = frozenset(f.value for f in EmbeddedFormat)


def _int(value: int | str | None, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise InvalidConfigError(f"{name} must be an integer, not {value!r}") from None
    if not low <= number <= high:
        raise InvalidRequestError(
            f"{name} must be between {low} and {high}, not {number}", kind="config_constraint"
        )
    return number


def member_record(body: V2CreateConsumer, settings: ProxySettings, now_ms: int) -> GroupMember:
    """The instance record a create-consumer body asks for (validated)."""
    for given in (body.id, body.name):  # both checked, though id wins
        if given:
            try:
                validate_member_id(given)
            except ValueError:
                raise InvalidConfigError(
                    f"consumer name {given!r} is not valid: use 1-249 of [a-zA-Z0-9._-]"
                ) from None
    name = body.id or body.name or new_instance_id(settings.node_id)
    if body.format not in _FORMATS:
        raise InvalidConfigError(
            f"format {body.format!r} is not supported; use binary, json, avro, jsonschema "
            "or protobuf"
        )
    if body.format not in ("binary", "json") and not settings.schema_registry_url:
        raise InvalidConfigError(
            f"format {body.format!r} needs a schema registry; this proxy has none configured "
            "(YAK_SCHEMA_REGISTRY_URL)"
        )
    reset = AUTO_OFFSET_RESETS.get((body.auto_offset_reset or "latest").lower())
    if reset is None:
        raise InvalidConfigError(
            f"auto.offset.reset {body.auto_offset_reset!r} is not one of earliest, latest, none"
        )
    commit = body.auto_commit_enable
    if isinstance(commit, str):
        if commit.lower() not in ("true", "false"):
            raise InvalidConfigError(f"auto.commit.enable must be true or false, not {commit!r}")
        commit = commit.lower() == "true"
    assignor = body.partition_assignment_strategy or "uniform"
    if assignor not in ("uniform", "range"):
        raise InvalidConfigError(
            f"partition.assignment.strategy {assignor!r}: use uniform or range"
        )
    instance_timeout = _int(
        body.consumer_instance_timeout_ms,
        "consumer.instance.timeout.ms",
        settings.consumer_instance_timeout_ms,
        *INSTANCE_TIMEOUT_MS,
    )
    return GroupMember(
        member_id=name,
        joined_at_ms=now_ms,
        format=body.format,
        auto_offset_reset=reset,
        auto_commit=True if commit is None else commit,
        fetch_min_bytes=_int(body.fetch_min_bytes, "fetch.min.bytes", -1, *FETCH_MIN_BYTES),
        request_timeout_ms=_int(
            body.consumer_request_timeout_ms,
            "consumer.request.timeout.ms",
            settings.consumer_request_timeout_ms,
            0,
            settings.consumer_request_max_timeout_ms,
        ),
        session_timeout_ms=instance_timeout,
        assignor=assignor,
    )


def _headers(headers: Headers) -> list[dict[str, str | None]]:
    return [
        {"key": k, "value": None if v is None else to_embedded(v, EmbeddedFormat.BINARY)}
        for k, v in headers
    ]


def _records_body(polled: list[PolledPartition], fmt: EmbeddedFormat) -> bytes:
    return orjson.dumps(
        [
            {
                "topic": topic,
                "key": to_embedded(r.key, fmt),
                "value": to_embedded(r.value, fmt),
                "partition": partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "headers": _headers(r.headers) if r.headers else [],
            }
            for topic, partition, records in polled
            for r in records
        ]
    )


def _timestamp_ms(text: str, where: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(
            f"{where}: {text!r} is not an ISO-8601 timestamp", kind="invalid_data"
        ) from None
    if moment.tzinfo is None:
        raise InvalidRequestError(f"{where}: {text!r} has no time zone", kind="invalid_data")
    return int(moment.timestamp() * 1000)


def consumer_router(runtime: ProxyRuntime, consumers: Consumers) -> APIRouter:
    router = APIRouter(prefix="/consumers/{group}", tags=[V2_TAG])
    settings = runtime.settings
    instance = "/instances/{instance}"

    async def body_of(request: Request) -> bytes:
        request_format(request.headers.get("content-type"))  # 415 for a type we do not take
        return await read_body(request, _BODY_LIMIT)

    def accept(request: Request) -> str:
        return negotiate(request.headers.get("accept"))

    @router.post(
        "",
        response_model=V2CreatedConsumer,
        openapi_extra=openapi_body(V2CreateConsumer, *_V2_TYPES, required=False),
    )
    async def create(request: Request, group: str) -> Response:
        """Create a consumer instance in ``group`` (it lives in etcd: any proxy serves it)."""
        media = accept(request)
        validate_group_id(group)
        body = parse_model(V2CreateConsumer, await body_of(request), empty_ok=True)
        record = member_record(body, settings, consumers.now_ms())
        await consumers.create(group, record, record.session_timeout_ms)
        base_uri = f"{settings.base_url}/consumers/{group}/instances/{record.member_id}"
        return json_response(
            V2CreatedConsumer(instance_id=record.member_id, base_uri=base_uri), media
        )

    @router.delete(instance, status_code=204)
    async def delete(group: str, instance: str) -> Response:
        await consumers.delete(group, instance)
        return Response(status_code=204)

    @router.post(
        instance + "/subscription",
        status_code=204,
        openapi_extra=openapi_body(V2Subscription, *_V2_TYPES),
    )
    async def subscribe(request: Request, group: str, instance: str) -> Response:
        body = parse_model(V2Subscription, await body_of(request))
        await consumers.subscribe(group, instance, body.topics or [], body.topic_pattern)
        return Response(status_code=204)

    @router.get(instance + "/subscription", response_model=V2Subscription)
    async def subscription(request: Request, group: str, instance: str) -> Response:
        media = accept(request)
        member = await consumers.instance(group, instance)
        if member.pattern is not None:
            return json_response({"topic_pattern": member.pattern}, media)
        return json_response({"topics": list(member.subscription)}, media)

    @router.delete(instance + "/subscription", status_code=204)
    async def unsubscribe(group: str, instance: str) -> Response:
        await consumers.unsubscribe(group, instance)
        return Response(status_code=204)

    @router.post(
        instance + "/assignments",
        status_code=204,
        openapi_extra=openapi_body(V2Partitions, *_V2_TYPES),
    )
    async def assign(request: Request, group: str, instance: str) -> Response:
        body = parse_model(V2Partitions, await body_of(request))
        await consumers.assign(
            group, instance, [TopicPartition(p.topic, p.partition) for p in body.partitions]
        )
        return Response(status_code=204)

    @router.get(instance + "/assignments", response_model=V2Partitions)
    async def assignments(request: Request, group: str, instance: str) -> Response:
        media = accept(request)
        owned = (await consumers.instance(group, instance)).owned
        partitions = [{"topic": t, "partition": p} for t, p in sorted(owned)]
        return json_response({"partitions": partitions}, media)

    @router.post(
        instance + "/positions",
        status_code=204,
        openapi_extra=openapi_body(V2Positions, *_V2_TYPES),
    )
    async def seek(request: Request, group: str, instance: str) -> Response:
        body = parse_model(V2Positions, await body_of(request))
        offsets = {}
        for index, entry in enumerate(body.offsets):
            if entry.offset < 0:
                raise InvalidRequestError(
                    f"offsets[{index}].offset is negative ({entry.offset})", kind="invalid_data"
                )
            offsets[TopicPartition(entry.topic, entry.partition)] = entry.offset
        if offsets:
            await consumers.seek(group, instance, offsets)
        elif not body.timestamps:  # nothing moves, but the instance must exist (404 if not)
            await consumers.instance(group, instance)
        for index, stamp in enumerate(body.timestamps):
            ms = _timestamp_ms(stamp.timestamp, f"timestamps[{index}].timestamp")
            await consumers.seek_to(
                group, instance, [TopicPartition(stamp.topic, stamp.partition)], ms
            )
        return Response(status_code=204)

    async def seek_edge(request: Request, group: str, instance: str, where: str) -> Response:
        body = parse_model(V2Partitions, await body_of(request))
        partitions = [TopicPartition(p.topic, p.partition) for p in body.partitions]
        await consumers.seek_to(group, instance, partitions, where)
        return Response(status_code=204)

    @router.post(
        instance + "/positions/beginning",
        status_code=204,
        openapi_extra=openapi_body(V2Partitions, *_V2_TYPES),
    )
    async def seek_beginning(request: Request, group: str, instance: str) -> Response:
        return await seek_edge(request, group, instance, "earliest")

    @router.post(
        instance + "/positions/end",
        status_code=204,
        openapi_extra=openapi_body(V2Partitions, *_V2_TYPES),
    )
    async def seek_end(request: Request, group: str, instance: str) -> Response:
        return await seek_edge(request, group, instance, "latest")

    @router.get(instance + "/records", response_model=list[V2ConsumerRecord])
    async def records(
        request: Request,
        group: str,
        instance: str,
        wait_ms: Annotated[
            int | None, Query(alias="timeout", description="Longest wait, ms.")
        ] = None,
        max_bytes: Annotated[int | None, Query(ge=1)] = None,
        filter_text: Annotated[
            str | None, Query(alias="filter", description=f"Yak extension. {FILTER_DOC}")
        ] = None,
    ) -> Response:
        """Records from the instance's partitions; answers as soon as there are any."""
        record_filter = filter_param(filter_text)  # 400 before any position moves
        principal = runtime.quotas.admit(QuotaKind.FETCH)
        fmt = EmbeddedFormat((await consumers.instance(group, instance)).base.format)
        media = negotiate(request.headers.get("accept"), fmt)  # 406 before any position moves
        limit = min(
            max_bytes or settings.consumer_request_max_bytes, settings.consumer_request_max_bytes
        )
        polled = await consumers.poll(
            group,
            instance,
            timeout_ms=wait_ms if wait_ms is not None and wait_ms >= 0 else None,
            max_bytes=limit,
            max_timeout_ms=settings.consumer_request_max_timeout_ms,
            record_filter=record_filter,
        )
        rendering = time.perf_counter()
        if fmt.schema_based:
            body = await schema_records_body(
                runtime.schemas, consumers, group, instance, polled.partitions, fmt, _headers
            )
        else:
            body = _records_body(polled.partitions, fmt)
        runtime.stats.poll.render.observe(time.perf_counter() - rendering)
        runtime.quotas.charge(QuotaKind.FETCH, principal, len(body))
        return Response(body, media_type=media)

    @router.post(
        instance + "/offsets",
        openapi_extra=openapi_body(V2CommitRequest, *_V2_TYPES, required=False),
    )
    async def commit(request: Request, group: str, instance: str) -> Response:
        """Commit the last processed offsets (stored + 1), or all consumed ones if no body."""
        media = accept(request)
        body = parse_model(V2CommitRequest, await body_of(request), empty_ok=True)
        offsets = None
        if body.offsets:
            offsets = {TopicPartition(o.topic, o.partition): o.offset for o in body.offsets}
        await consumers.commit(group, instance, offsets)
        return json_response([], media)

    @router.get(
        instance + "/offsets",
        response_model=V2CommittedOffsets,
        openapi_extra=openapi_body(V2Partitions, *_V2_TYPES),
    )
    async def committed(request: Request, group: str, instance: str) -> Response:
        """Committed offsets of the partitions named in the body (a GET with a body)."""
        media = accept(request)
        body = parse_model(V2Partitions, await body_of(request))
        wanted = [TopicPartition(p.topic, p.partition) for p in body.partitions]
        found = await consumers.committed(group, instance, wanted)
        offsets = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": found[tp].offset,
                "metadata": found[tp].metadata,
            }
            for tp in wanted
            if tp in found
        ]
        return json_response({"offsets": offsets}, media)

    return router
