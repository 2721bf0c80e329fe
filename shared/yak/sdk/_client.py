"""The one HTTP client every SDK object sends its native-API (``/api/v1``) requests through.

A non-2xx answer with the native error body ``{"code", "message", "details"}`` is raised as the
typed ``YakError`` of its code (``yak.errors.error_for_code``); a proxy that cannot be reached
raises ``NetworkError`` and a request that outlives its timeout ``KafkaTimeoutError`` — both
retriable, so callers decide retries from ``YakError.retriable`` alone. One instance may serve
concurrent tasks of one event loop.

With security on (docs/security.md) every request carries a credential: ``api_key`` as
``Authorization: Bearer <key>``, or ``username`` and ``password`` as HTTP Basic. A refused
credential raises ``AuthenticationError`` (401), a denied operation the
``*AuthorizationError`` of its resource type (403); neither is retriable.

A proxy answers **429** ``THROTTLING_QUOTA_EXCEEDED`` with ``Retry-After`` while the principal
is over its byte-rate quota; the request was not served, so sending it again is safe. ``call``
with ``throttle_budget_s`` waits as told and sends again while the waits fit in that budget
(the consumer's polls and the reader's reads use it), then raises the
``ThrottlingQuotaExceededError`` (retriable). The producer waits out 429s within its delivery
timeout instead (``sender``).

An ``https://`` proxy is verified with ``verify``: a CA bundle path, an ``ssl.SSLContext``,
or False (no verification, tests only); by default ``YAK_TLS_CA`` (else the default roots),
with the client certificate of ``YAK_TLS_CLIENT_CERT``/``YAK_TLS_CLIENT_KEY`` if set
(``yak.clients.tls``). ``cert`` (a PEM path, or certificate and key paths) presents a client
certificate: a proxy asking for one takes its subject as the principal (mutual TLS).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from yak.api.records import API_PREFIX
from yak.clients._http import error_from_response
from yak.clients.tls import ClientTls, ssl_context
from yak.errors import (
    KafkaTimeoutError,
    NetworkError,
    ThrottlingQuotaExceededError,
    UnknownServerError,
)
from yak.observability.request_id import propagate_request_id

__all__ = ["ApiClient", "Params", "Verify", "auth_headers", "client_verify", "throttle_ms"]

_M = TypeVar("_M", bound=BaseModel)
_JSON_TYPE = "application/json"

#: Query parameters; a sequence value repeats the parameter.
Params = Mapping[str, str | int | Sequence[str]]
#: How to verify an ``https://`` proxy: a CA bundle path, a context, False, or None (env).
Verify = str | ssl.SSLContext | bool | None


def client_verify(
    verify: Verify = None, cert: str | tuple[str, str] | None = None
) -> ssl.SSLContext | bool:
    """The ``verify`` argument of httpx for the SDK's options (see the module docstring)."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    cert_file, key_file = (cert, None) if isinstance(cert, str) else (cert or (None, None))
    if verify is False:
        return False
    if isinstance(verify, str):
        return ssl_context(verify, cert_file, key_file)
    env = ClientTls.from_env()
    if cert_file is not None:
        return ssl_context(env.ca_file, cert_file, key_file)
    return env.ssl_context() if env.configured else True


def auth_headers(
    *, api_key: str | None = None, username: str | None = None, password: str | None = None
) -> dict[str, str]:
    """The ``Authorization`` header for an API key or a user name and password (or none)."""
    if api_key is not None and username is not None:
        raise ValueError("give an api_key or a username and password, not both")
    if api_key is not None:
        return {"authorization": f"Bearer {api_key}"}
    if username is not None:
        if password is None:
            raise ValueError("a username needs a password")
        basic = base64.b64encode(f"{username}:{password}".encode()).decode()
        return {"authorization": f"Basic {basic}"}
    return {}


