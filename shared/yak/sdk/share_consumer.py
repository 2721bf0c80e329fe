"""``AsyncShareConsumer``: a member of a share group (a queue over topics, KIP-932), through a
rest-proxy's native API (``/api/v1/share-groups/{g}/…``; docs/queues.md).

``acquire`` (or ``async for record in consumer``) long-polls records the member then holds under
a lock (the group's lock duration); each ``ShareRecord`` says how often it was delivered
(``delivery_count``) and is answered with ``await record.ack()`` (done), ``release()`` (deliver
it again, to anyone), ``reject()`` (never again: the group's dead-letter topic) or ``renew()``
(keep the lock another lock duration). Answers are batched: noted at once, sent together — the
contiguous offsets of one partition and one answer as one range — inside the next acquire (one
request: the leaders apply them, then acquire, as Kafka's share consumers do), or alone by
``await consumer.flush()`` (what ``renew`` needs before the lock runs out, if no acquire
comes sooner). A record nobody
answers is delivered again once its lock expires, with its delivery count raised: at least once.
Order is not promised.

``flush`` returns the answers the proxy refused (``AckFailure``: typically
``INVALID_RECORD_STATE``, the lock had expired and the record went to someone else; nothing of
that entry changed); an acquire logs the ones it carried that were refused. A flush or acquire
that cannot reach the proxy keeps its answers for the next one and raises. ``aclose`` releases
what the member still holds (for the others to take at once), then closes. The member id is
the caller's, or the one the proxy gave at the first acquire; any proxy serves it. One event
loop; ``yak.sdk.ShareConsumer`` is the blocking twin.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Sequence
from typing import Any, NamedTuple

import httpx

from yak.api.records import Encoding, HeaderEncoding
from yak.api.share_records import (
    AckEntry,
    AckEntryResult,
    AcknowledgeRequest,
    AcknowledgeResponse,
    AcknowledgeType,
    AcquireRequest,
    AcquireResponse,
)
from yak.clients._http import segment
from yak.closing import AsyncClosing
from yak.errors import IllegalStateError, YakError, error_for_code
from yak.sdk._client import ApiClient
from yak.sdk.records import consumer_record

__all__ = ["AckFailure", "AcknowledgeType", "AsyncShareConsumer", "ShareRecord"]

log = logging.getLogger(__name__)
#: The offsets answered per partition and answer since the last flush.
_Pending = dict[tuple[str, int, AcknowledgeType], set[int]]


class AckFailure(NamedTuple):
    """Offsets ``first..last`` of a partition whose answer the proxy refused, and why."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    type: AcknowledgeType
    error: YakError


class _Noted:
    """What ``ShareRecord.ack()`` & co. return: already done, awaitable for symmetry with the
    rest of the SDK (``await record.ack()``); not awaiting it is fine (the blocking twin)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


_NOTED = _Noted()


class ShareRecord:
    """A record the member holds, and the four answers it may give (see the module docstring)."""

    __slots__ = (
        "_note",
        "delivery_count",
        "headers",
        "key",
        "offset",
        "partition",
        "timestamp",
        "topic",
        "value",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...],
        delivery_count: int,
        note: Callable[[ShareRecord, AcknowledgeType], None],
    ) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.timestamp, self.key, self.value, self.headers = timestamp, key, value, headers
        self.delivery_count = delivery_count
        self._note = note

    def __repr__(self) -> str:
        return (
            f"ShareRecord({self.topic}-{self.partition}@{self.offset}, "
            f"delivery_count={self.delivery_count})"
        )

    def ack(self) -> Awaitable[None]:
        """Done with it: never delivered again."""
        return self._answer(AcknowledgeType.ACCEPT)

    def release(self) -> Awaitable[None]:
        """Deliver it again now (to any member); its delivery count stays."""
        return self._answer(AcknowledgeType.RELEASE)

    def reject(self) -> Awaitable[None]:
        """Never deliver it again: it goes to the group's dead-letter topic, if it has one."""
        return self._answer(AcknowledgeType.REJECT)

    def renew(self) -> Awaitable[None]:
        """Hold it another lock duration (sent with the next flush: flush soon)."""
        return self._answer(AcknowledgeType.RENEW)

    def _answer(self, kind: AcknowledgeType) -> Awaitable[None]:
        self._note(self, kind)
        return _NOTED


