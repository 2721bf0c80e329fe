"""``Idempotency-Key`` on the simple produce routes: a retry gets the first answer, on any proxy.

The header (draft-ietf-httpapi-idempotency-key-header; a Structured Field string, quotes
optional as Stripe sends it, 1-255 visible ASCII characters) names one request of the
principal's. The routes call ``Idempotency.once`` with the read body once the header is there;
without it nothing here runs and no etcd request is made. With it, one key's life, in the
shared record of ``yak.metadata.idempotency_records`` (etcd, so every proxy sees it):

1. **Reserve**: one txn writes a *pending* record if the key has none (else reads it).
2. Reserved: the route's work runs. An answer (records sent, whatever their outcome) is
   written as the *done* record and returned; a typed error raised before anything was sent
   (unknown topic, a refused body, a quota) deletes the reservation and propagates, so the
   same key may be sent again. That is two etcd writes per keyed request.
3. Found *done* with the same fingerprint (method, path, query, Content-Type, body): the
   stored answer, with ``Idempotent-Replayed: true``, and nothing is sent. Another
   fingerprint: ``IdempotencyKeyReusedError`` (422). Found *pending*:
   ``IdempotencyKeyInUseError`` (409, retriable) — unless its deadline (the delivery timeout
   and a margin after it was written) is past: the proxy that wrote it is gone, and this one
   takes the key over with a compare on the record's mod revision.

Records live under leases of ``window + period`` seconds (``period`` = window / 24, at least
1 s), one lease per period per proxy, so a record is kept for at least the window and at most
1/24 longer, for one lease grant an hour with the default 24-hour window.

Limits, stated in docs/decisions.md: a proxy that dies after sending and before writing the
answer leaves a pending record that a retry takes over after its deadline — and sends again.
Single event loop per proxy; any number of proxies at once (etcd's txns decide).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Header
from starlette.requests import Request
from starlette.responses import Response

from yak.clock import Clock
from yak.errors import (
    IdempotencyKeyInUseError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    MetadataStoreError,
    YakError,
)
from yak.metadata.idempotency_records import IdempotencyRecord, idempotency_key
from yak.metadata.keyspace import Keyspace
from yak.metadata.store import (
    Compare,
    DeleteOp,
    GetOp,
    GetResponse,
    LeaseExpiredError,
    MetadataStore,
    Op,
    PutOp,
    TxnResult,
)

__all__ = [
    "IDEMPOTENCY_KEY",
    "REPLAYED",
    "Idempotency",
    "IdempotencyKeyHeader",
    "fingerprint",
    "idempotency_header",
    "parse_key",
]

log = logging.getLogger(__name__)

IDEMPOTENCY_KEY = "idempotency-key"
_HEADER_BYTES = IDEMPOTENCY_KEY.encode()
#: Set on a replayed answer (Stripe's name).
REPLAYED = "Idempotent-Replayed"
_MAX_KEY = 255
#: After the delivery timeout, how much longer a pending record is honoured.
_DEADLINE_MARGIN_MS = 5_000


#: The header as the routes declare it for the OpenAPI document (they read it from the scope:
#: the fast lane serves the native route without FastAPI's parameters).
IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=r"^[ -~]{1,257}$",
        description=(
            "A retry with the same key and request gets the first answer, from any proxy, "
            "within YAK_IDEMPOTENCY_WINDOW_S (docs/rest-api.md#idempotency-key); 1-255 "
            "visible ASCII characters, quotes optional."
        ),
    ),
]


def idempotency_header(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` value, read from the raw scope (the hot path's way)."""
    for name, value in request.scope["headers"]:
        if name == _HEADER_BYTES:
            return str(value.decode("latin-1"))
    return None


def parse_key(value: str) -> str:
    """The key in an ``Idempotency-Key`` header value; InvalidRequestError if malformed."""
    key = value.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 1 <= len(key) <= _MAX_KEY or not all(" " <= c <= "~" for c in key):
        raise InvalidRequestError(
            f"Idempotency-Key must be 1-{_MAX_KEY} visible ASCII characters",
            kind="invalid_data",
        )
    return key


def fingerprint(request: Request, body: bytes) -> str:
    """What makes two requests "the same": method, path, query, Content-Type and body."""
    digest = hashlib.sha256()
    for part in (
        request.method.encode(),
        request.url.path.encode(),
        request.scope.get("query_string", b""),
        request.headers.get("content-type", "").encode("latin-1"),
    ):
        digest.update(part)
        digest.update(b"\0")
    digest.update(body)
    return digest.hexdigest()


