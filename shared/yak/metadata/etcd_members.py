"""The etcd member a store talks to, the move to the next one when it fails, gRPC's errors
as Yak's.

``MemberConnections`` holds one connection at a time, to one of the endpoints a store was
given (``yak.metadata.etcd_endpoints``). When a call finds that member down, unreachable,
leaderless or silent past its deadline, the connection is retired (its channel closed, which
also ends the streams on it) and the next call connects to the next member, in order, round
and round. The move happens once per connection, however many calls saw the failure at once
(a call compares the connection it used with the current one). The failed call itself is sent
again to the next member when that cannot apply a write twice (``safe_to_retry``), each member
at most once; otherwise it fails like any etcd failure and the caller's own retry reaches the
new member. With a single endpoint nothing moves: gRPC reconnects to it by itself.

A connection authenticates (when a user is configured) before its first call, and again when
etcd says its token is unknown (simple tokens expire after 5 idle minutes).

The connection type is the adapter's (``etcd_store._Connection``): this module knows gRPC, not
the etcd client package, which only the adapter imports.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import grpc
from grpc.aio import AioRpcError

from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.etcd_endpoints import (
    EtcdEndpoint,
    member_unreachable,
    safe_to_retry,
    token_expired,
)
from yak.metadata.store import LeaseExpiredError

__all__ = [
    "CutShortError",
    "Member",
    "MemberConnections",
    "RequestObserver",
    "etcd_tls_credentials",
    "rpc_status",
    "store_error",
    "translated",
]

logger = logging.getLogger(__name__)

#: Told of every call: operation, seconds, whether it succeeded (``yak.observability``).
RequestObserver = Callable[[str, float, bool], None]


class CutShortError(Exception):
    """A call or stream ended because its channel was closed under it (its member was left)."""


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def rpc_status(exc: BaseException) -> tuple[grpc.StatusCode | None, str]:
    """A failure's gRPC code and details (a local timeout counts as a missed deadline; a call
    cut short by a closed channel as cancelled)."""
    if isinstance(exc, CutShortError):
        return grpc.StatusCode.CANCELLED, "cut short: the channel was closed"
    if isinstance(exc, AioRpcError):
        return exc.code(), exc.details() or ""
    if isinstance(exc, TimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, "timed out"
    return None, repr(exc)


def store_error(operation: str, exc: BaseException) -> MetadataStoreError:
    """Translate a gRPC failure into Yak's error for it."""
    if isinstance(exc, AioRpcError):
        status, details = exc.code(), exc.details() or ""
        if "compacted" in details:
            return RevisionCompactedError(f"etcd {operation}: {details}", grpc_status=status.name)
        if "lease not found" in details:
            return LeaseExpiredError(f"etcd {operation}: {details}", grpc_status=status.name)
        return MetadataStoreError(
            f"etcd {operation} failed ({status.name}): {details}", grpc_status=status.name
        )
    return MetadataStoreError(f"etcd {operation} failed: {exc!r}")


@contextmanager
def translated(operation: str, observer: RequestObserver | None = None) -> Iterator[None]:
    """gRPC failures inside become ``MetadataStoreError``; ``observer`` is told the call."""
    start = time.perf_counter()
    ok = False
    try:
        yield
        ok = True
    except (TimeoutError, AioRpcError, OSError) as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # grpc turns a cancellation that lands inside a call into an RPC error; passing
            # that on as a MetadataStoreError would let a retry loop swallow the cancel.
            raise asyncio.CancelledError from exc
        if isinstance(exc, TimeoutError):
            raise MetadataStoreError(f"etcd {operation} timed out") from exc
        raise store_error(operation, exc) from exc
    finally:
        if observer is not None:
            observer(operation, time.perf_counter() - start, ok)


