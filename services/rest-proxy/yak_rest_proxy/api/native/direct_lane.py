"""The direct lane: the fast lane's requests answered on uvicorn's connection, without ASGI.

The fast lane (``native.fast_lane``) already skips FastAPI for the hottest routes (the plain
native produce, the SDK's binary batches, a member's plain long poll), but its requests still
pass the front's ASGI layers — uvicorn's proxy-headers middleware, the observability
middleware, the RateLimit headers, the body-read timeout — and uvicorn writes each answer's
head and body in two writes. ``DirectLane.route`` is the proxy's direct route
(``yak.web.direct``): for a request the fast lane would serve, it returns a handler that
does the same work with those layers' effects and nothing else:

- the request id: the caller's ``X-Request-Id`` if valid, else a new one, current while the
  work runs and on the answer (``ObservabilityMiddleware.request_id``);
- ``yak_http_request_duration_seconds`` under the route's template, and the access log line
  (``ObservabilityMiddleware.observe``), 499 for a client gone before the answer, 500 for a
  failure;
- the body-read timeout, armed only when the body was not whole with the headers
  (``bounded_receive``: a stall is the route's 408);
- the answer in one write (``yak.web.direct.respond``); an answer that streams goes through
  uvicorn's ``send`` with the request id added.

It declines (the request goes the ASGI way, answered the same) when the fast lane would, and
while the ``RateLimit-*`` headers are on and a quota is configured (their middleware is
ASGI); ``create_app`` does not install it when CORS is configured. uvicorn's proxy-headers
middleware is not run: nothing the lane's routes do reads the client's address or scheme.
"""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Scope, Send

from yak.errors import YakError
from yak.observability.http import ObservabilityMiddleware
from yak.web.direct import Cycle, DirectHandler, respond
from yak.web.errors import error_response
from yak_rest_proxy.api.native.fast_lane import FastLane, Work
from yak_rest_proxy.http.read_timeout import bounded_receive
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["DirectLane"]


class DirectLane:
    """See the module docstring."""

    def __init__(
        self,
        lane: FastLane,
        observability: ObservabilityMiddleware,
        runtime: ProxyRuntime,
        *,
        read_timeout_s: float,
    ) -> None:
        self._lane = lane
        self._observability = observability
        self._runtime = runtime
        self._read_timeout_s = read_timeout_s
        self._ratelimit_headers = runtime.settings.ratelimit_headers
        #: Requests this lane answered.
        self.served = 0

    def route(self, scope: Scope) -> DirectHandler | None:
        """The handler of a request the lane answers, else None (``yak.web.direct``)."""
        if self._ratelimit_headers and self._runtime.quotas.active:
            return None
        work = self._lane.work_for(scope)
        return None if work is None else partial(self._serve, work)

    async def _serve(self, work: Work, cycle: Cycle) -> None:
        self.served += 1
        scope = cycle.scope
        with self._observability.observing(scope) as observed:
            receive = (
                bounded_receive(cycle.receive, self._read_timeout_s)
                if cycle.more_body
                else cycle.receive
            )
            try:
                response = await work(Request(scope, receive))
            except YakError as exc:
                response = error_response(exc)
            observed.status = response.status_code
            header = observed.header
            if type(response).__call__ is Response.__call__:  # the body is whole: one write
                await respond(
                    cycle, observed.status, [*response.raw_headers, header], response.body
                )
                if response.background is not None:
                    await response.background()
            else:  # an answer that streams: ASGI, on uvicorn's send
                await response(scope, receive, _with_header(cycle.send, header))


def _with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    async def send_with_header(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), header]
        await send(message)

    return send_with_header
