"""``BrokerClient``: the typed async client of one broker's data plane and JSON endpoints.

Produce and fetch speak the frames of ``yak.protocol.broker_wire`` (JSON header + raw batch
bytes); offsets, delete-records and partitions the models of ``yak.protocol.broker_models``;
scheduled records (delayed delivery) those of ``yak.api.scheduled``.

Errors: per-partition failures come back inside the results (``ProduceResult.error``,
``FetchedPartition.error``: a ``PartitionError``, ``.exception()`` gives the typed error), so a
caller can retry just those partitions; ``produce_one``/``fetch_one`` raise them instead. A
request-level error body ``{"code", "message", "details"}`` raises the typed error of that code
(``yak.errors.error_for_code``: ``InvalidRequestError``, ``MessageTooLargeError`` ...). A broker
that cannot be reached raises ``NetworkError``, a client-side timeout ``KafkaTimeoutError``.
A fetch's HTTP timeout is extended by its ``max_wait_ms``, so long polls never time out early.

Use as ``async with BrokerClient(url) as broker``; one client may serve concurrent tasks.

With ``data_port`` (the broker's internal listener, from its registration) produce and fetch
travel in Kafka's framing over one persistent, pipelined connection
(``yak.clients.broker_connection``) instead of HTTP; the JSON endpoints stay on HTTP.

Produce and fetch — the hot path, also of followers replicating — go through ``httpcore``'s
connection pool directly: httpx's client layer (URL merging, cookies, auth, redirects, event
hooks) cost about a quarter of a follower broker's CPU in the replication benchmark. The JSON
endpoints use httpx. With a custom ``transport`` (tests: an in-process ASGI app) everything
goes through httpx.

Security: ``https://`` URLs are verified with ``tls`` (default: ``ClientTls.from_env()``, i.e.
``YAK_TLS_CA`` and an optional client certificate), and every request carries the cluster
secret (default: ``load_cluster_secret()``, i.e. ``YAK_CLUSTER_SECRET[_FILE]``) when one is
configured, in the ``X-Yak-Cluster-Secret`` header (``yak.security.cluster_secret``).
A request made while serving one carries its ``X-Request-Id`` (``yak.observability``).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import NamedTuple

import httpcore
import httpx
import orjson

from yak.api.scheduled import CancelledSchedule, ScheduledRecords
from yak.api.share_groups import ShareGroupLeaderState
from yak.clients._http import error_from_response, segment
from yak.clients.broker_connection import BrokerConnection
from yak.clients.tls import ClientTls, default_context
from yak.closing import AsyncClosing
from yak.errors import BrokerNotAvailableError, KafkaTimeoutError, NetworkError, YakError
from yak.observability.request_id import propagate_request_id, request_id_header
from yak.protocol import kafka_share as ks
from yak.protocol.broker_models import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsResult,
    EpochEndOffset,
    ListOffsetsResponse,
    LogDirResponse,
    OffsetForLeaderEpoch,
    OffsetResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionsResponse,
)
from yak.protocol.broker_wire import (
    FRAME_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    Buffer,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResult,
    decode_fetch_response,
    decode_produce_response,
    encode_fetch_request,
    encode_produce_request,
)
from yak.security.cluster_secret import CLUSTER_SECRET_HEADER, load_cluster_secret

__all__ = ["BrokerClient"]


class _Reply(NamedTuple):
    status: int
    content_type: str
    content: bytes


class BrokerClient(AsyncClosing):
    """Talks to one broker at ``base_url`` (e.g. ``http://127.0.0.1:9420``)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 10,
        tls: ClientTls | None = None,
        cluster_secret: str | None = None,
        data_port: int | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.data_port = data_port
        self._timeout_s = timeout_s
        tls = tls if tls is not None else ClientTls.from_env()
        context = tls.ssl_context() if tls.configured else None
        secret = cluster_secret if cluster_secret is not None else load_cluster_secret()
        headers = {CLUSTER_SECRET_HEADER: secret} if secret else {}
        self._headers = [(k.encode(), v.encode()) for k, v in headers.items()]
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout_s,
            transport=transport,
            headers=headers,
            verify=context if context is not None else default_context(),
            event_hooks={"request": [propagate_request_id]},
        )
        self._pool = (
            httpcore.AsyncConnectionPool(max_connections=max_connections, ssl_context=context)
            if transport is None
            else None
        )
        self._connection: BrokerConnection | None = None
        if data_port is not None:
            url = httpx.URL(self.base_url)
            # The internal listener has TLS when the HTTP one has (the same certificate).
            secure = url.scheme == "https"
            self._connection = BrokerConnection(
                url.host,
                data_port,
                ssl_context=(context or ssl.create_default_context()) if secure else None,
                cluster_secret=secret or None,
            )

    async def aclose(self) -> None:
        if self._connection is not None:
            await self._connection.aclose()
        await self._http.aclose()
        if self._pool is not None:
            await self._pool.aclose()

    # --- data plane ------------------------------------------------------------------------

    async def produce(
        self, partitions: Sequence[ProducePartition], *, acks: int = 1, timeout_ms: int = 30_000
    ) -> tuple[ProduceResult, ...]:
        """Append batches to several partitions; one result each (none for ``acks=0``)."""
        request = ProduceRequest(tuple(partitions), acks, timeout_ms)
        if self._connection is not None:
            return await self._connection.produce(request, self._timeout_s + timeout_ms / 1000)
        body = encode_produce_request(request)
        reply = await self._post(
            "/v1/produce", body, FRAME_CONTENT_TYPE, self._timeout_s + timeout_ms / 1000
        )
        if reply.status == 204:
            return ()
        if reply.status == 200 or _reply_has_results(reply):
            return decode_produce_response(reply.content)
        raise self._reply_error("/v1/produce", reply)

    async def produce_one(
        self, topic: str, partition: int, records: Buffer, *, acks: int = 1
    ) -> ProduceResult:
        """Append to one partition; raises its typed error if it failed."""
        results = await self.produce([ProducePartition(topic, partition, records)], acks=acks)
        if not results:
            return ProduceResult(topic, partition)
        result = results[0]
        if result.error is not None:
            raise result.error.exception()
        return result

    async def fetch(self, request: FetchRequest) -> tuple[FetchedPartition, ...]:
        """A (long-polling) fetch; ``records`` of each partition are whole batches."""
        if self._connection is not None:
            return await self._connection.fetch(
                request, self._timeout_s + request.max_wait_ms / 1000
            )
        reply = await self._post(
            "/v1/fetch",
            encode_fetch_request(request),
            JSON_CONTENT_TYPE,
            self._timeout_s + request.max_wait_ms / 1000,
        )
        if reply.content_type.startswith(FRAME_CONTENT_TYPE):
            return decode_fetch_response(reply.content)
        raise self._reply_error("/v1/fetch", reply)

    async def fetch_session(self, request: FetchRequest) -> FetchResponse:
        """A follower's fetch in an incremental fetch session (KIP-227), with the answer's
        session id and request-level error code. Over HTTP (a broker without an internal
        listener) the fetch is sessionless: the answer's ``session_id`` 0 says so."""
        if self._connection is not None:
            return await self._connection.fetch_session(
                request, self._timeout_s + request.max_wait_ms / 1000
            )
        sessionless = request._replace(session_id=0, session_epoch=-1, forgotten=())
        return FetchResponse(await self.fetch(sessionless))

    async def share_fetch(self, request: ks.ShareFetchRequest) -> ks.ShareFetchResponse:
        """Acquire records of a share group at this broker (KIP-932's ShareFetch), long-polling
        up to ``request.max_wait_ms``. Share groups live on the internal plane only: a broker
        without an internal listener (``data_port``) cannot serve them."""
        return await self._internal("ShareFetch").share_fetch(
            request, self._timeout_s + request.max_wait_ms / 1000
        )

    async def share_acknowledge(
        self, request: ks.ShareAcknowledgeRequest
    ) -> tuple[ks.AckResult, ...]:
        """Accept, release, reject or renew acquired records (KIP-932's ShareAcknowledge)."""
        return await self._internal("ShareAcknowledge").share_acknowledge(request, self._timeout_s)

    def _internal(self, what: str) -> BrokerConnection:
        if self._connection is None:
            raise BrokerNotAvailableError(
                f"{what} needs the broker's internal listener; {self.base_url} advertises none"
            )
        return self._connection

    async def fetch_one(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1024 * 1024,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
    ) -> FetchedPartition:
        """Fetch one partition; raises its typed error if it failed."""
        request = FetchRequest(
            (FetchPartition(topic, partition, offset, max_bytes),),
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
        )
        (result,) = await self.fetch(request)
        if result.error is not None:
            raise result.error.exception()
        return result

    # --- JSON endpoints ----------------------------------------------------------------------

    async def list_offsets(
        self, partitions: Sequence[tuple[str, int]], timestamp: int | str = "latest"
    ) -> list[OffsetResult]:
        """ListOffsets: ``timestamp`` is ``earliest``/``latest`` (or -2/-1) or ms."""
        named = {-1: "latest", -2: "earliest"}
        stamp = named.get(timestamp, str(timestamp)) if isinstance(timestamp, int) else timestamp
        params = [("partition", f"{topic}:{p}") for topic, p in partitions]
        params.append(("timestamp", stamp))
        response = await self._send("GET", "/v1/offsets", params=httpx.QueryParams(tuple(params)))
        return ListOffsetsResponse.model_validate_json(_ok(response).content).partitions

    async def delete_records(
        self, partitions: Sequence[DeleteRecordsPartition]
    ) -> list[DeleteRecordsResult]:
        body = DeleteRecordsRequest(partitions=list(partitions)).model_dump_json()
        response = await self._send(
            "POST", "/v1/delete-records", content=body, headers={"content-type": JSON_CONTENT_TYPE}
        )
        return DeleteRecordsResponse.model_validate_json(_ok(response).content).partitions

    async def offsets_for_leader_epoch(
        self, partitions: Sequence[OffsetForLeaderEpoch], *, replica_id: int = -1
    ) -> list[EpochEndOffset]:
        """Where each asked leader epoch ends on this (leader) broker (KIP-101/279)."""
        request = OffsetsForLeaderEpochRequest(replica_id=replica_id, partitions=list(partitions))
        response = await self._send(
            "POST",
            "/v1/offsets-for-leader-epoch",
            content=request.model_dump_json(),
            headers={"content-type": JSON_CONTENT_TYPE},
        )
        return OffsetsForLeaderEpochResponse.model_validate_json(_ok(response).content).partitions

    async def partitions(self, topics: Sequence[str] | None = None) -> PartitionsResponse:
        """The replicas hosted there (of ``topics`` only, when given)."""
        params = httpx.QueryParams([("topic", t) for t in topics]) if topics else None
        response = await self._send("GET", "/v1/partitions", params=params)
        return PartitionsResponse.model_validate_json(_ok(response).content)

    async def log_dir(self) -> LogDirResponse:
        """The data folder's usage and the hosted replicas summed per topic."""
        response = await self._send("GET", "/v1/log-dir")
        return LogDirResponse.model_validate_json(_ok(response).content)

    async def share_group_state(
        self, group: str, topics: Sequence[str] = ()
    ) -> ShareGroupLeaderState:
        """``group``'s share-partitions this broker leads (and its led partitions of ``topics``,
        reported not loaded) and its counters here; ``GroupIdNotFoundError`` for a group the
        broker does not know."""
        params = httpx.QueryParams([("topic", t) for t in topics]) if topics else None
        response = await self._send("GET", f"/v1/share-groups/{segment(group)}", params=params)
        return ShareGroupLeaderState.model_validate_json(_ok(response).content)

    async def list_scheduled(
        self,
        topic: str,
        partition: int,
        *,
        after_ms: int | None = None,
        after_offset: int = -1,
        limit: int = 100,
    ) -> ScheduledRecords:
        """A page of the partition's pending scheduled records, in due order (at its leader;
        ``after_ms`` None: those not due yet)."""
        params: dict[str, str | int] = {"after_offset": after_offset, "limit": limit}
        if after_ms is not None:
            params["after_ms"] = after_ms
        path = f"/v1/scheduled/{segment(topic)}/{partition}"
        response = await self._send("GET", path, params=httpx.QueryParams(params))
        return ScheduledRecords.model_validate_json(_ok(response).content)

    async def cancel_scheduled(
        self, topic: str, partition: int, offset: int, *, timeout_s: float | None = None
    ) -> CancelledSchedule:
        """Cancel the schedule of the record at ``offset`` (at the partition's leader)."""
        path = f"/v1/scheduled/{segment(topic)}/{partition}/{offset}"
        response = await self._send("DELETE", path, timeout_s=timeout_s)
        return CancelledSchedule.model_validate_json(_ok(response).content)

    # --- plumbing ------------------------------------------------------------------------

    async def _post(self, path: str, body: bytes, content_type: str, timeout_s: float) -> _Reply:
        """POST on the hot path: httpcore directly (see the module doc), else httpx."""
        if self._pool is None:
            response = await self._send(
                "POST",
                path,
                content=body,
                headers={"content-type": content_type},
                timeout_s=timeout_s,
            )
            kind = response.headers.get("content-type", "")
            return _Reply(response.status_code, kind, response.content)
        url = self.base_url + path
        timeouts = {"connect": 10.0, "read": timeout_s, "write": timeout_s, "pool": timeout_s}
        headers = [(b"content-type", content_type.encode()), *self._headers]
        request_id = request_id_header()
        if request_id is not None:
            headers.append(request_id)
        try:
            raw = await self._pool.request(
                "POST",
                url,
                headers=headers,
                content=body,
                extensions={"timeout": timeouts},
            )
        except httpcore.TimeoutException as exc:
            raise KafkaTimeoutError(f"POST {url} timed out") from exc
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise NetworkError(
                f"cannot reach the broker at {self.base_url}: {exc or type(exc).__name__}"
            ) from exc
        kind = next((v for k, v in raw.headers if k.lower() == b"content-type"), b"")
        return _Reply(raw.status, kind.decode("latin-1"), raw.content)

    def _reply_error(self, path: str, reply: _Reply) -> YakError:
        response = httpx.Response(
            reply.status,
            headers={"content-type": reply.content_type},
            content=reply.content,
            request=httpx.Request("POST", self.base_url + path),
        )
        return error_from_response(response)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        content: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        params: httpx.QueryParams | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        try:
            return await self._http.request(
                method,
                path,
                content=content,
                headers=headers,
                params=params,
                timeout=timeout_s if timeout_s is not None else self._timeout_s,
            )
        except httpx.TimeoutException as exc:
            raise KafkaTimeoutError(f"{method} {self.base_url}{path} timed out") from exc
        except httpx.TransportError as exc:
            raise NetworkError(
                f"cannot reach the broker at {self.base_url}: {exc or type(exc).__name__}"
            ) from exc


def _reply_has_results(reply: _Reply) -> bool:
    """Whether an error status carries per-partition results (every partition failed)."""
    if not reply.content_type.startswith(JSON_CONTENT_TYPE):
        return False
    try:
        body = orjson.loads(reply.content)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and "partitions" in body


def _ok(response: httpx.Response) -> httpx.Response:
    if response.is_error:
        raise error_from_response(response)
    return response
