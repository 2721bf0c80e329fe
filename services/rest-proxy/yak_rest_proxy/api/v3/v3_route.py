"""``V3Route``: the v3 routers' route class, answering their errors in the v3 dialect.

FastAPI resolves the app's dependencies (the security guard) and validates path parameters
inside the route handler, so wrapping the handler catches their errors too: typed errors become
``errors.v3_error``'s status and body, validation failures 422 / 422. Errors raised while a
streamed answer is being written are the stream's own (``record_stream``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from yak.errors import InvalidRequestError, YakError
from yak.web.errors import challenge_headers, describe_validation
from yak_rest_proxy.api.v3.errors import v3_error

__all__ = ["V3Route", "v3_error_response"]


def v3_error_response(error: YakError) -> JSONResponse:
    status, code = v3_error(error)
    return JSONResponse(
        {"error_code": code, "message": error.message},
        status_code=status,
        headers=challenge_headers(error),
    )


class V3Route(APIRoute):
    """An ``APIRoute`` whose typed and validation errors answer in the v3 dialect (the guard's
    too: FastAPI resolves the app's dependencies inside the route handler)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except YakError as exc:
                return v3_error_response(exc)
            except RequestValidationError as exc:
                message = describe_validation(exc)
                return v3_error_response(InvalidRequestError(message, kind="invalid_body"))

        return handle
