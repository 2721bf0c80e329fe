"""The broker's internal listener: produce and fetch in Kafka's framing on persistent connections.

The rest-proxies' producers and readers and the followers replicating from this broker keep one
TCP connection (or a few) open here instead of one HTTP/1.1 exchange per request. Messages are
Kafka's (``yak.protocol.kafka_wire``): Produce v9, Fetch v12, ShareFetch v1 and ShareAcknowledge
v1 (``yak.protocol.kafka_share``, served by the share manager: ``share.share_requests``), and
SaslHandshake v1 +
SaslAuthenticate v2 when a cluster secret is configured. The port is ``data_port`` (0: one the
system picks), advertised in the broker's registration (``BrokerRegistration.data_port``); TLS
when the broker's HTTP listener has it (the same certificate).

Per connection:

- **Requests are served concurrently**, each in a task of its own, and answered as they
  complete, matched by correlation id: a parked long-poll fetch never holds back a produce on
  the same connection. Within one partition, appends keep arrival order (nothing in the append
  path awaits before the log write).
- **Authentication**: with a cluster secret, the first requests must be SaslHandshake
  (mechanism ``PLAIN``) and SaslAuthenticate with the secret as the password; anything else,
  or a wrong secret, closes the connection (Kafka closes it too).
- **Errors**: a malformed request gets a request-level error (``INVALID_REQUEST``) in its
  response header and nothing of it is applied; a frame larger than ``max_request_bytes``
  closes the connection, as Kafka does (the stream has no point to resume at); per-partition
  errors travel in the responses.
- **Fetch sessions**: a follower's Fetch with session fields (KIP-227: ``session_id``,
  ``session_epoch``, forgotten topics) is served in its incremental fetch session
  (``server.session_fetcher``), a sessionless one (a consumer's, ``session_epoch`` -1) as
  before (``server.fetcher``).
- **Back-pressure**: when the socket's send buffer is above its high-water mark the listener
  stops reading further requests from that connection until it drains.

With ``YAK_ACCESS_LOG=true`` each request writes one ``yak.access`` line (method ``KAFKA``,
route ``Produce``/``Fetch``) under the request id the client sent as its client id (the rest-
proxy sends the id of the HTTP request it serves). Metrics are the data plane's
(``BrokerTopicStats``), counted the same way as over HTTP, including the latency budget's
stages (``yak_broker_produce_stage_seconds``: receive, append, replication, answer;
``yak_broker_fetch_stage_seconds``: wait, read).
Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from typing import TYPE_CHECKING, cast

from yak.errors import InvalidRequestError, YakError
from yak.observability.logs import ACCESS_LOGGER, access_log_enabled
from yak.observability.request_id import begin_request, end_request, valid_request_id
from yak.protocol import kafka_sasl as sasl
from yak.protocol import kafka_share as ks
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import Buffer
from yak.security.cluster_secret import secret_matches
from yak_broker.replication.state.fetch_metadata import FINAL_EPOCH
from yak_broker.server.appender import append_partitions
from yak_broker.server.fetcher import serve_fetch
from yak_broker.server.session_fetcher import serve_session_fetch
from yak_broker.share.share_requests import serve_share_acknowledge, serve_share_fetch

if TYPE_CHECKING:
    from yak_broker.server.broker import Broker

__all__ = ["InternalListener"]

_log = logging.getLogger(__name__)
_access_log = logging.getLogger(ACCESS_LOGGER)
_MECHANISM = "PLAIN"
_SASL_AUTHENTICATION_FAILED = 58
_UNSUPPORTED_SASL_MECHANISM = 33


class InternalListener:
    """Accepts the internal plane's connections for one broker."""

    def __init__(self, broker: Broker, ssl_context: ssl.SSLContext | None = None) -> None:
        self._broker = broker
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port); return the port bound."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self._broker, self._connections),
            host,
            port,
            ssl=self._ssl,
            reuse_address=True,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        _log.info("internal listener on %s:%d (Kafka framing)", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop accepting, close every connection and cancel what they were serving."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for connection in list(self._connections):
            connection.abort()
        with contextlib.suppress(Exception):
            await server.wait_closed()


class _Connection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, registry: set[_Connection]) -> None:
        self._broker = broker
        self._registry = registry
        settings = broker.settings
        self._secret = (
            settings.cluster_secret.encode() if settings.cluster_secret is not None else None
        )
        self._handshaken = False
        self._authenticated = self._secret is None
        self._splitter = kw.FrameSplitter(max_bytes=settings.max_request_bytes + 1024)
        self._transport: asyncio.Transport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._paused = False
        self._peer = "?"
        self._access_log = access_log_enabled()

    # --- asyncio.BufferedProtocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._registry.add(self)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._splitter.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._splitter.filled(nbytes)
        except kw.FrameTooLargeError as exc:
            _log.warning("closing the connection of %s: %s", self._peer, exc)
            self.abort()
            return
        for data in frames:
            self._dispatch(data)

    def pause_writing(self) -> None:
        if self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and self._paused:
            self._paused = False
            self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        self._transport = None
        for task in list(self._tasks):
            task.cancel()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # --- requests ---------------------------------------------------------------------------

    def _dispatch(self, data: Buffer) -> None:
        received = time.perf_counter()
        try:
            header, body = kw.decode_request_header(data)
        except InvalidRequestError as exc:
            _log.warning("closing the connection of %s: %s", self._peer, exc)
            self.abort()
            return
        if not self._authenticated:
            self._authenticate(header, body)
            return
        task = asyncio.get_running_loop().create_task(self._serve(header, body, received))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, header: kw.RequestHeader, body: memoryview, received: float) -> None:
        client_id = header.client_id
        scope = None
        if client_id and client_id != "yak" and valid_request_id(client_id):
            scope = begin_request(client_id)
        status = 0
        try:
            try:
                parts = await self._answer(header, body, received)
            except YakError as exc:
                status = exc.kafka_code
                parts = kw.error_response(header.correlation_id, exc)
            if parts and self._transport is not None and not self._transport.is_closing():
                self._transport.writelines(parts)
            if self._access_log:
                _log_access(header, status, time.perf_counter() - received)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("serving a request of %s failed; closing its connection", self._peer)
            self.abort()
        finally:
            if scope is not None:
                end_request(*scope)

    async def _answer(
        self, header: kw.RequestHeader, body: memoryview, received: float
    ) -> list[Buffer]:
        broker = self._broker
        stats = broker.replicas.stats
        key, version, correlation_id = header.api_key, header.api_version, header.correlation_id
        if key == kw.API_PRODUCE and version == kw.PRODUCE_VERSION:
            stats.produce_requests.inc()
            request = kw.decode_produce_request(body)
            # receive: from the whole frame's arrival to a decoded request (the socket read
            # itself is the event loop's, before the frame is complete).
            stats.produce_receive.observe(time.perf_counter() - received)
            results = await append_partitions(request, broker.replicas)
            if request.acks == 0:
                return []
            answering = time.perf_counter()
            parts = kw.encode_produce_response(correlation_id, results)
            stats.produce_answer.observe(time.perf_counter() - answering)
            return parts
        if key == kw.API_FETCH and version == kw.FETCH_VERSION:
            fetch = kw.decode_fetch_request(body)
            limit_ms = broker.settings.max_wait_ms_limit
            if fetch.session_id == 0 and fetch.session_epoch == FINAL_EPOCH:
                partitions = await serve_fetch(fetch, broker.replicas, max_wait_limit_ms=limit_ms)
                return kw.encode_fetch_response(correlation_id, partitions)
            response = await serve_session_fetch(fetch, broker.replicas, max_wait_limit_ms=limit_ms)
            return kw.encode_fetch_response(
                correlation_id,
                response.partitions,
                session_id=response.session_id,
                error_code=response.error_code,
            )
        if key == ks.API_SHARE_FETCH and version == ks.SHARE_FETCH_VERSION:
            share_fetch = ks.decode_share_fetch_request(body)
            answer = await serve_share_fetch(
                broker.shares, share_fetch, max_wait_limit_ms=broker.settings.max_wait_ms_limit
            )
            return ks.encode_share_fetch_response(correlation_id, answer)
        if key == ks.API_SHARE_ACKNOWLEDGE and version == ks.SHARE_ACKNOWLEDGE_VERSION:
            share_ack = ks.decode_share_acknowledge_request(body)
            acked = await serve_share_acknowledge(broker.shares, share_ack)
            return ks.encode_share_acknowledge_response(correlation_id, acked)
        raise InvalidRequestError(
            f"the internal listener does not serve api key {key} version {version}",
            api_key=key,
            api_version=version,
        )

    def _authenticate(self, header: kw.RequestHeader, body: memoryview) -> None:
        transport = self._transport
        if transport is None:
            return
        try:
            if header.api_key == kw.API_SASL_HANDSHAKE and not self._handshaken:
                mechanism = sasl.decode_sasl_handshake_request(body)
                ok = mechanism == _MECHANISM
                transport.writelines(
                    sasl.encode_sasl_handshake_response(
                        header.correlation_id,
                        0 if ok else _UNSUPPORTED_SASL_MECHANISM,
                        [_MECHANISM],
                    )
                )
                self._handshaken = ok
                return
            if header.api_key == kw.API_SASL_AUTHENTICATE and self._handshaken:
                token = sasl.decode_sasl_authenticate_request(body)
                password = token.split(b"\x00")[-1] if token.count(b"\x00") == 2 else None
                assert self._secret is not None
                if secret_matches(self._secret, password):
                    self._authenticated = True
                    transport.writelines(
                        sasl.encode_sasl_authenticate_response(header.correlation_id, 0, None)
                    )
                    return
                transport.writelines(
                    sasl.encode_sasl_authenticate_response(
                        header.correlation_id,
                        _SASL_AUTHENTICATION_FAILED,
                        "the cluster secret does not match",
                    )
                )
        except InvalidRequestError as exc:
            _log.warning("bad authentication request from %s: %s", self._peer, exc)
        _log.warning("closing an unauthenticated connection from %s", self._peer)
        transport.close()


_API_NAMES = {
    kw.API_PRODUCE: "Produce",
    kw.API_FETCH: "Fetch",
    ks.API_SHARE_FETCH: "ShareFetch",
    ks.API_SHARE_ACKNOWLEDGE: "ShareAcknowledge",
}


def _log_access(header: kw.RequestHeader, status: int, elapsed: float) -> None:
    """One ``yak.access`` line, as the HTTP listener writes (``YAK_ACCESS_LOG=true``): method
    ``KAFKA``, the API's name as the route, status 0 or the Kafka error code of a refusal."""
    name = _API_NAMES.get(header.api_key, f"api-{header.api_key}")
    _access_log.info(
        "KAFKA %s v%d %d %.1f ms",
        name,
        header.api_version,
        status,
        elapsed * 1000,
        extra={
            "method": "KAFKA",
            "route": name,
            "path": name,
            "status": status,
            "duration_ms": round(elapsed * 1000, 3),
        },
    )
