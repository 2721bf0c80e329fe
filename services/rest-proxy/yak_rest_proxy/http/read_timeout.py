"""``BodyReadTimeout``: a request body must keep arriving, or the request answers 408.

A client that sends its headers and then stalls (or trickles its body a byte at a time) would
hold a connection, a task and a growing buffer for as long as it likes. This ASGI middleware
wraps ``receive`` so that, until the body is complete, each wait for its next piece is bounded
by ``timeout_s`` (``YAK_REQUEST_READ_TIMEOUT_MS``); a wait that runs out raises
``RequestBodyTimeoutError`` inside whatever reads the body (the guard or a route), and the
proxy's error table answers 408 ``REQUEST_BODY_TIMEOUT`` in the path's dialect. Once the body
is complete, ``receive`` is passed through untouched: streaming answers wait on it for the
client's disconnect as long as they like. WebSockets and lifespan events are not touched.

The timeout is per piece, not for the whole body: a large upload on a slow but steady link is
fine. Headers are uvicorn's business (``h11_max_incomplete_event_size`` bounds their size).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yak.errors import RequestBodyTimeoutError

__all__ = ["BodyReadTimeout", "bounded_receive"]


class BodyReadTimeout:
    """The ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, *, timeout_s: float) -> None:
        self._app = app
        self._timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        await self._app(scope, bounded_receive(receive, self._timeout_s), send)


def bounded_receive(receive: Receive, timeout_s: float) -> Receive:
    """``receive`` with each wait for the body's next piece bounded by ``timeout_s`` (then
    ``RequestBodyTimeoutError``), passed through once the body is complete (see the module
    docstring; the proxy's direct lane uses it for a body not whole when its headers are)."""
    complete = False

    async def bounded() -> Message:
        nonlocal complete
        if complete:
            return await receive()
        try:
            async with asyncio.timeout(timeout_s):
                message = await receive()
        except TimeoutError:
            raise RequestBodyTimeoutError(
                f"the request body stalled: nothing arrived for {timeout_s:g} s"
            ) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            complete = True
        return message

    return bounded
