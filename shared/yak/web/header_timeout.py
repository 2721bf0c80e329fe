"""``HeaderTimeoutProtocol``: a request's headers must arrive within a bounded time.

uvicorn bounds the *size* of request headers but not the time they take: a client that opens
a connection and sends its headers one byte a second (slowloris) holds a socket, a protocol
object and a parser for as long as it likes, and a few hundred such clients exhaust a
service's file descriptors. This protocol is uvicorn's httptools protocol with one timer per
connection:

* armed when the connection is made (a client that connects and sends nothing), and when a
  read ends with a request begun but its headers incomplete (also for the next request on a
  kept-alive connection, whose idle wait uvicorn's ``timeout_keep_alive`` bounds) — headers
  that arrive in one read, as nearly all do, never touch a timer;
* disarmed when the request's headers are complete (``on_headers_complete``): from then on the
  body is the app's business (the rest-proxy's ``BodyReadTimeout`` answers 408 for a stalled
  body) and a long poll or a stream may take as long as it needs;
* on expiry, a request that had begun gets ``408 Request Timeout`` with ``connection: close``;
  a connection that sent nothing is closed. Either way the transport closes.

The timeout is ``header_timeout_s`` on the class; ``yak.web.serve.serve`` makes a subclass
with the value of ``YAK_REQUEST_HEADER_TIMEOUT_MS`` (default 10 s). Runs on the event loop of
uvicorn's server, like the protocol it extends.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "HeaderTimeoutProtocol", "with_header_timeout"]

DEFAULT_HEADER_TIMEOUT_S = 10.0

_BODY = b"request headers did not arrive in time\n"
_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + _BODY
)


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request's headers."""

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None
    _request_begun: bool = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._request_begun and not self.transport.is_closing():
            self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        self._request_begun = False
        super().on_headers_complete()

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_timer(self) -> None:
        timer, self._header_timer = self._header_timer, None
        if timer is not None:
            timer.cancel()

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._request_begun:
            self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()


_P = TypeVar("_P", bound=HeaderTimeoutProtocol)


def with_header_timeout(protocol: type[_P], timeout_s: float) -> type[_P]:
    """A subclass of ``protocol`` whose headers must arrive within ``timeout_s``."""
    if timeout_s <= 0:
        raise ValueError(f"the header timeout must be positive, got {timeout_s}")
    return type(protocol.__name__, (protocol,), {"header_timeout_s": timeout_s})
