"""A prefix watch on etcd's gRPC Watch stream: resumed on the next member when its member is
lost, and given up when its stream goes silent.

Each watch is one gRPC Watch stream carrying one watcher, read by one task into the watch's
buffer; closing the watch cancels both. The stream's messages are the adapter's
(``yak.metadata.etcd_store`` builds the requests and turns etcd's responses into
``WatchReply``): this module knows gRPC, not the etcd client package, which only the adapter
imports.

**Resuming**: when the stream fails because its member died, was left by the store (another
call found it down) or ended the stream, the watch opens a new one on the next member from the
revision after the last one it delivered (etcd's periodic progress notifications move that
revision on while the prefix is quiet; a compacted one ends the watch with
``RevisionCompactedError``) and logs ``watch on … resumed at revision …``. With one member, or
when no member takes the new stream, the watch ends with ``MetadataStoreError`` and its
consumer (``yak.metadata.watched``) opens it again after a backoff.

**Liveness**: a stream cut off by a network partition is *silent* — no reset, no error, and
the HTTP/2 keepalive may take 20 s or never fire (a connection whose pings are answered while
its stream is stuck). So a stream that has delivered nothing for ``WatchProbe.interval_s`` is
sent etcd's progress request (``WatchRequest.progress_request``, etcd ≥ 3.4), which etcd
answers at once with a response carrying its revision and no events. If nothing at all arrives
within ``WatchProbe.timeout_s`` after that, the member is treated as unreachable: the stream is
cancelled, the store moves on, and the watch resumes as above. ``StreamLiveness`` is that rule
as a pure state machine. Answers to progress requests are never delivered as events, and do not
move the resume revision (etcd before 3.4.24/3.5.8 could send one ahead of events still queued
for the watcher, etcd-io/etcd#15248).

No await of the reader is unbounded: opening a stream (request and "created" answer) has the
store's ``timeout_s`` per member, reading is watched by the probe, and any failure the code does
not expect ends the watch with ``MetadataStoreError`` (logged with its traceback) rather than
leaving its consumer waiting on a stream nobody reads.

Single event loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections.abc import Callable, MutableSet
from dataclasses import dataclass
from typing import Any, Protocol

from grpc.aio import AioRpcError

from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.etcd_endpoints import member_unreachable
from yak.metadata.etcd_members import (
    CutShortError,
    MemberConnections,
    RequestObserver,
    rpc_status,
    store_error,
    translated,
)
from yak.metadata.store import Watch, WatchEvent

__all__ = [
    "EtcdWatch",
    "Liveness",
    "StreamLiveness",
    "WatchProbe",
    "WatchReply",
    "WatchStream",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WatchProbe:
    """When a quiet watch stream is asked for progress (``interval_s`` after the last thing it
    delivered), and how long the answer may take before the stream counts as silent.
    ``interval_s`` 0 turns the probe off (the HTTP/2 keepalive alone then watches the
    connection)."""

    interval_s: float = 2.0
    timeout_s: float = 3.0


class Liveness(enum.Enum):
    """What a ``StreamLiveness`` says to do now."""

    WAIT = "wait"
    PROBE = "probe"
    SILENT = "silent"


class StreamLiveness:
    """Whether a stream is alive, from when it last delivered something (pure; times are any
    monotonic clock's seconds).

    Anything heard resets it. Quiet for ``interval_s``: ``PROBE`` (send a progress request,
    then call ``probed``). Still nothing ``timeout_s`` after the probe: ``SILENT``."""

    def __init__(self, probe: WatchProbe, now: float) -> None:
        self._probe = probe
        self._heard_at = now
        self._probed_at: float | None = None

    def heard(self, now: float) -> None:
        self._heard_at = now
        self._probed_at = None

    def probed(self, now: float) -> None:
        self._probed_at = now

    def next_check(self) -> float:
        """When ``due`` may next say something other than ``WAIT`` (``inf``: never)."""
        if self._probe.interval_s <= 0:
            return math.inf
        if self._probed_at is not None:
            return self._probed_at + self._probe.timeout_s
        return self._heard_at + self._probe.interval_s

    def due(self, now: float) -> Liveness:
        if now < self.next_check():
            return Liveness.WAIT
        return Liveness.PROBE if self._probed_at is None else Liveness.SILENT


@dataclass(frozen=True, slots=True)
class WatchReply:
    """One response of etcd's Watch stream, in Yak's terms."""

    #: The response header's revision (the member's store revision when it was sent).
    revision: int
    events: tuple[WatchEvent, ...] = ()
    created: bool = False
    canceled: bool = False
    cancel_reason: str = ""
    compact_revision: int = 0
    #: The answer to a progress request (etcd's watch id -1): liveness only.
    progress_answer: bool = False


class WatchStream(Protocol):
    """One gRPC Watch stream, as the adapter speaks it. Reads and writes may overlap (one of
    each at a time); a failure raises gRPC's errors, ``asyncio.CancelledError`` when the
    stream's channel was closed under it."""

    async def create(self, prefix: bytes, start_revision: int) -> None:
        """Ask for a watcher of every key under ``prefix`` from ``start_revision`` (0: now)."""

    async def request_progress(self) -> None: ...

    async def read(self) -> WatchReply | None:
        """The next response; None when etcd ended the stream."""

    def cancel(self) -> None: ...


class SilentStreamError(TimeoutError):
    """A stream answered nothing, not even a progress request, within the probe's timeout
    (a timeout: the member counts as unreachable)."""


class _StreamEndedError(Exception):
    """etcd ended a watch stream without an error (a member shutting down)."""


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned read's outcome so that asyncio does not report it."""
    if not future.cancelled():
        future.exception()


class EtcdWatch(Watch):
    """One prefix watch on etcd; resumed on the next member, probed when quiet (module doc).

    ``open_stream`` starts a Watch call on a member's connection; ``registry`` holds the open
    watches of the store (which aborts them when it closes)."""

    def __init__(
        self,
        prefix: bytes,
        start: int | None,
        *,
        members: MemberConnections[Any],
        open_stream: Callable[[Any], WatchStream],
        registry: MutableSet[EtcdWatch],
        timeout_s: float,
        probe: WatchProbe,
        observer: RequestObserver | None = None,
    ) -> None:
        super().__init__(prefix, start)
        self._members = members
        self._open_call = open_stream
        self._registry = registry
        self._timeout_s = timeout_s
        self._probe = probe
        self._observer = observer
        self._stream: WatchStream | None = None
        self._conn: Any = None
        #: Where a resumed stream starts: after the last revision delivered (None: "now").
        self._next_revision = self.start_revision
        self._reader: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        created = await self._open_stream()
        self._registry.add(self)
        if self._handle_created(created):
            self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _stop(self) -> None:
        self._registry.discard(self)
        # Cancel the gRPC call first: it ends the reader's pending read(). Cancelling only the
        # reader task could leave it parked inside grpc's read for good (seen as a CLI that
        # never exits), so its end is awaited with a bound.
        if self._stream is not None:
            self._stream.cancel()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.wait([reader], timeout=self._timeout_s)

    async def abort(self, error: MetadataStoreError) -> None:
        """End the stream with ``error`` and release it (the store is closing)."""
        self._finish(error)
        await self._stop()

    async def _open_stream(self) -> WatchReply | None:
        """A stream from ``_next_revision`` on the store's member, trying each member once;
        its first response. Raises ``MetadataStoreError`` only."""
        try:
            with translated("watch", self._observer):
                return await self._members.call(self._create_on, idempotent=True)
        except MetadataStoreError:
            raise
        except Exception as exc:  # a gRPC usage or state error: a channel closed under it
            raise MetadataStoreError(f"etcd watch failed: {exc!r}") from exc

    async def _create_on(self, conn: Any) -> WatchReply | None:
        stream = self._open_call(conn)
        try:
            # The request too is bounded: its write waits for a connection to the member.
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
            # arrives as the read completes, leaving the caller running after stop().
            async with asyncio.timeout(self._timeout_s):
                await stream.create(self.prefix, self._next_revision or 0)
                created = await stream.read()
        except BaseException:
            stream.cancel()
            raise
        self._stream, self._conn = stream, conn
        if self._next_revision is None and created is not None:
            self._next_revision = created.revision + 1  # "now" as of the creation
        return created

    async def _read(self) -> None:
        while True:
            stream = self._stream
            assert stream is not None
            try:
                await self._follow(stream)
                return
            except asyncio.CancelledError:
                if _cancelling():
                    raise  # the watch is stopping
                failure: BaseException = CutShortError()  # the store left this member
            except (AioRpcError, _StreamEndedError, TimeoutError) as exc:
                failure = exc
            except Exception as exc:
                logger.exception("watch on %r failed", self.prefix)
                stream.cancel()
                self._finish(MetadataStoreError(f"etcd watch failed: {exc!r}"))
                return
            stream.cancel()
            if not await self._resumed(failure):
                return

    async def _follow(self, stream: WatchStream) -> None:
        """Deliver what ``stream`` sends until the watch ends; raise when the stream fails
        (``SilentStreamError`` when it stops answering)."""
        loop = asyncio.get_running_loop()
        liveness = StreamLiveness(self._probe, loop.time())
        reading: asyncio.Future[WatchReply | None] | None = None
        try:
            while True:
                if reading is None:
                    reading = asyncio.ensure_future(stream.read())
                wait = liveness.next_check() - loop.time()
                done, _ = await asyncio.wait(
                    (reading,), timeout=None if math.isinf(wait) else max(wait, 0.0)
                )
                if done:
                    reply, reading = reading.result(), None
                    liveness.heard(loop.time())
                    if not self._handle(reply):
                        return
                    continue
                verdict = liveness.due(loop.time())
                if verdict is Liveness.PROBE:
                    await self._request_progress(stream)
                    liveness.probed(loop.time())
                elif verdict is Liveness.SILENT:
                    raise SilentStreamError(
                        f"no answer for {self._probe.interval_s + self._probe.timeout_s:.1f} s"
                    )
        finally:
            if reading is not None and not reading.done():
                reading.add_done_callback(_consume)
                reading.cancel()

    async def _request_progress(self, stream: WatchStream) -> None:
        try:
            async with asyncio.timeout(self._probe.timeout_s):
                await stream.request_progress()
        except asyncio.InvalidStateError as exc:  # the call is over; its read will say why
            raise _StreamEndedError from exc
        except TimeoutError as exc:
            raise SilentStreamError("a progress request was not taken") from exc

    async def _resumed(self, exc: BaseException) -> bool:
        """Reopen the stream on the next member after ``exc``; False (and the watch ended
        with an error) when there is no other member, or reopening failed."""
        members, conn = self._members, self._conn
        code, _ = rpc_status(exc)
        ended = isinstance(exc, _StreamEndedError)
        if isinstance(exc, SilentStreamError):
            logger.warning(
                "watch on %r: %s answered nothing (%s); leaving it",
                self.prefix,
                conn.endpoint.target,
                exc,
            )
        moved = ended or member_unreachable(code) or not members.is_current(conn)
        if members.closed or members.attempts == 1 or not moved:
            self._finish(
                MetadataStoreError("etcd closed the watch stream")
                if ended
                else store_error("watch", exc)
            )
            return False
        members.move_on(conn)
        try:
            created = await self._open_stream()
        except MetadataStoreError as failed:
            self._finish(failed)
            return False
        logger.info(
            "watch on %r resumed at revision %s on %s",
            self.prefix,
            self._next_revision,
            self._conn.endpoint.target if self._conn is not None else "?",
        )
        return self._handle_created(created)

    def _handle_created(self, created: WatchReply | None) -> bool:
        try:
            return self._handle(created)
        except _StreamEndedError:
            self._finish(MetadataStoreError("etcd closed the watch stream"))
            return False

    def _handle(self, reply: WatchReply | None) -> bool:
        """Deliver one response; False when the stream is over."""
        if reply is None:
            raise _StreamEndedError
        if reply.progress_answer:
            return True  # proof of life, nothing more (module doc)
        if reply.compact_revision:
            self._finish(
                RevisionCompactedError(
                    f"revision {self._next_revision} is compacted "
                    f"(oldest kept: {reply.compact_revision})",
                    compact_revision=reply.compact_revision,
                    start_revision=self._next_revision,
                )
            )
            return False
        for event in reply.events:
            self._push(event)
            self._next_revision = event.mod_revision + 1
        if not reply.events and not reply.created and not reply.canceled:
            # A progress notification: every event up to its revision has been sent.
            self._next_revision = max(self._next_revision or 0, reply.revision + 1)
        if reply.canceled:
            reason = reply.cancel_reason or "no reason given"
            self._finish(MetadataStoreError(f"etcd cancelled the watch: {reason}"))
            return False
        return True