def etcd_tls_credentials(
    ca_file: str | None, cert_file: str | None = None, key_file: str | None = None
) -> Any:
    """gRPC channel credentials: trust ``ca_file``, present ``cert_file``/``key_file``."""

    def read(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    if (cert_file is None) != (key_file is None):
        raise ValueError("YAK_ETCD_CERT and YAK_ETCD_KEY go together")
    return grpc.ssl_channel_credentials(read(ca_file), read(key_file), read(cert_file))


class Member(Protocol):
    """A connection to one member (the adapter's channel and stubs)."""

    endpoint: EtcdEndpoint
    #: Authenticated (or nothing to authenticate): calls may go.
    ready: bool

    async def authenticate(self, username: str, password: str, timeout_s: float) -> None: ...

    async def close(self) -> None: ...


M = TypeVar("M", bound=Member)


def _unauthenticated(conn: Member) -> bool:
    return not conn.ready


T = TypeVar("T")


class MemberConnections(Generic[M]):
    """The connection to the member in use, and the move to the next (module doc)."""

    def __init__(
        self,
        endpoints: Sequence[EtcdEndpoint],
        connect: Callable[[EtcdEndpoint], M],
        *,
        username: str | None,
        password: str | None,
        timeout_s: float,
    ) -> None:
        if not endpoints:
            raise ValueError("give at least one etcd endpoint")
        if (username is None) != (password is None):
            raise ValueError("an etcd user needs a password, and a password a user")
        self.endpoints = tuple(endpoints)
        self._connect = connect
        self._username = username
        self._password = password
        self._timeout_s = timeout_s
        self._index = 0
        self._conn: M | None = None
        self._auth_lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()
        self.closed = False

    @property
    def endpoint(self) -> EtcdEndpoint:
        """The member in use (or to be used by the next call)."""
        return self.endpoints[self._index]

    @property
    def attempts(self) -> int:
        """How many members a call may try: each one once."""
        return len(self.endpoints)

    def current(self) -> M:
        """The connection to the member in use (made on first use, inside the loop)."""
        if self.closed:
            raise MetadataStoreError("the metadata store is closed")
        if self._conn is None:
            self._conn = self._connect(self.endpoint)
        return self._conn

    def is_current(self, conn: M) -> bool:
        return conn is self._conn

    async def authenticated(self, conn: M) -> None:
        """Authenticate ``conn`` once (when a user is configured) before its first call."""
        if conn.ready:
            return
        async with self._auth_lock:
            if _unauthenticated(conn):  # another task may have done it meanwhile
                if self._username is not None and self._password is not None:
                    await conn.authenticate(self._username, self._password, self._timeout_s)
                conn.ready = True

    def move_on(self, conn: M) -> None:
        """Leave ``conn``'s member for the next one (once per connection; not with one)."""
        if conn is not self._conn or len(self.endpoints) == 1:
            return
        self._index = (self._index + 1) % len(self.endpoints)
        self._conn = None
        self._retire(conn)
        logger.warning(
            "etcd member %s is not answering; moving to %s",
            conn.endpoint.target,
            self.endpoint.target,
        )

    def retry_after(self, conn: M, exc: BaseException, *, idempotent: bool) -> bool:
        """After ``exc`` on ``conn``: move on if its member failed, and say whether the call
        may be sent again."""
        if _cancelling():
            return False  # the caller is cancelled: never retry its call
        code, details = rpc_status(exc)
        if token_expired(code, details):
            conn.ready = False  # authenticate again on the same member
            return True
        # Cut short because another call moved on and closed this connection's channel.
        retired = conn is not self._conn and code == grpc.StatusCode.CANCELLED
        if member_unreachable(code):
            self.move_on(conn)
        if len(self.endpoints) == 1:
            return False
        if retired:
            return idempotent
        return safe_to_retry(code, details, idempotent=idempotent)

    async def call(self, send: Callable[[M], Awaitable[T]], *, idempotent: bool) -> T:
        """``send`` on the member in use, again on the next ones while ``retry_after``
        allows (each member at most once, plus one re-authentication). Raises what the last
        attempt raised (``AioRpcError``, ``TimeoutError``), or ``MetadataStoreError`` when
        the call was cut short by a move to another member and may not be sent again."""
        attempts = self.attempts + 1
        for attempt in range(attempts):
            conn = self.current()
            try:
                await self.authenticated(conn)
                return await send(conn)
            except (AioRpcError, TimeoutError) as exc:
                if attempt + 1 == attempts or not self.retry_after(
                    conn, exc, idempotent=idempotent
                ):
                    raise
            except asyncio.CancelledError:
                # gRPC cancels the calls of a channel that is closed: a move to another
                # member (or ``aclose``) cut this one short. Only a cancelled task goes on
                # as cancelled.
                if _cancelling() or self.closed:
                    raise
                cut = CutShortError()
                if attempt + 1 == attempts or not self.retry_after(
                    conn, cut, idempotent=idempotent
                ):
                    raise MetadataStoreError(
                        f"etcd call cut short: left member {conn.endpoint.target}"
                    ) from None
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``MetadataStoreError``."""
        self.closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            self._retire(conn)
        if self._retiring:  # a stuck channel must not keep a process alive
            await asyncio.wait(list(self._retiring), timeout=self._timeout_s)

    def _retire(self, conn: M) -> None:
        task = asyncio.get_running_loop().create_task(conn.close())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
