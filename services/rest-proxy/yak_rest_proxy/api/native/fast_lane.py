"""The fast lane: the hottest routes served without FastAPI's routing and parameter handling.

A one-record produce through FastAPI spends more time in the framework — matching the path
against every route, building the request, solving the parameters and dependencies, the
exception middleware — than in the produce itself. ``FastLane`` is a raw ASGI middleware,
innermost, that serves ``POST /api/v1/topics/{topic}/records`` straight from the scope when
the request is the plain case: no query parameter but ``acks`` with one of its four values,
and security off (the guard is a FastAPI dependency: a secured proxy takes the FastAPI path).
It serves ``POST /api/v1/topics/{topic}/partitions/{partition}/batches`` the same way when the
body is the binary form (``Content-Type: application/vnd.yak.recordbatch.v2``, the SDK's
idempotent batches), the partition a plain decimal and ``acks`` absent, ``all``, ``-1`` or
``1``. And it serves a consumer-group member's long poll, ``GET
/api/v1/groups/{group}/members/{member}/records``, when its query holds only ``timeout_ms``,
``max_bytes``, the three encodings and ``filter``, each at most once, with plain values in
range — in JSON, or in binary when its ``Accept`` asks for ``application/vnd.yak.fetch.v1``
(the SDK's poll; ``group_routes.wants_batches`` decides, as for the route) and no filter is
given. The query is parsed once; a filter is compiled through ``yak.filters``' cache when the
poll is served (a bad one is the route's 400), so an unfiltered poll pays nothing. Anything
else passes through to FastAPI untouched, so every unusual request (a bad
``acks``, an unknown parameter, a topic with a ``/``, a JSON batch) is answered exactly as the
documented route answers it. The work is the route's own (``routes.produce_records``,
``routes.produce_batch``, ``group_routes.poll_records``), typed errors go through the native
dialect's table, and the routes stay in the OpenAPI document. The observability middleware
outside still times and ids the request (it matches the route's template itself).

Another dialect may add its own plain request through ``others`` (a ``Matcher``, built where
that dialect lives: Confluent v2's plain ``POST /topics/{topic}``, ``v2.produce_routes.
plain_produce``, whose work renders its errors in the v2 dialect).

Under uvicorn (the service's ``main``) the same requests skip the ASGI front altogether: the
direct lane (``native.direct_lane``) takes them on the connection, with ``work_for``'s answer.
This ASGI lane serves what reaches the app another way (an in-process ASGI client, or while
the RateLimit headers are owed).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from yak.api.records import RECORD_BATCH_MEDIA_TYPE, Encoding, HeaderEncoding
from yak.errors import YakError
from yak.observability.http import ROUTE_TEMPLATE
from yak.web.errors import error_response
from yak_rest_proxy.api.native.group_routes import (
    MAX_POLL_BYTES,
    Encodings,
    poll_records,
    wants_batches,
)
from yak_rest_proxy.api.native.routes import ACKS, produce_batch, produce_records
from yak_rest_proxy.consume.consumer import Consumers
from yak_rest_proxy.consume.reader import filter_param
from yak_rest_proxy.runtime import ProxyRuntime

__all__ = ["FastLane", "Matcher", "Work"]

#: A route's work for one request: its answer, or a ``YakError`` the native dialect renders.
Work = Callable[[Request], Awaitable[Response]]
#: Another dialect's plain request: its work (rendering its own errors, and naming its route's
#: template in the scope), else None.
Matcher = Callable[[Scope], Work | None]

_PRODUCE = re.compile(r"/api/v1/topics/([^/]+)/records")
_PRODUCE_ROUTE = "/api/v1/topics/{topic}/records"
_BATCH_ROUTE = "/api/v1/topics/{topic}/partitions/{partition}/batches"
_POLL_ROUTE = "/api/v1/groups/{group}/members/{member}/records"
_ACKS_QUERY = {b"": -1, **{b"acks=" + name.encode(): value for name, value in ACKS.items()}}
_BATCH = re.compile(r"/api/v1/topics/([^/]+)/partitions/([0-9]{1,10})/batches")
_BATCH_ACKS_QUERY = {query: acks for query, acks in _ACKS_QUERY.items() if acks != 0}
_BATCH_MEDIA_TYPE = RECORD_BATCH_MEDIA_TYPE.encode()
_POLL = re.compile(r"/api/v1/groups/([^/]+)/members/([^/]+)/records")
_POLL_DEFAULTS = {
    "timeout_ms": "1000",
    "max_bytes": str(1024 * 1024),
    "key_encoding": Encoding.STRING.value,
    "value_encoding": Encoding.JSON.value,
    "header_encoding": HeaderEncoding.STRING.value,
}
_POLL_PARAMETERS = _POLL_DEFAULTS.keys() | {"filter"}
_ENCODINGS = {e.value: e for e in Encoding}
_HEADER_ENCODINGS = {e.value: e for e in HeaderEncoding}
_DIGITS = re.compile(r"[0-9]{1,10}")


def _accept(scope: Scope) -> str | None:
    """The request's Accept header (the first, as Starlette's ``headers.get`` gives it)."""
    for name, value in scope["headers"]:
        if name == b"accept":
            return str(value.decode("latin-1"))
    return None


def _binary_body(scope: Scope) -> bool:
    """Whether the request's Content-Type is the binary batch form (parameters ignored)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == _BATCH_MEDIA_TYPE)
    return False


