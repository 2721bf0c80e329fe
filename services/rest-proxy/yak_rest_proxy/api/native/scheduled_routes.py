"""Scheduled records (delayed delivery) on the native API: list a partition's pending
schedules and cancel one.

- ``GET /api/v1/topics/{topic}/partitions/{partition}/scheduled?after_ms=&after_offset=&limit=``
  — a page of the pending schedules in due order (``yak.api.scheduled.ScheduledRecords``);
  ``next`` names the page after it. Without ``after_ms``: the schedules not due yet.
- ``DELETE /api/v1/topics/{topic}/partitions/{partition}/scheduled/{offset}`` — cancel one
  (``CancelledSchedule``), answered once the cancel is replicated.

Both are served by the partition's leader from its delay index (the broker's admin routes
``/v1/scheduled/...``, ``yak_broker.server.scheduled``); this module forwards to it with the
same query and answers with its body and error codes: 404 ``SCHEDULED_RECORD_NOT_FOUND``, 409
``RECORD_ALREADY_DUE``. A topic without ``delayed.delivery.enable=true`` is refused here from
the metadata cache with 400 ``DELAYS_NOT_ENABLED`` before any broker call.

A leader that moved (``NOT_LEADER_OR_FOLLOWER``, no live leader) is asked again once after the
metadata cache caught up with etcd; a listing also when the leader could not be reached. A
cancel is not sent again after a broken connection: the old leader may have written it, and a
second one would answer 404 for a cancel that took place. docs/queues.md, "Delayed and
scheduled delivery".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Query, Response

from yak.api.records import API_PREFIX
from yak.api.scheduled import CancelledSchedule, ScheduledRecords
from yak.clients.broker import BrokerClient
from yak.delays import delay_settings
from yak.errors import (
    DelaysNotEnabledError,
    LeaderNotAvailableError,
    NetworkError,
    NotLeaderOrFollowerError,
    YakError,
)
from yak.topic_config import DELAYED_DELIVERY_ENABLE
from yak_rest_proxy.http.responses import json_response
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["MAX_PAGE", "scheduled_router"]

_T = TypeVar("_T")
_JSON = "application/json"
#: The largest page a listing may ask for (the broker's bound).
MAX_PAGE = 10_000
_PATH = "/topics/{topic}/partitions/{partition}/scheduled"
_MOVED: tuple[type[YakError], ...] = (NotLeaderOrFollowerError, LeaderNotAvailableError)


async def _check_delays(runtime: ProxyRuntime, topic: str) -> None:
    """``DELAYS_NOT_ENABLED`` unless the topic allows delays (``UNKNOWN_TOPIC_OR_PARTITION``
    if there is no such topic)."""
    record = await runtime.topics.record(topic)
    if not delay_settings(record.configs).enabled:
        raise DelaysNotEnabledError(
            f"topic {topic!r} does not allow delayed delivery ({DELAYED_DELIVERY_ENABLE} is "
            "not true): it has no scheduled records",
            topic=topic,
        )


async def _at_leader(
    runtime: ProxyRuntime,
    topic: str,
    partition: int,
    call: Callable[[BrokerClient], Awaitable[_T]],
    retry_on: tuple[type[YakError], ...] = _MOVED,
) -> _T:
    """``call`` on the partition leader's client; once more after the metadata caught up
    when it fails with one of ``retry_on``."""
    try:
        _, client = runtime.brokers.leader(topic, partition)
        return await call(client)
    except retry_on:
        await runtime.topics.sync_partitions([(topic, partition)])
    _, client = runtime.brokers.leader(topic, partition)
    return await call(client)


def scheduled_router(runtime: ProxyRuntime) -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=["native scheduled records"])

    @router.get(_PATH, response_model=ScheduledRecords)
    async def list_scheduled(
        topic: str,
        partition: int,
        after_ms: Annotated[
            int | None,
            Query(description="Page start: due time (epoch ms); absent: those not due yet."),
        ] = None,
        after_offset: Annotated[
            int, Query(description="Page start: the offset after which, at ``after_ms``.")
        ] = -1,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Most records.")] = 100,
    ) -> Response:
        """The partition's pending scheduled records in due order, from its leader."""
        await _check_delays(runtime, topic)
        page = await _at_leader(
            runtime,
            topic,
            partition,
            lambda client: client.list_scheduled(
                topic, partition, after_ms=after_ms, after_offset=after_offset, limit=limit
            ),
            (*_MOVED, NetworkError),
        )
        return json_response(page, _JSON)

    @router.delete(f"{_PATH}/{{offset}}", response_model=CancelledSchedule)
    async def cancel_scheduled(topic: str, partition: int, offset: int) -> Response:
        """Cancel the schedule of the record at ``offset``: a control batch the leader
        appends; answered once every in-sync replica has it."""
        await _check_delays(runtime, topic)
        done = await _at_leader(
            runtime,
            topic,
            partition,
            lambda client: client.cancel_scheduled(topic, partition, offset),
        )
        return json_response(done, _JSON)

    return router
