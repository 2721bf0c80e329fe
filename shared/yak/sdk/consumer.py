"""``AsyncConsumer``: a member of a consumer group, through a rest-proxy's native API.

``start`` (or ``async with``) joins the group (``POST /api/v1/groups/{g}/members``); the
coordinator assigns partitions and every answer carries the member's epoch and assignment,
which ``assignment()`` and ``member_epoch`` report. ``poll`` long-polls records of the
assigned, not paused partitions as bytes. It asks for the binary answer
(``Accept: application/vnd.yak.fetch.v1, application/json;q=0.5``): the fetched Kafka record
batches as the brokers stored them, which the consumer decodes and checks itself; a proxy
without that form answers JSON with base64 keys, values and headers, which the consumer reads
as well — one request either way, no second round trip, so the SDK works with older proxies.
Fetch positions live in the proxy (any proxy serves the member); where a partition starts
without one is ``auto_offset_reset`` of the committed offset.

Commits are explicit unless ``auto_commit`` (the proxy then commits at each poll what the
previous poll returned). ``commit()`` commits the *next* offset of the last record this
consumer handed out per assigned partition (or a ``seek`` target) — records ``poll`` returned,
or that iteration (``async for record in consumer``) reached; ``commit(offsets)`` commits given
next offsets. A partition the member no longer owns is refused with
``FencedMemberEpochError``. ``pause``/``resume`` keep partitions assigned but unread.

The member stays in the group while it sends a request at least every ``session_timeout_ms``
(polling does); a member that expired is re-joined by ``poll`` under the same member id, its
uncommitted positions lost, as a Kafka consumer re-joins after a session timeout. ``aclose``
leaves the group. One event loop; use ``yak.sdk.Consumer`` from threads.

``filter`` (docs/filters.md) is sent with every poll and applied by the proxy, never here: only
the records it lets through come back, and the member's position at the proxy moves past the
others. A filtered poll is asked for in JSON (the binary form carries the brokers' batches
whole). ``commit()`` then covers the dropped records too: once every record of the last poll
has been handed out it commits the proxy's positions (``CommitRequest`` without offsets),
which are past them; in the middle of an iteration it commits the records handed out. A bad
filter raises ``InvalidFilterError`` at the first poll.

Over the principal's fetch quota the proxy answers a poll with 429 and ``Retry-After``
(positions do not move): ``poll`` waits as told and polls again, for at most
``max_throttle_ms`` in all (default 60 s), then raises ``ThrottlingQuotaExceededError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Literal, Self

import httpx

from yak.api.fetch_answer import decode_fetch_answer
from yak.api.groups import (
    CommitOffset,
    CommitRequest,
    GroupMemberInfo,
    JoinGroupRequest,
    PollResponse,
    SeekPosition,
    SeekRequest,
    TopicPartitionList,
)
from yak.api.records import FETCH_MEDIA_TYPE
from yak.clients._http import segment
from yak.closing import AsyncClosing
from yak.errors import IllegalStateError, UnknownMemberIdError, UnknownServerError, YakError
from yak.sdk._client import ApiClient
from yak.sdk.records import ConsumerRecord, consumer_record, fetched_records
from yak.types import TopicPartition

__all__ = ["AsyncConsumer", "OffsetReset"]

#: Where a partition without a committed offset starts.
OffsetReset = Literal["earliest", "latest", "none"]
_BASE64 = "base64"
#: The poll's Accept: the binary answer, else (an older proxy) JSON.
_POLL_ACCEPT = f"{FETCH_MEDIA_TYPE}, application/json;q=0.5"
#: A filtered poll's Accept: the proxy filters decoded records and answers them in JSON.
_JSON = "application/json"

#: An assignment as answers carry it: ``TopicPartitionList`` models or (topic, partitions).
Assignment = Iterable[TopicPartitionList] | Iterable[tuple[str, Iterable[int]]]


def _as_set(assignment: Assignment) -> set[TopicPartition]:
    found: set[TopicPartition] = set()
    for entry in assignment:
        topic, partitions = (
            (entry.topic, entry.partitions) if isinstance(entry, TopicPartitionList) else entry
        )
        found.update(TopicPartition(topic, p) for p in partitions)
    return found


class AsyncConsumer(AsyncClosing):
    """A consumer-group member (see the module docstring)."""

    def __init__(
        self,
        url: str,
        group: str,
        topics: Sequence[str] | str = (),
        topic_pattern: str | None = None,
        *,
        auto_offset_reset: OffsetReset = "latest",
        auto_commit: bool = False,
        session_timeout_ms: int = 30_000,
        rebalance_timeout_ms: int = 60_000,
        assignor: Literal["uniform", "range"] = "uniform",
        member_id: str | None = None,
        max_bytes: int = 1024 * 1024,
        request_timeout_ms: int = 30_000,
        max_throttle_ms: int = 60_000,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        filter: str | None = None,
    ) -> None:
        self.group = group
        self.filter = filter
        self._max_throttle_s = max_throttle_ms / 1000
        self._join = JoinGroupRequest(
            member_id=member_id,
            topics=[topics] if isinstance(topics, str) else list(topics),
            topic_pattern=topic_pattern,
            assignor=assignor,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            auto_offset_reset=auto_offset_reset,
            auto_commit=auto_commit,
        )
        self._api = ApiClient(
            url,
            timeout_s=request_timeout_ms / 1000,
            transport=transport,
            api_key=api_key,
            username=username,
            password=password,
        )
        self._max_bytes = max_bytes
        self._accept = _POLL_ACCEPT if filter is None else _JSON
        self._request_timeout_s = request_timeout_ms / 1000
        self._member_id: str | None = None
        self._epoch = 0
        self._assignment: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._resumed = asyncio.Event()
        self._closed = False
        #: Every record of the last poll handed out (the proxy's positions are then ours).
        self._drained = True

    # --- membership -----------------------------------------------------------------------

    @property
    def member_id(self) -> str | None:
        return self._member_id

    @property
    def member_epoch(self) -> int:
        return self._epoch

    async def start(self) -> None:
        """Join the group (a no-op once joined)."""
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        if self._member_id is None:
            await self._join_group()

    async def _join_group(self) -> None:
        info = await self._api.call(
            "POST", f"/groups/{segment(self.group)}/members", GroupMemberInfo, self._join
        )
        self._member_id = info.member_id
        # Re-joining under the same id keeps the id the caller chose or was given.
        self._join = self._join.model_copy(update={"member_id": info.member_id})
        self._positions.clear()
        self._update(info.member_epoch, info.assignment)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def aclose(self) -> None:
        """Leave the group and release the connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._member_id is not None:
                with contextlib.suppress(UnknownMemberIdError):
                    await self._api.call_empty("DELETE", self._path())
        finally:
            await self._api.aclose()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the member owned at its last answer from the proxy."""
        return set(self._assignment)

    def _path(self, suffix: str = "") -> str:
        if self._member_id is None:
            raise IllegalStateError("the consumer has not joined its group: call start() first")
        return f"/groups/{segment(self.group)}/members/{segment(self._member_id)}{suffix}"

    def _update(self, epoch: int, assignment: Assignment) -> None:
        self._epoch = epoch
        self._assignment = _as_set(assignment)
        for tp in list(self._positions):
            if tp not in self._assignment:
                del self._positions[tp]
        self._paused &= self._assignment

    # --- reading --------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: int = 1_000, max_bytes: int | None = None
    ) -> list[ConsumerRecord]:
        """Records of the assigned, not paused partitions: as soon as there are any, else
        an empty list after ``timeout_ms``. They count as consumed for ``commit()``."""
        records = await self._fetch(timeout_ms, max_bytes)
        for record in records:
            self._positions[TopicPartition(record.topic, record.partition)] = record.offset + 1
        self._drained = True
        return records

    async def __aiter__(self) -> AsyncGenerator[ConsumerRecord, None]:
        """Every record, one by one, polling as needed, until the consumer is closed."""
        while not self._closed:
            records = await self._fetch(1_000, None)
            last = len(records) - 1
            self._drained = last < 0
            for index, record in enumerate(records):
                self._positions[TopicPartition(record.topic, record.partition)] = record.offset + 1
                self._drained = index == last
                yield record

    async def _fetch(self, timeout_ms: int, max_bytes: int | None) -> list[ConsumerRecord]:
        await self.start()
        started = time.monotonic()
        params: dict[str, str | int | list[str]] = {
            "timeout_ms": timeout_ms,
            "max_bytes": max_bytes or self._max_bytes,
            "key_encoding": _BASE64,
            "value_encoding": _BASE64,
            "header_encoding": _BASE64,
        }
        if self._paused:
            params["paused"] = [f"{t}:{p}" for t, p in sorted(self._paused)]
        if self.filter is not None:
            params["filter"] = self.filter
        try:
            response = await self._api.exchange(
                "GET",
                self._path("/records"),
                params=params,
                timeout_s=timeout_ms / 1000 + self._request_timeout_s,
                throttle_budget_s=self._max_throttle_s,
                accept=self._accept,
            )
        except UnknownMemberIdError:
            await self._join_group()  # expired: join again, from the committed offsets
            return []
        records = self._records(response)
        if not records and self._assignment and self._assignment <= self._paused:
            # Nothing to read until a resume: wait out the poll as Kafka's poll does.
            left = timeout_ms / 1000 - (time.monotonic() - started)
            self._resumed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, left)):
                    await self._resumed.wait()
        return records

    def _records(self, response: httpx.Response) -> list[ConsumerRecord]:
        """A poll's records, from its binary or JSON answer; the epoch and assignment noted."""
        media_type = response.headers.get("content-type", "").partition(";")[0].strip()
        if media_type != FETCH_MEDIA_TYPE:
            answer = self._api.parse(PollResponse, response)
            self._update(answer.member_epoch, answer.assignment)
            return [consumer_record(r) for r in answer.records]
        try:
            fetched = decode_fetch_answer(response.content)
        except YakError as exc:
            raise UnknownServerError(f"{response.request.url}: a malformed answer: {exc}") from exc
        self._update(fetched.member_epoch, fetched.assignment)
        return fetched_records(fetched.partitions)

    # --- positions and commits ------------------------------------------------------------

    def position(self, tp: TopicPartition) -> int | None:
        """The next offset after the last record handed out (or the seek target), if known."""
        return self._positions.get(tp)

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit next offsets: ``offsets``, or the consumed positions of assigned partitions
        (filtered and every record handed out: the proxy's, past the dropped records)."""
        if offsets is None and self.filter is not None and self._drained:
            await self.start()
            info = await self._api.call(
                "POST", self._path("/commit"), GroupMemberInfo, CommitRequest()
            )
            self._update(info.member_epoch, info.assignment)
            return
        if offsets is None:
            offsets = {tp: o for tp, o in self._positions.items() if tp in self._assignment}
        if not offsets:
            return
        body = CommitRequest(
            offsets=[
                CommitOffset(topic=tp.topic, partition=tp.partition, offset=offset)
                for tp, offset in sorted(offsets.items())
            ]
        )
        info = await self._api.call("POST", self._path("/commit"), GroupMemberInfo, body)
        self._update(info.member_epoch, info.assignment)

    async def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``topic``-``partition`` (assigned to this member) from ``offset`` next."""
        await self._seek([SeekPosition(topic=topic, partition=partition, offset=offset)])
        self._positions[TopicPartition(topic, partition)] = offset

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        """Read the given partitions (default: every assigned one) from their first record."""
        await self._seek_to(tps, "earliest")

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        """Read only records written from now on (default: every assigned partition)."""
        await self._seek_to(tps, "latest")

    async def seek_to_timestamp(self, timestamp_ms: int, *tps: TopicPartition) -> None:
        """Read from the first record at or after ``timestamp_ms`` (else from the end)."""
        await self._seek_to(tps, timestamp_ms)

    async def _seek_to(self, tps: Sequence[TopicPartition], where: str | int) -> None:
        chosen = sorted(tps or self._assignment)
        if not chosen:
            return
        if isinstance(where, int):
            positions = [SeekPosition(topic=t, partition=p, timestamp=where) for t, p in chosen]
        else:
            to: Literal["earliest", "latest"] = "earliest" if where == "earliest" else "latest"
            positions = [SeekPosition(topic=t, partition=p, to=to) for t, p in chosen]
        await self._seek(positions)
        for tp in chosen:  # the offset is the proxy's to find; nothing to commit until a read
            self._positions.pop(TopicPartition(*tp), None)

    async def _seek(self, positions: list[SeekPosition]) -> None:
        await self.start()
        await self._api.call_empty("POST", self._path("/seek"), SeekRequest(partitions=positions))

    # --- flow control ---------------------------------------------------------------------

    def pause(self, *tps: TopicPartition) -> None:
        """Stop reading these assigned partitions until ``resume`` (they stay assigned)."""
        missing = sorted(set(tps) - self._assignment)
        if missing:
            shown = ", ".join(str(TopicPartition(*tp)) for tp in missing)
            raise IllegalStateError(f"cannot pause {shown}: not assigned to this consumer")
        self._paused.update(TopicPartition(*tp) for tp in tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._paused.difference_update(tps)
        self._resumed.set()

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)