class Idempotency:
    """One proxy's side of the shared records; see the module docstring."""

    def __init__(
        self,
        store: MetadataStore,
        keyspace: Keyspace,
        clock: Clock,
        *,
        window_s: int,
        work_timeout_ms: int,
    ) -> None:
        self._store = store
        self._keyspace = keyspace
        self._clock = clock
        self.window_s = window_s
        self._period_s = max(1, window_s // 24)
        self._work_timeout_ms = work_timeout_ms
        self._lease: tuple[int, float] | None = None  # (id, monotonic end of its period)
        self._lease_lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return self.window_s > 0

    async def _current_lease(self) -> int:
        async with self._lease_lock:
            now = self._clock.monotonic()
            if self._lease is None or now >= self._lease[1]:
                lease = await self._store.grant_lease(self.window_s + self._period_s)
                self._lease = (lease, now + self._period_s)
            return self._lease[0]

    async def _put(
        self, compares: list[Compare], key: str, value: bytes, on_failure: list[Op] | None = None
    ) -> TxnResult:
        """A txn putting ``value`` under the current lease; once more with a new lease if that
        one is gone (etcd restored from a backup, or the lease revoked by hand)."""
        lease = await self._current_lease()
        try:
            return await self._store.txn(compares, [PutOp(key, value, lease)], on_failure or [])
        except LeaseExpiredError:
            if self._lease is not None and self._lease[0] == lease:
                self._lease = None
        lease = await self._current_lease()
        return await self._store.txn(compares, [PutOp(key, value, lease)], on_failure or [])

    async def once(
        self,
        principal: str,
        header: str,
        print_: str,
        work: Callable[[], Awaitable[Response]],
    ) -> Response:
        """``work()``'s answer, or the answer the first request with this key got."""
        key = idempotency_key(self._keyspace, principal, parse_key(header))
        pending = IdempotencyRecord.pending(
            print_, self._clock.time_ms() + self._work_timeout_ms + _DEADLINE_MARGIN_MS
        ).encode()
        reserved = await self._put([Compare.absent(key)], key, pending, [GetOp(key)])
        revision = reserved.revision
        if not reserved.succeeded:
            found = reserved.responses[0]
            assert isinstance(found, GetResponse)
            if not found.kvs:  # expired between the compare and the read: go again
                return await self.once(principal, header, print_, work)
            kv = found.kvs[0]
            replay = await self._found(key, kv.value, kv.mod_revision, print_, pending)
            if isinstance(replay, Response):
                return replay
            revision = replay
        return await self._run(key, revision, print_, work)

    async def _found(
        self, key: str, raw: bytes, mod_revision: int, print_: str, pending: bytes
    ) -> Response | int:
        """The stored answer to replay, or the revision of this proxy's takeover."""
        record = IdempotencyRecord.decode(raw)
        if record.fingerprint != print_:
            raise IdempotencyKeyReusedError(
                "this Idempotency-Key was used for another request (body, path or query); "
                "use a new key for a new request"
            )
        if record.state == "done":
            headers = {REPLAYED: "true"}
            return Response(record.body, record.status, headers, media_type=record.media_type)
        if self._clock.time_ms() < record.deadline_ms:
            raise IdempotencyKeyInUseError(
                "the first request with this Idempotency-Key is still being served; retry",
                retry_after_s=1,
            )
        taken = await self._put([Compare.mod_revision(key, mod_revision)], key, pending)
        if not taken.succeeded:
            raise IdempotencyKeyInUseError(
                "another request took this Idempotency-Key over just now; retry", retry_after_s=1
            )
        log.warning("idempotency key %s: its first proxy gave up, taken over", key)
        return taken.revision

    async def _run(
        self, key: str, revision: int, print_: str, work: Callable[[], Awaitable[Response]]
    ) -> Response:
        ours = Compare.mod_revision(key, revision)
        try:
            response = await work()
        except YakError:
            try:  # nothing was sent: free the key for a corrected retry
                await self._store.txn([ours], [DeleteOp(key)])
            except MetadataStoreError:
                log.warning("idempotency key %s: the reservation stays", key, exc_info=True)
            raise
        done = IdempotencyRecord.done(
            print_, response.status_code, response.media_type or "", bytes(response.body)
        )
        try:
            await self._put([ours], key, done.encode())
        except MetadataStoreError:
            log.warning("idempotency key %s: the answer was not recorded", key, exc_info=True)
        return response
