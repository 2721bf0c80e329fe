"""The public Kafka listener: Kafka's framing on its own port, answers in request order.

Kafka's clients and tools connect here (``BrokerSettings.kafka_port``, advertised in the
broker's registration as ``kafka_host``/``kafka_port``). Per connection:

- **Framing**: ``int32 size`` + request header + body (``yak.protocol.kafka_types``'s
  ``FrameSplitter``). Request header v1 (``api_key, api_version, correlation_id, client_id``)
  or v2 (the same + tagged fields) for a flexible version (``dispatch.Api.first_flexible``).
  A frame larger than ``max_request_bytes`` closes the connection, as Kafka does (the stream
  has no point to resume at).
- **Pipelining, answers in order**: every request is served in a task of its own as soon as its
  frame is complete (a parked long-poll fetch does not stop the requests behind it from being
  served), but its answer is written only once every earlier request of the connection was
  answered — Kafka's clients match answers to requests by order, not only by correlation id.
  A request without an answer (Produce acks=0) takes its turn and writes nothing. A handler's
  task writes what is ready itself, as soon as it finishes, before the tasks its work woke up
  run (an acks=1 append wakes the followers' parked fetches: they answer after it). Appends keep
  arrival order: tasks start in arrival order and nothing in the append path awaits before
  the log write. At most ``MAX_IN_FLIGHT`` requests per connection are in progress; beyond
  that, and while the socket's send buffer is above its high-water mark, reading pauses.
- **Refusals**: an API or version outside ``dispatch.APIS`` closes the connection, except
  ApiVersions, which gets Kafka's v0 answer with ``UNSUPPORTED_VERSION``; a body its handler
  cannot parse (``InvalidRequestError``) closes the connection; an unexpected failure of a
  handler is logged and closes the connection. Nothing malformed reaches the broker's state:
  handlers parse the whole body before acting.

- **Security** (``BrokerSettings.kafka_protocol``): ``SSL``/``SASL_SSL`` wrap the port in the
  broker's TLS context (the HTTP listener's certificate). With ``SASL_*`` the listener holds a
  ``KafkaSecurity`` (users, ACLs; started before it accepts) and each connection a
  ``SaslSession``: until it is authenticated, only ApiVersions and the SASL APIs are served and
  anything else closes the connection; after a handshake v0 the frames are raw SASL tokens
  (``SaslSession.raw_token``); an answer that ends the exchange (a failed login, a SASL
  request out of turn) is written, then the connection is closed (``SaslSession.closing``).
  Requests carry the session, so handlers know the principal (``kafka.authorize``).
- **Quotas** (``kafka.quotas``): the listener follows the principals' quota overrides; Produce
  and Fetch hold a throttled answer (which holds the connection's later ones behind it).

Single event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from yak.errors import InvalidRequestError
from yak.metadata.producer_ids import ProducerIds
from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_types import FrameSplitter, FrameTooLargeError, Reader
from yak_broker.kafka.context import KafkaRequest, KafkaServer
from yak_broker.kafka.dispatch import lookup, unsupported_version_answer
from yak_broker.kafka.quotas import KafkaQuotas
from yak_broker.kafka.sasl import PRE_AUTHENTICATION, SaslSession
from yak_broker.kafka.schemas import API_VERSIONS_KEY
from yak_broker.kafka.security import KafkaSecurity

if TYPE_CHECKING:
    from yak_broker.server.broker import Broker

__all__ = ["MAX_IN_FLIGHT", "KafkaListener"]

_log = logging.getLogger(__name__)
#: Requests of one connection in progress at once before reading pauses.
MAX_IN_FLIGHT = 64
_HEADER = struct.Struct(">hhi")

_Answer = asyncio.Future[list[Buffer] | None]


class KafkaListener:
    """Accepts Kafka clients' connections for one broker."""

    def __init__(self, broker: Broker, ssl_context: ssl.SSLContext | None = None) -> None:
        sasl = broker.settings.kafka_protocol.sasl
        self._security = KafkaSecurity.of_broker(broker) if sasl else None
        self._server_state = KafkaServer(
            broker,
            ProducerIds(lambda: broker.metadata_store, broker.keyspace),
            security=self._security,
            quotas=KafkaQuotas.of_broker(broker),
        )
        self._ssl = ssl_context
        self._max_bytes = broker.settings.max_request_bytes
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port); return the port bound."""
        loop = asyncio.get_running_loop()
        if self._security is not None:
            await self._security.start()
        assert self._server_state.quotas is not None
        await self._server_state.quotas.start()
        self._server = await loop.create_server(
            lambda: _Connection(self._server_state, self._connections, self._max_bytes),
            host,
            port,
            ssl=self._ssl,
            reuse_address=True,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        _log.info("Kafka listener on %s:%d", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Stop accepting, close every connection and cancel what they were serving, then stop
        the security and quota refreshers and the classic groups coordinated here (parked
        joins and syncs answered, timers cancelled)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for connection in list(self._connections):
            connection.abort()
        with contextlib.suppress(Exception):
            await server.wait_closed()
        if self._security is not None:
            await self._security.stop()
        if self._server_state.quotas is not None:
            await self._server_state.quotas.stop()
        await self._server_state.groups.close()


class _Connection(asyncio.BufferedProtocol):
    def __init__(self, server: KafkaServer, registry: set[_Connection], max_bytes: int) -> None:
        self._server = server
        self._registry = registry
        self._splitter = FrameSplitter(max_bytes=max_bytes)
        self._transport: asyncio.Transport | None = None
        #: Answers in request order; the head is written first, once it is done.
        self._pending: deque[_Answer] = deque()
        #: The handlers in progress (cancelled with the connection).
        self._tasks: set[asyncio.Task[None]] = set()
        self._write_paused = False
        self._reading = True
        self._peer = "?"
        #: The connection's authentication (None: the listener has no SASL).
        self._session: SaslSession | None = None

    # --- asyncio.BufferedProtocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._registry.add(self)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if self._server.security is not None:
            self._session = SaslSession(self._server.security, self._peer)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._splitter.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._splitter.filled(nbytes)
        except FrameTooLargeError as exc:
            _log.warning("closing the Kafka connection of %s: %s", self._peer, exc)
            self.abort()
            return
        for data in frames:
            if self._transport is None:
                return
            self._dispatch(data)
        self._pace()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pace()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._pace()

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        self._transport = None
        pending, self._pending = self._pending, deque()
        for answer in pending:
            if answer.done() and not answer.cancelled():
                answer.exception()  # retrieved: the connection it was for is gone
            answer.cancel()
        for task in list(self._tasks):
            task.cancel()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # --- requests ---------------------------------------------------------------------------

    def _dispatch(self, data: Buffer) -> None:
        session = self._session
        if session is not None and session.raw:  # a SASL token after a handshake v0
            self._pending.append(asyncio.ensure_future(session.raw_token(data)))
            self._pending[-1].add_done_callback(self._flush)
            return
        try:
            request = self._parse(data)
        except InvalidRequestError as exc:
            _log.warning("closing the Kafka connection of %s: %s", self._peer, exc)
            self.abort()
            return
        if isinstance(request, list):  # an answer known at once
            answer: _Answer = asyncio.get_running_loop().create_future()
            answer.set_result(request)
        elif (
            session is not None
            and not session.authenticated
            and request.api_key not in PRE_AUTHENTICATION
        ):
            _log.warning(
                "closing the Kafka connection of %s: api key %d before authentication",
                self._peer,
                request.api_key,
            )
            self.abort()
            return
        else:
            api = lookup(request.api_key, request.api_version)
            assert api is not None  # _parse refused the others
            loop = asyncio.get_running_loop()
            answer = loop.create_future()
            self._pending.append(answer)
            task = loop.create_task(self._serve(answer, api.handler(request)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._pending.append(answer)
        answer.add_done_callback(self._flush)

    async def _serve(self, answer: _Answer, handling: Awaitable[list[Buffer] | None]) -> None:
        """Serve one request and write what is ready, in the handler's own step: the answer
        leaves before the tasks its work woke up run (an append wakes the followers' parked
        fetches; an acks=1 client need not wait for them), and without the hop through a done
        callback."""
        try:
            parts = await handling
        except asyncio.CancelledError:
            answer.cancel()
            raise
        except BaseException as exc:  # the connection fails in order, in _flush
            answer.set_exception(exc)
        else:
            answer.set_result(parts)
        self._flush(answer)

    def _parse(self, data: Buffer) -> KafkaRequest | list[Buffer]:
        """The request in a frame, or the answer of an unsupported ApiVersions."""
        reader = Reader(data, "request header")
        api_key, api_version, correlation_id = reader.unpack(_HEADER, "header")
        api = lookup(api_key, api_version)
        if api is None:
            if api_key == API_VERSIONS_KEY:
                return unsupported_version_answer(correlation_id)
            raise InvalidRequestError(f"api key {api_key} v{api_version} is not served here")
        client_id = reader.nullable_string16("client_id")
        if api_version >= api.first_flexible:
            reader.tags("request header")
        body = reader.view[reader.pos :]
        return KafkaRequest(
            self._server, api_key, api_version, correlation_id, client_id, body, self._session
        )

    def _flush(self, _done: _Answer) -> None:
        pending = self._pending
        while pending and pending[0].done():
            answer = pending.popleft()
            if answer.cancelled():
                continue
            error = answer.exception()
            if error is not None:
                self._fail(error)
                return
            parts = answer.result()
            if parts and self._transport is not None and not self._transport.is_closing():
                self._transport.writelines(parts)
            if self._session is not None and self._session.closing:
                self._close_after_answer()
                return
        self._pace()

    def _close_after_answer(self) -> None:
        """Close once the answers written so far are sent (a failed SASL exchange)."""
        if self._transport is not None:
            _log.info("closing the Kafka connection of %s: SASL exchange ended", self._peer)
            self._transport.close()  # connection_lost then cancels what is pending

    def _fail(self, error: BaseException) -> None:
        if isinstance(error, InvalidRequestError):
            _log.warning("closing the Kafka connection of %s: %s", self._peer, error)
        else:
            _log.error(
                "serving a Kafka request of %s failed; closing its connection",
                self._peer,
                exc_info=error,
            )
        self.abort()

    def _pace(self) -> None:
        """Read while few requests are in progress and the send buffer drains."""
        transport = self._transport
        if transport is None:
            return
        wanted = not self._write_paused and len(self._pending) < MAX_IN_FLIGHT
        if wanted != self._reading:
            self._reading = wanted
            if wanted:
                transport.resume_reading()
            else:
                transport.pause_reading()
