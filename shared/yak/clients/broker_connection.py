"""``BrokerConnection``: one persistent, multiplexed connection to a broker's internal listener.

Produce and fetch requests (and a share group's ShareFetch and ShareAcknowledge,
``yak.protocol.kafka_share``) in Kafka's framing (``yak.protocol.kafka_wire``) share one TCP
connection: each request is written at once with the next correlation id, its answer is
matched by that id whenever it comes (the listener answers out of order: a parked long-poll
fetch does not hold back a produce), so any number of requests are pipelined without a pool of
connections or an HTTP exchange each. The connection is opened on first use — with TLS when
asked, then SASL/PLAIN with the cluster secret when one is configured — and opened again on
the next request after it broke.

Failures: a connection that breaks fails every request waiting on it with ``NetworkError``
(a produce's fate is then unknown: the idempotent producer retries it and the broker's
duplicate detection answers with the original offsets); a request not answered within its
timeout raises ``KafkaTimeoutError`` (its late answer is dropped); a request-level error from
the broker (malformed, too large) raises its typed error. ``acks=0`` produces are written and
not answered, as in Kafka.

Single event loop; any number of tasks may use one connection concurrently.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from typing import cast

from yak.errors import (
    AuthenticationError,
    KafkaTimeoutError,
    NetworkError,
    YakError,
)
from yak.observability.request_id import current_request_id
from yak.protocol import kafka_sasl as sasl
from yak.protocol import kafka_share as ks
from yak.protocol import kafka_wire as kw
from yak.protocol.broker_wire import (
    Buffer,
    FetchedPartition,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResult,
)

__all__ = ["BrokerConnection"]

_CLIENT_ID = "yak"


class BrokerConnection:
    """Requests to the internal listener at ``host:port``; see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        cluster_secret: str | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._secret = cluster_secret
        self._connect_timeout_s = connect_timeout_s
        self._protocol: _Protocol | None = None
        self._connecting = asyncio.Lock()
        self._ids = itertools.count(1)
        self._closed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def produce(self, request: ProduceRequest, timeout_s: float) -> tuple[ProduceResult, ...]:
        """Send a produce request; its results (none for ``acks=0``)."""
        protocol = await self._connected()
        correlation_id = next(self._ids)
        parts = kw.encode_produce_request(request, correlation_id, _client_id())
        if request.acks == 0:
            await protocol.send(parts)
            return ()
        body = await protocol.call(correlation_id, parts, timeout_s, self.address)
        return kw.decode_produce_response(body)

    async def fetch(self, request: FetchRequest, timeout_s: float) -> tuple[FetchedPartition, ...]:
        """Send a (long-polling) fetch; ``records`` are slices of the answer's frame."""
        protocol = await self._connected()
        correlation_id = next(self._ids)
        parts = kw.encode_fetch_request(request, correlation_id, _client_id())
        body = await protocol.call(correlation_id, parts, timeout_s, self.address)
        return kw.decode_fetch_response(body)

    async def fetch_session(self, request: FetchRequest, timeout_s: float) -> FetchResponse:
        """A fetch in an incremental fetch session: its answer with the session id and the
        request-level error code (a refused session is answered, not raised)."""
        protocol = await self._connected()
        correlation_id = next(self._ids)
        parts = kw.encode_fetch_request(request, correlation_id, _client_id())
        body = await protocol.call(correlation_id, parts, timeout_s, self.address)
        return kw.decode_fetch_session_response(body)

    async def share_fetch(
        self, request: ks.ShareFetchRequest, timeout_s: float
    ) -> ks.ShareFetchResponse:
        """Acquire records of a share group (and send acknowledgements with it), long-polling
        up to ``request.max_wait_ms``; ``records`` are slices of the answer's frame."""
        protocol = await self._connected()
        correlation_id = next(self._ids)
        parts = ks.encode_share_fetch_request(request, correlation_id, _client_id())
        body = await protocol.call(correlation_id, parts, timeout_s, self.address)
        return ks.decode_share_fetch_response(body)

    async def share_acknowledge(
        self, request: ks.ShareAcknowledgeRequest, timeout_s: float
    ) -> tuple[ks.AckResult, ...]:
        """Acknowledge (accept, release, reject, renew) acquired records of a share group."""
        protocol = await self._connected()
        correlation_id = next(self._ids)
        parts = ks.encode_share_acknowledge_request(request, correlation_id, _client_id())
        body = await protocol.call(correlation_id, parts, timeout_s, self.address)
        return ks.decode_share_acknowledge_response(body)

    async def aclose(self) -> None:
        self._closed = True
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.close()

    # --- connecting ---------------------------------------------------------------------------

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and protocol.open:
            return protocol
        async with self._connecting:
            protocol = self._protocol
            if protocol is not None and protocol.open:
                return protocol
            if self._closed:
                raise NetworkError(f"the connection to {self.address} is closed")
            self._protocol = protocol = await self._connect()
            return protocol

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, protocol = await loop.create_connection(
                    _Protocol, self.host, self.port, ssl=self._ssl
                )
                if self._secret is not None:
                    await self._authenticate(protocol)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"connecting to the broker at {self.address} timed out"
            ) from None
        except OSError as exc:
            raise NetworkError(f"cannot reach the broker at {self.address}: {exc}") from exc
        return protocol

    async def _authenticate(self, protocol: _Protocol) -> None:
        assert self._secret is not None
        handshake_id = next(self._ids)
        body = await protocol.call(
            handshake_id,
            sasl.encode_sasl_handshake_request("PLAIN", handshake_id),
            self._connect_timeout_s,
            self.address,
            flexible=False,
        )
        code, mechanisms = sasl.decode_sasl_handshake_response(body)
        if code != 0:
            protocol.close()
            raise AuthenticationError(
                f"the broker at {self.address} offers {mechanisms}, not PLAIN (error {code})"
            )
        auth_id = next(self._ids)
        token = b"\x00yak\x00" + self._secret.encode()
        body = await protocol.call(
            auth_id,
            sasl.encode_sasl_authenticate_request(token, auth_id),
            self._connect_timeout_s,
            self.address,
        )
        code, message = sasl.decode_sasl_authenticate_response(body)
        if code != 0:
            protocol.close()
            raise AuthenticationError(
                f"the broker at {self.address} refused the cluster secret: {message}"
            )


