"""Direct routes: requests a service answers on uvicorn's connection without its ASGI stack.

An ASGI request passes every layer of the app's stack on its way in and its answer every
``send`` wrapper on its way out; uvicorn writes the answer's head and its body with two
``transport.write`` calls, two ``send`` system calls on the socket (on loopback each one also
runs the receiver's TCP path). For a service's few hottest routes, that overhead is a large
part of what a request costs (docs/performance.md: ~10 % of the rest-proxy's CPU per
one-record produce). A *direct route* takes such a request before it becomes an ASGI call:

- the service gives ``serve`` a ``DirectRoute``: a function of the request's scope (built by
  uvicorn when its headers are complete) that returns a ``DirectHandler`` for the requests it
  serves itself and None for every other, which goes to the ASGI app as before;
- the handler gets uvicorn's own request cycle (``Cycle``): it reads the body with
  ``cycle.receive`` (uvicorn's flow control, ``Expect: 100-continue`` and disconnects are
  unchanged) and answers with ``respond``: status line, uvicorn's default headers (``date``,
  ``server``), the handler's headers and the body in **one** write, with the bookkeeping of
  uvicorn's ``send`` (keep-alive or close, the next pipelined request started). A handler
  that streams may use ``cycle.send`` instead, as an ASGI app would.

Pipelined requests keep their order: uvicorn starts each one (direct or not) only when the one
before it has answered. A handler that raises is answered as uvicorn answers an app that
raised: logged, and ``500`` if nothing was sent yet, else the connection closed.

``DirectRoutesProtocol`` is the service's HTTP protocol (``HeaderTimeoutProtocol``, so headers
still have their deadline) with the hook; ``with_direct_routes`` makes the subclass for one
route function. It relies on uvicorn's ``HttpToolsProtocol._start_asgi_task`` and the cycle's
attributes (``Cycle``): the tests in ``tests/unit/shared/web/test_direct.py`` run it under a
real uvicorn server, so a uvicorn that changes them fails there.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from starlette.types import Scope
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle

from yak.web.header_timeout import HeaderTimeoutProtocol

__all__ = [
    "Cycle",
    "DirectHandler",
    "DirectRoute",
    "DirectRoutesProtocol",
    "respond",
    "with_direct_routes",
]


class _Flow(Protocol):
    write_paused: bool

    async def drain(self) -> None: ...


class _Transport(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class Cycle(Protocol):
    """What a direct handler may use of uvicorn's ``RequestResponseCycle``."""

    @property
    def scope(self) -> Scope: ...
    @property
    def transport(self) -> _Transport: ...
    @property
    def flow(self) -> _Flow: ...
    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]: ...
    @property
    def message_event(self) -> asyncio.Event: ...
    @property
    def keep_alive(self) -> bool: ...
    @property
    def disconnected(self) -> bool: ...
    @property
    def more_body(self) -> bool: ...

    response_started: bool
    response_complete: bool
    waiting_for_100_continue: bool
    on_response: Callable[[], None]

    async def receive(self) -> Any: ...

    async def send(self, message: Any) -> None: ...

    async def send_500_response(self) -> None: ...


DirectHandler = Callable[[Cycle], Awaitable[None]]
DirectRoute = Callable[[Scope], DirectHandler | None]


async def respond(
    cycle: Cycle, status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes | memoryview
) -> None:
    """Answer the cycle's request in one write: ``headers`` (lower-case names, with the
    body's ``content-length``) after uvicorn's defaults, then ``body``. Nothing is written to a
    client that went away."""
    if cycle.flow.write_paused and not cycle.disconnected:
        await cycle.flow.drain()
    if cycle.disconnected:
        return
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    content: list[bytes | memoryview] = [STATUS_LINE[status]]
    for name, value in cycle.default_headers:
        content += (name, b": ", value, b"\r\n")
    for name, value in headers:
        content += (name, b": ", value, b"\r\n")
    if not cycle.keep_alive:
        content.append(b"connection: close\r\n")
    content += (b"\r\n", body)
    cycle.transport.write(b"".join(content))
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()


async def _run(cycle: Cycle, handler: DirectHandler, logger: logging.Logger) -> None:
    """``handler`` on ``cycle``, its failures answered as uvicorn's ``run_asgi`` answers an
    app's."""
    try:
        await handler(cycle)
    except BaseException as exc:
        logger.error("Exception in a direct route\n", exc_info=exc)
        if not cycle.response_started:
            await cycle.send_500_response()
        else:
            cycle.transport.close()
    else:
        if not cycle.response_started and not cycle.disconnected:
            logger.error("a direct route returned without answering")
            await cycle.send_500_response()
        elif not cycle.response_complete and not cycle.disconnected:
            logger.error("a direct route returned without completing its answer")
            cycle.transport.close()
    finally:
        cycle.on_response = _nothing


def _nothing() -> None:
    return None


class DirectRoutesProtocol(HeaderTimeoutProtocol):
    """The header-timeout protocol whose requests go to ``direct_route`` first (see the module
    docstring); ``with_direct_routes`` sets the route function."""

    @staticmethod
    def direct_route(scope: Scope) -> DirectHandler | None:
        return None

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        handler = self.direct_route(cycle.scope)  # type: ignore[arg-type]
        if handler is None:
            super()._start_asgi_task(cycle, app)
            return
        running = _run(cycle, handler, self.logger)  # type: ignore[arg-type]
        if getattr(self.config, "reset_contextvars", False):  # as uvicorn's own tasks
            task = self.loop.create_task(running, context=contextvars.Context())
        else:
            task = self.loop.create_task(running)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)


def with_direct_routes(
    protocol: type[DirectRoutesProtocol], route: DirectRoute
) -> type[DirectRoutesProtocol]:
    """A subclass of ``protocol`` (perhaps with its header deadline set) whose requests go to
    ``route`` first."""
    return type(protocol.__name__, (protocol,), {"direct_route": staticmethod(route)})