class ApiClient:
    """Requests to one rest-proxy at ``url`` (e.g. ``http://127.0.0.1:9430``)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        verify: Verify = None,
        cert: str | tuple[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._http = httpx.AsyncClient(
            base_url=f"{self.url}{API_PREFIX}",
            timeout=timeout_s,
            transport=transport,
            headers=auth_headers(api_key=api_key, username=username, password=password),
            verify=client_verify(verify, cert),
            # Inside a Yak service (the console) the request being served goes on.
            event_hooks={"request": [propagate_request_id]},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(
        self,
        method: str,
        path: str,
        body: BaseModel | bytes | None = None,
        *,
        content_type: str = _JSON_TYPE,
        params: Params | None = None,
        timeout_s: float | None = None,
        accept: str | None = None,
    ) -> httpx.Response:
        """The answer, whatever its status; transport failures as typed, retriable errors.

        A model is sent as JSON; bytes are sent as they are, as ``content_type``; ``accept``
        is sent as the ``Accept`` header.
        """
        content: str | bytes | None
        if body is None or isinstance(body, bytes):
            content = body
        else:
            content = body.model_dump_json(exclude_none=True)
        timeout = self._timeout_s if timeout_s is None else timeout_s
        headers = {"content-type": content_type} if content is not None else {}
        if accept is not None:
            headers["accept"] = accept
        try:
            return await self._http.request(
                method,
                path,
                content=content,
                headers=headers or None,
                params=params,
                timeout=timeout,
            )
        except httpx.TimeoutException as exc:
            raise KafkaTimeoutError(
                f"{method} {self.url}{API_PREFIX}{path}: no answer within {timeout:g} s"
            ) from exc
        except httpx.TransportError as exc:
            raise NetworkError(
                f"cannot reach the rest-proxy at {self.url}: {exc or type(exc).__name__}"
            ) from exc

    async def call(
        self,
        method: str,
        path: str,
        model: type[_M],
        body: BaseModel | bytes | None = None,
        *,
        content_type: str = _JSON_TYPE,
        params: Params | None = None,
        timeout_s: float | None = None,
        throttle_budget_s: float = 0.0,
    ) -> _M:
        """Send, raise the typed error of a non-2xx answer, else parse the answer as ``model``.

        A 429 over a quota is sent again after its ``Retry-After`` while the waits fit in
        ``throttle_budget_s`` (see the module docstring).
        """
        response = await self.exchange(
            method,
            path,
            body,
            content_type=content_type,
            params=params,
            timeout_s=timeout_s,
            throttle_budget_s=throttle_budget_s,
        )
        return self.parse(model, response)

    async def exchange(
        self,
        method: str,
        path: str,
        body: BaseModel | bytes | None = None,
        *,
        content_type: str = _JSON_TYPE,
        params: Params | None = None,
        timeout_s: float | None = None,
        throttle_budget_s: float = 0.0,
        accept: str | None = None,
    ) -> httpx.Response:
        """``call`` up to its answer: the 2xx answer itself, whatever its content type."""
        deadline = time.monotonic() + throttle_budget_s
        while True:
            response = await self.send(
                method,
                path,
                body,
                content_type=content_type,
                params=params,
                timeout_s=timeout_s,
                accept=accept,
            )
            if not response.is_error:
                return response
            error = error_from_response(response)
            if not isinstance(error, ThrottlingQuotaExceededError):
                raise error
            wait_s = throttle_ms(error) / 1000
            if time.monotonic() + wait_s > deadline:
                raise error
            await asyncio.sleep(wait_s)  # the proxy said when: a timed wait, not a poll

    def parse(self, model: type[_M], response: httpx.Response) -> _M:
        """A 2xx answer's JSON as ``model`` (``UnknownServerError`` if it is not one)."""
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            request = response.request
            raise UnknownServerError(
                f"{request.method} {request.url}: unexpected answer "
                f"({exc.error_count()} problem(s), first: {exc.errors()[0]['msg']})"
            ) from exc

    async def call_empty(
        self,
        method: str,
        path: str,
        body: BaseModel | None = None,
        *,
        params: Params | None = None,
    ) -> None:
        """Like ``call`` for answers without a body (204)."""
        response = await self.send(method, path, body, params=params)
        if response.is_error:
            raise error_from_response(response)


def throttle_ms(error: ThrottlingQuotaExceededError) -> float:
    """How long a throttled request must wait, from the answer's details (Retry-After)."""
    given = error.details.get("retry_after_ms")
    if not isinstance(given, int | float):
        seconds = error.details.get("retry_after_s")
        given = seconds * 1000 if isinstance(seconds, int | float) else 1000
    return float(given)