def _client_id() -> str:
    """The request id of the request being served travels as the client id."""
    return current_request_id() or _CLIENT_ID


class _Protocol(asyncio.BufferedProtocol):
    """The connection's byte stream: frames out, answers matched to their waiters."""

    def __init__(self) -> None:
        self._splitter = kw.FrameSplitter()
        self._transport: asyncio.Transport | None = None
        self._waiting: dict[int, asyncio.Future[Buffer]] = {}
        self._writable: asyncio.Future[None] | None = None
        self._error: YakError | None = None

    @property
    def open(self) -> bool:
        return self._transport is not None and self._error is None

    async def send(self, parts: list[Buffer]) -> None:
        """Write a frame whose answer nobody waits for."""
        if self._writable is not None:
            await asyncio.shield(self._writable)
        self._write(parts)

    async def call(
        self,
        correlation_id: int,
        parts: list[Buffer],
        timeout_s: float,
        address: str,
        *,
        flexible: bool = True,
    ) -> memoryview:
        """Write a request frame and wait for the body of its answer."""
        if self._writable is not None:
            await asyncio.shield(self._writable)
        future: asyncio.Future[Buffer] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        try:
            self._write(parts)
            async with asyncio.timeout(timeout_s):
                data = await future
        except TimeoutError:
            raise KafkaTimeoutError(
                f"no answer from the broker at {address} within {timeout_s:.3f} s"
            ) from None
        finally:
            self._waiting.pop(correlation_id, None)
        header, body = kw.decode_response_header(data, is_flexible=flexible)
        if header.error is not None:
            raise header.error
        return body

    def _write(self, parts: list[Buffer]) -> None:
        if self._error is not None:
            raise self._error
        transport = self._transport
        if transport is None or transport.is_closing():
            raise NetworkError("the connection to the broker is closed")
        transport.writelines(parts)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # --- asyncio.BufferedProtocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._splitter.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._splitter.filled(nbytes)
        except kw.FrameTooLargeError as exc:
            self._fail(NetworkError(f"the broker sent a malformed frame: {exc}"))
            return
        waiting = self._waiting
        for data in frames:
            if len(data) < 4:
                self._fail(NetworkError("the broker sent a frame without a correlation id"))
                return
            correlation_id = int.from_bytes(memoryview(data)[:4], "big", signed=True)
            future = waiting.pop(correlation_id, None)
            if future is not None and not future.done():
                future.set_result(data)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc is not None else ""
        self._fail(NetworkError(f"the connection to the broker was closed{reason}"))

    def _fail(self, error: YakError) -> None:
        if self._error is None:
            self._error = error
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.abort()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(error)
        self.resume_writing()
