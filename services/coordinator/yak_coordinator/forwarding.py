"""Admin requests reach the active controller from any coordinator.

An ASGI middleware in front of the admin routes: on the active controller a request passes
through; on a standby it is forwarded once (method, path, query, body, content type) to the
controller URL named in the ``controller`` record, and the controller's answer is returned
as is. With no controller elected, or when the controller cannot be reached, the answer is
503 ``NOT_CONTROLLER`` (retriable). A forwarded request carries ``x-yak-forwarded-by``; a
coordinator that gets one while not active answers 503 instead of forwarding again, so two
coordinators with stale views cannot bounce a request between them.

``GET /admin/v1/cluster`` is always answered locally: it is how one finds out who controls.

The request is forwarded with its path as the client sent it (``raw_path``, still
percent-encoded): a topic named ``..%2F..%2Fx`` stays one path segment instead of being
decoded and resolved into another route on the controller. Its body is read up to
``ADMIN_BODY_LIMIT`` (1 MiB, the admin router's own limit); a larger one answers 413
``MESSAGE_TOO_LARGE`` without being read whole.
"""

from __future__ import annotations

import logging

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from yak.api.admin import ADMIN_PREFIX
from yak.errors import NotControllerError, YakError
from yak.security.cluster_secret import ON_BEHALF_OF_HEADER
from yak.web.body import read_body
from yak.web.errors import error_response
from yak_coordinator.service import Coordinator

__all__ = ["ADMIN_BODY_LIMIT", "FORWARDED_HEADER", "ControllerForwarding"]

log = logging.getLogger(__name__)

FORWARDED_HEADER = "x-yak-forwarded-by"
_LOCAL_PATHS = {f"{ADMIN_PREFIX}/cluster"}
#: ``authorization``: the controller authenticates and authorizes the original caller;
#: ``yak-on-behalf-of``: a service's principal (honoured there only with the cluster secret,
#: which the standby's own client sends, as this standby checked the caller's).
_PASSED_HEADERS = ("content-type", "accept", "authorization", ON_BEHALF_OF_HEADER)
#: The largest admin request body (a topic's configs, a reassignment plan): 413 beyond.
ADMIN_BODY_LIMIT = 1024 * 1024


class ControllerForwarding:
    """ASGI middleware: forward admin requests from a standby to the active controller."""

    def __init__(self, app: ASGIApp, coordinator: Coordinator) -> None:
        self.app = app
        self.coordinator = coordinator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or not path.startswith(ADMIN_PREFIX)
            or path in _LOCAL_PATHS
            or self.coordinator.is_controller
        ):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await self._forward(request)
        except YakError as exc:
            response = error_response(exc)
        await response(scope, receive, send)

    async def _forward(self, request: Request) -> Response:
        node = self.coordinator.settings.node_id
        if FORWARDED_HEADER in request.headers:
            raise NotControllerError(
                f"coordinator {node} got a forwarded request but is not the active controller"
            )
        target = self.coordinator.controller_url()
        if target is None:
            raise NotControllerError("no active controller is elected; retry shortly")
        headers = {k: v for k, v in request.headers.items() if k in _PASSED_HEADERS}
        headers[FORWARDED_HEADER] = node
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        body = await read_body(request, ADMIN_BODY_LIMIT)
        try:
            answer = await self.coordinator.http.request(
                request.method,
                f"{target}{raw_path.decode('latin-1')}",
                params=str(request.query_params),
                content=body,
                headers=headers,
            )
        except httpx.HTTPError as exc:
            log.warning("forwarding to the controller at %s failed: %s", target, exc)
            raise NotControllerError(
                f"the active controller at {target} is unreachable ({type(exc).__name__})"
            ) from exc
        kept = {k: v for k, v in answer.headers.items() if k in _PASSED_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=kept)