class FastLane:
    """See the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        runtime: ProxyRuntime,
        consumers: Consumers | None = None,
        others: tuple[Matcher, ...] = (),
    ) -> None:
        self.app = app
        self._runtime = runtime
        self._consumers = consumers
        self._others = others
        #: Requests this lane served itself (the rest went on to FastAPI).
        self.served = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        work = self.work_for(scope) if scope["type"] == "http" else None
        if work is None:
            await self.app(scope, receive, send)
            return
        self.served += 1
        try:
            response = await work(Request(scope, receive))
        except YakError as exc:
            response = error_response(exc)
        await response(scope, receive, send)

    def work_for(self, scope: Scope) -> Work | None:
        """The route's work for an HTTP request this lane serves itself (and the route's
        template set in the scope), else None."""
        if self._runtime.security_cache is not None:
            return None
        method = scope["method"]
        if method == "POST":
            return self._work(scope)
        if method == "GET" and scope["path"].endswith("/records"):
            return self._poll(scope)
        return None

    def _work(self, scope: Scope) -> Work | None:
        """The route's work for a request this lane serves itself, else None."""
        path = scope["path"]
        for other in self._others:
            if (work := other(scope)) is not None:
                return work
        match = _PRODUCE.fullmatch(path)
        if match is not None:
            acks = _ACKS_QUERY.get(scope["query_string"])
            if acks is None:
                return None
            scope[ROUTE_TEMPLATE] = _PRODUCE_ROUTE
            return partial(produce_records, self._runtime, topic=match[1], acks=acks)
        if not path.endswith("/batches") or (match := _BATCH.fullmatch(path)) is None:
            return None
        acks = _BATCH_ACKS_QUERY.get(scope["query_string"])
        if acks is None or not _binary_body(scope):
            return None
        scope[ROUTE_TEMPLATE] = _BATCH_ROUTE
        return partial(
            produce_batch, self._runtime, topic=match[1], partition=int(match[2]), acks=acks
        )

    def _poll(self, scope: Scope) -> Work | None:
        """A member's plain long poll, else None (see the module docstring)."""
        if self._consumers is None or (match := _POLL.fullmatch(scope["path"])) is None:
            return None
        query = scope["query_string"].decode("latin-1")
        pairs = parse_qsl(query, keep_blank_values=True) if query else []
        given = dict(pairs)
        if len(given) != len(pairs) or not given.keys() <= _POLL_PARAMETERS:
            return None
        values = _POLL_DEFAULTS | given
        timeout, size = values["timeout_ms"], values["max_bytes"]
        key = _ENCODINGS.get(values["key_encoding"])
        value = _ENCODINGS.get(values["value_encoding"])
        header = _HEADER_ENCODINGS.get(values["header_encoding"])
        if (
            _DIGITS.fullmatch(timeout) is None
            or _DIGITS.fullmatch(size) is None
            or not 1 <= int(size) <= MAX_POLL_BYTES
            or key is None
            or value is None
            or header is None
        ):
            return None
        consumers, encodings = self._consumers, Encodings(key, value, header)
        accept = _accept(scope)
        filter_text = given.get("filter")
        scope[ROUTE_TEMPLATE] = _POLL_ROUTE

        async def serve(_request: Request) -> Response:
            record_filter = filter_param(filter_text)  # cached by text; raises 400 if bad
            return await poll_records(
                self._runtime,
                consumers,
                match[1],
                match[2],
                timeout_ms=int(timeout),
                max_bytes=int(size),
                encodings=encodings,
                batches=wants_batches(accept),
                record_filter=record_filter,
            )

        return serve
