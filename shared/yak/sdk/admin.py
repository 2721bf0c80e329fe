"""``AsyncAdmin``: topics, the cluster, consumer and share groups through a rest-proxy's
native API.

Every method is one request and returns the wire model of ``yak.api.admin`` (topics, cluster),
``yak.api.groups`` (groups), ``yak.api.share_groups`` (share groups) or ``yak.api.scheduled``
(a partition's scheduled records). Topic and share-group
changes are forwarded by the proxy to the active controller; errors come back as typed
``YakError``s (``TopicAlreadyExistsError``, ``GroupNotEmptyError`` ...). One instance may
serve concurrent tasks of one event loop.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal

import httpx
from pydantic import RootModel

from yak.api.admin import (
    AlterConfigsRequest,
    BrokerInfo,
    ClusterInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    LogDirs,
    PartitionOffset,
    TopicDeleted,
    TopicDescription,
    TopicDescriptionList,
    TopicList,
    TopicLogDirs,
)
from yak.api.groups import (
    CommitOffset,
    GroupDescription,
    GroupList,
    OffsetResetRequest,
    OffsetResetResult,
)
from yak.api.scheduled import CancelledSchedule, ScheduledRecords
from yak.api.security import WhoAmI
from yak.api.share_groups import (
    AlterShareGroupRequest,
    CreateShareGroupRequest,
    ShareGroupDeleted,
    ShareGroupDescription,
    ShareGroupList,
    ShareOffsetResetName,
)
from yak.clients._http import segment
from yak.closing import AsyncClosing
from yak.sdk._client import ApiClient, Params

__all__ = ["AsyncAdmin", "ResetTarget"]

#: The query length (topic names) beyond which ``describe_topics`` asks for all and filters.
_MAX_QUERY_CHARS = 6_000


class _BrokerList(RootModel[list[BrokerInfo]]):
    pass


#: Where ``reset_offsets`` moves committed offsets (``explicit``: per partition, ``offsets``).
ResetTarget = Literal["earliest", "latest", "timestamp", "offset", "explicit"]


class AsyncAdmin(AsyncClosing):
    """Administers the cluster behind the rest-proxy at ``url``."""

    def __init__(
        self,
        url: str,
        *,
        request_timeout_ms: int = 30_000,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._api = ApiClient(
            url,
            timeout_s=request_timeout_ms / 1000,
            transport=transport,
            api_key=api_key,
            username=username,
            password=password,
        )

    async def aclose(self) -> None:
        await self._api.aclose()

    # --- cluster and topics ---------------------------------------------------------------

    async def cluster(self) -> ClusterInfo:
        """Brokers, the active controller and partition health counts."""
        return await self._api.call("GET", "/cluster", ClusterInfo)

    async def brokers(self) -> list[BrokerInfo]:
        """Every broker the cluster knows: registered (``status`` ``up`` or ``shutting_down``)
        or recorded after it left (``down``, with ``last_seen_ms``)."""
        return (await self._api.call("GET", "/brokers", _BrokerList)).root

    async def log_dirs(
        self, topics: Sequence[str] | None = None, brokers: Sequence[int] | None = None
    ) -> LogDirs:
        """Every live broker's disk usage and each replica's size and offsets (of ``topics``
        and ``brokers`` only, when given)."""
        params: dict[str, list[str]] = {}
        if topics:
            params["topic"] = list(topics)
        if brokers:
            params["broker"] = [str(b) for b in brokers]
        return await self._api.call("GET", "/log-dirs", LogDirs, params=params or None)

    async def log_dir_topics(self, brokers: Sequence[int] | None = None) -> TopicLogDirs:
        """Every live broker's disk usage and its replicas summed per topic (one entry per
        topic and broker: cheap at any partition count)."""
        params = {"broker": [str(b) for b in brokers]} if brokers else None
        return await self._api.call("GET", "/log-dirs/topics", TopicLogDirs, params=params)

    async def partition_offset(
        self, topic: str, partition: int, timestamp: int | Literal["earliest", "latest"]
    ) -> PartitionOffset:
        """The log start (``earliest``), the high watermark (``latest``) or the first offset
        whose timestamp is at or after ``timestamp`` ms (-1 if none)."""
        return await self._api.call(
            "GET",
            f"/topics/{segment(topic)}/partitions/{partition}/offsets",
            PartitionOffset,
            params={"timestamp": str(timestamp)},
        )

    async def list_scheduled(
        self,
        topic: str,
        partition: int,
        *,
        after_ms: int | None = None,
        after_offset: int = -1,
        limit: int = 100,
    ) -> ScheduledRecords:
        """A page of the partition's pending scheduled (delayed) records in due order, from
        its leader: those not due yet, or those after ``(after_ms, after_offset)`` (the
        ``next`` of the page before; None when that page was the last)."""
        params: dict[str, str] = {"after_offset": str(after_offset), "limit": str(limit)}
        if after_ms is not None:
            params["after_ms"] = str(after_ms)
        path = f"/topics/{segment(topic)}/partitions/{partition}/scheduled"
        return await self._api.call("GET", path, ScheduledRecords, params=params)

    async def cancel_scheduled(self, topic: str, partition: int, offset: int) -> CancelledSchedule:
        """Cancel the schedule of the record at ``offset`` (``ScheduledRecordNotFoundError``:
        not delayed or cancelled already; ``RecordAlreadyDueError``: its time has passed)."""
        path = f"/topics/{segment(topic)}/partitions/{partition}/scheduled/{offset}"
        return await self._api.call("DELETE", path, CancelledSchedule)

    async def whoami(self) -> WhoAmI:
        """The principal this client's credential authenticates as (401 when it is refused)."""
        return await self._api.call("GET", "/security/whoami", WhoAmI)

    async def list_topics(self) -> TopicList:
        return await self._api.call("GET", "/topics", TopicList)

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        body = CreateTopicRequest(
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            configs=dict(configs or {}),
        )
        return await self._api.call("POST", "/topics", TopicDescription, body)

    async def describe_topic(self, name: str) -> TopicDescription:
        """The topic's configs and each partition's leader, epochs, replicas and ISR."""
        return await self._api.call("GET", f"/topics/{segment(name)}", TopicDescription)

    async def describe_topics(self, names: Collection[str] | None = None) -> list[TopicDescription]:
        """Many topics in one request, by name: ``names`` (the unknown ones left out), or every
        topic this client may describe when ``names`` is None."""
        if names is None:
            return await self._describe_topics({})
        wanted = sorted(set(names))
        if not wanted:
            return []
        if sum(len(n) + 7 for n in wanted) <= _MAX_QUERY_CHARS:
            return await self._describe_topics({"topic": wanted})
        # A query that long may exceed a server's request-line limit: ask for all, keep some.
        return [t for t in await self._describe_topics({}) if t.name in set(wanted)]

    async def _describe_topics(self, params: Params) -> list[TopicDescription]:
        path = "/topic-descriptions"
        return (await self._api.call("GET", path, TopicDescriptionList, params=params)).topics

    async def delete_topic(self, name: str) -> TopicDeleted:
        return await self._api.call("DELETE", f"/topics/{segment(name)}", TopicDeleted)

    async def alter_topic_configs(
        self,
        name: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
    ) -> TopicDescription:
        """Set some config overrides and reset others to their defaults."""
        body = AlterConfigsRequest(set=dict(set_configs or {}), delete=list(delete_configs))
        return await self._api.call(
            "PATCH", f"/topics/{segment(name)}/configs", TopicDescription, body
        )

    async def create_partitions(self, name: str, count: int) -> TopicDescription:
        """Raise the topic's partition count to ``count`` (it can only grow)."""
        body = CreatePartitionsRequest(count=count)
        return await self._api.call(
            "POST", f"/topics/{segment(name)}/partitions", TopicDescription, body
        )

    # --- consumer groups ------------------------------------------------------------------

    async def list_groups(self) -> GroupList:
        return await self._api.call("GET", "/groups", GroupList)

    async def describe_group(self, group: str) -> GroupDescription:
        """State, members and, per partition, committed offset, end offset, lag and owner."""
        return await self._api.call("GET", f"/groups/{segment(group)}", GroupDescription)

    async def delete_group(self, group: str) -> None:
        """Delete an empty group and its committed offsets (``GroupNotEmptyError`` if not)."""
        await self._api.call_empty("DELETE", f"/groups/{segment(group)}")

    async def reset_offsets(
        self,
        group: str,
        to: ResetTarget,
        *,
        timestamp: int | None = None,
        offset: int | None = None,
        topics: Sequence[str] | None = None,
        offsets: Mapping[tuple[str, int], int] | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> OffsetResetResult:
        """Move the group's committed offsets (of ``topics``, default every topic it has
        offsets for) to the earliest or latest offset, the first at or after ``timestamp``
        (ms) or ``offset``; with ``to="explicit"``, each (topic, partition) of ``offsets`` to
        its own offset (the next to read). Offsets are clamped into each partition's log.
        Refused while the group has members unless ``force``; ``dry_run`` only reports what
        would change."""
        body = OffsetResetRequest(
            to=to,
            timestamp=timestamp,
            offset=offset,
            topics=None if topics is None else list(topics),
            offsets=None
            if offsets is None
            else [CommitOffset(topic=t, partition=p, offset=o) for (t, p), o in offsets.items()],
            force=force,
            dry_run=dry_run,
        )
        return await self._api.call(
            "POST", f"/groups/{segment(group)}/offsets/reset", OffsetResetResult, body
        )

    # --- share groups ---------------------------------------------------------------------

    async def create_share_group(
        self,
        name: str,
        *,
        dead_letter_topic: str | None = None,
        max_delivery_attempts: int = 5,
        lock_duration_ms: int = 30_000,
        offset_reset: ShareOffsetResetName = "latest",
    ) -> ShareGroupDescription:
        """A share group (a queue over topics): records past ``max_delivery_attempts`` (1-100)
        go to ``dead_letter_topic`` (an existing topic; none: archived); a member holds a
        record for ``lock_duration_ms`` (1 s-1 h). ``DuplicateResourceError`` if it exists."""
        body = CreateShareGroupRequest(
            name=name,
            dead_letter_topic=dead_letter_topic,
            max_delivery_attempts=max_delivery_attempts,
            lock_duration_ms=lock_duration_ms,
            offset_reset=offset_reset,
        )
        return await self._api.call("POST", "/share-groups", ShareGroupDescription, body)

    async def list_share_groups(self) -> ShareGroupList:
        return await self._api.call("GET", "/share-groups", ShareGroupList)

    async def describe_share_group(
        self, name: str, topics: Sequence[str] = ()
    ) -> ShareGroupDescription:
        """The group's settings and its live state (``live``: per share-partition in flight,
        acquired, lag, oldest unacked record, delivery counts; counters per topic; totals) as
        the brokers hold it now (``GroupIdNotFoundError`` if there is none). ``topics`` also
        lists those topics' partitions nobody has read yet (not loaded)."""
        path = f"/share-groups/{segment(name)}"
        params = {"topic": list(topics)} if topics else None
        return await self._api.call("GET", path, ShareGroupDescription, params=params)

    async def alter_share_group(
        self,
        name: str,
        *,
        dead_letter_topic: str | None = None,
        clear_dead_letter_topic: bool = False,
        max_delivery_attempts: int | None = None,
        lock_duration_ms: int | None = None,
        offset_reset: ShareOffsetResetName | None = None,
    ) -> ShareGroupDescription:
        """Change the settings given (None: unchanged); ``clear_dead_letter_topic`` removes
        the dead-letter topic."""
        given = {
            "dead_letter_topic": dead_letter_topic,
            "max_delivery_attempts": max_delivery_attempts,
            "lock_duration_ms": lock_duration_ms,
            "offset_reset": offset_reset,
        }
        fields: dict[str, object] = {k: v for k, v in given.items() if v is not None}
        if clear_dead_letter_topic:
            fields["dead_letter_topic"] = None
        body = AlterShareGroupRequest.model_validate(fields)
        path = f"/share-groups/{segment(name)}"
        raw = body.model_dump_json(exclude_unset=True).encode()
        return await self._api.call("PATCH", path, ShareGroupDescription, raw)

    async def delete_share_group(self, name: str) -> ShareGroupDeleted:
        """Delete the group (the partitions' leaders drop its state)."""
        path = f"/share-groups/{segment(name)}"
        return await self._api.call("DELETE", path, ShareGroupDeleted)