class AsyncShareConsumer(AsyncClosing):
    """A share-group member (see the module docstring)."""

    def __init__(
        self,
        url: str,
        group: str,
        topics: Sequence[str] | str,
        *,
        filter: str | None = None,
        max_records: int = 500,
        member_id: str | None = None,
        request_timeout_ms: int = 30_000,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self.group = group
        self._topics = [topics] if isinstance(topics, str) else list(topics)
        self._filter = filter
        self._max_records = max_records
        self._member_id = member_id
        self._request_timeout_s = request_timeout_ms / 1000
        self._api = ApiClient(
            url,
            timeout_s=request_timeout_ms / 1000,
            transport=transport,
            api_key=api_key,
            username=username,
            password=password,
        )
        self._pending: _Pending = {}
        #: Records handed out and not answered yet, by (topic, partition, offset).
        self._held: dict[tuple[str, int, int], ShareRecord] = {}
        #: How answers are noted; the blocking twin makes it thread-safe.
        self.note: Callable[[ShareRecord, AcknowledgeType], None] = self.answer
        self._closed = False

    @property
    def member_id(self) -> str | None:
        return self._member_id

    def _path(self, suffix: str) -> str:
        return f"/share-groups/{segment(self.group)}/{suffix}"

    async def acquire(
        self, timeout_ms: int = 1_000, max_records: int | None = None
    ) -> list[ShareRecord]:
        """Records the member now holds: as soon as there are any, else an empty list after
        ``timeout_ms``. The answers noted since the last flush ride it (applied first)."""
        if self._closed:
            raise IllegalStateError("the share consumer is closed")
        pending, entries = self._take_pending()
        body = AcquireRequest(
            topics=self._topics,
            member_id=self._member_id,
            max_records=max_records or self._max_records,
            timeout_ms=timeout_ms,
            filter=self._filter,
            key_encoding=Encoding.BASE64,
            value_encoding=Encoding.BASE64,
            header_encoding=HeaderEncoding.BASE64,
            acknowledgements=entries,
        )
        try:
            answer = await self._api.call(
                "POST",
                self._path("acquire"),
                AcquireResponse,
                body,
                timeout_s=timeout_ms / 1000 + self._request_timeout_s,
            )
        except YakError:  # refused whole (nothing applied) or not known to be sent: kept
            self._keep(pending)
            raise
        for failure in _failures(answer.acknowledgement_results):
            log.warning("share group %s: an answer was refused: %s", self.group, failure)
        self._member_id = answer.member_id
        records = []
        for acquired in answer.records:
            plain = consumer_record(acquired)
            record = ShareRecord(*plain, acquired.delivery_count, self.note)
            self._held[(record.topic, record.partition, record.offset)] = record
            records.append(record)
        return records

    async def __aiter__(self) -> AsyncGenerator[ShareRecord, None]:
        """Every record, one by one, acquiring as needed, until the consumer is closed."""
        while not self._closed:
            for record in await self.acquire(1_000):
                yield record

    def answer(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        """Note ``record``'s answer (what ``record.ack()`` & co. do): sent with the next
        flush. The last answer of a record wins; a renewal after a final answer is moot."""
        key = (record.topic, record.partition, record.offset)
        others = [
            (answered, offsets)
            for (topic, partition, answered), offsets in self._pending.items()
            if (topic, partition) == key[:2] and answered is not kind
        ]
        if kind is AcknowledgeType.RENEW:
            if any(record.offset in offsets for _, offsets in others):
                return
        else:
            self._held.pop(key, None)
            for _, offsets in others:
                offsets.discard(record.offset)
        self._pending.setdefault((record.topic, record.partition, kind), set()).add(record.offset)

    async def flush(self) -> list[AckFailure]:
        """Send the answers noted so far; the ones the proxy refused."""
        pending, entries = self._take_pending()
        if not entries or self._member_id is None:
            return []
        request = AcknowledgeRequest(member_id=self._member_id, acknowledgements=entries)
        try:
            answer = await self._api.call(
                "POST", self._path("acknowledgements"), AcknowledgeResponse, request
            )
        except YakError as exc:
            results = exc.details.get("results")
            if not isinstance(results, list):
                if exc.retriable:  # not sent, or not known to be: kept for the next flush
                    self._keep(pending)
                raise
            return [AckFailure(e.topic, e.partition, e.first, e.last, e.type, exc) for e in entries]
        return _failures(answer.results)

    def _take_pending(self) -> tuple[_Pending, list[AckEntry]]:
        """The answers noted so far, taken (none before the member has an id), as entries."""
        if not self._pending or self._member_id is None:
            return {}, []
        pending, self._pending = self._pending, {}
        entries = [
            AckEntry(
                topic=topic, partition=partition, first_offset=first, last_offset=last, type=kind
            )
            for (topic, partition, kind), offsets in sorted(pending.items())
            for first, last in _runs(offsets)
            if offsets
        ]
        return pending, entries

    def _keep(self, pending: _Pending) -> None:
        """Answers taken but not applied: back for the next request (later notes win)."""
        for key, offsets in pending.items():
            self._pending.setdefault(key, set()).update(offsets)

    async def aclose(self) -> None:
        """Release what the member still holds, send the answers noted, close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            for record in list(self._held.values()):
                self.answer(record, AcknowledgeType.RELEASE)
            await self.flush()
        finally:
            await self._api.aclose()


def _failures(results: Sequence[AckEntryResult]) -> list[AckFailure]:
    return [
        AckFailure(r.topic, r.partition, r.first_offset, r.last_offset, r.type, _error(r.error))
        for r in results
        if r.error is not None
    ]


def _error(body: dict[str, str]) -> YakError:
    return error_for_code(body.get("code", "UNKNOWN_SERVER_ERROR"), body.get("message", ""))


def _runs(offsets: set[int]) -> list[tuple[int, int]]:
    """Offsets as inclusive runs of consecutive ones, in order."""
    runs: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if runs and runs[-1][1] == offset - 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs
