"""The proxy's client of a schema registry speaking Confluent's API (``httpx``).

Four calls: a schema by id, a subject's version (a number or ``latest``), and registering a
schema under a subject (which answers the existing id when the registry has it already).
Failures become the schema formats' typed errors: unreachable, timed out or 5xx is
``SchemaRegistryUnavailableError`` (retriable); an unknown id, subject or version, an invalid
or incompatible schema is ``InvalidSchemaError`` with the registry's own message. One
``AsyncClient`` per proxy process, shared by every request on the event loop. Under security
the caller's own credential goes along (``auth``: the proxy's ``ForwardedAuth``), so the
registry authorizes the end user, as the coordinator does for administration; ``tls`` (the
process's ``ClientTls``, from ``YAK_TLS_CA``…) verifies an https registry.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import quote

import httpx

from yak.clients.tls import ClientTls, default_context
from yak_rest_proxy.schemas.errors import InvalidSchemaError, SchemaRegistryUnavailableError
from yak_rest_proxy.schemas.schema_type import SchemaType

__all__ = ["RegisteredSchema", "RegistryClient"]

_CONTENT = "application/vnd.schemaregistry.v1+json"


class RegisteredSchema(NamedTuple):
    """A schema as the registry stores it."""

    schema_id: int
    schema_type: SchemaType
    text: str


class RegistryClient:
    """Confluent's Schema Registry API over HTTP, for the proxy's few needs."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        auth: httpx.Auth | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        tls = tls if tls is not None else ClientTls.from_env()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout_s,
            headers={"accept": _CONTENT},
            transport=transport,
            auth=auth,
            verify=tls.ssl_context() if tls.configured else default_context(),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = await self._http.request(
                method, path, json=body, headers={"content-type": _CONTENT} if body else None
            )
        except httpx.HTTPError as exc:
            raise SchemaRegistryUnavailableError(
                f"the schema registry at {self.base_url} did not answer: {exc!r}"
            ) from None
        if response.status_code >= 500:
            raise SchemaRegistryUnavailableError(
                f"the schema registry answered {response.status_code}: {response.text[:200]}"
            )
        if response.status_code >= 400:
            try:
                message = str(response.json().get("message", response.text))
            except ValueError:
                message = response.text
            raise InvalidSchemaError(f"schema registry: {message}")
        return response.json()

    async def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema of a global id."""
        body = await self._call("GET", f"/schemas/ids/{schema_id}")
        return _registered(schema_id, body)

    async def version(self, subject: str, version: int | str) -> RegisteredSchema:
        """A subject's version (``"latest"`` for the newest)."""
        body = await self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}")
        return _registered(int(body["id"]), body)

    async def register(self, subject: str, schema_type: SchemaType, text: str) -> int:
        """The id of ``text`` under ``subject``, registered if it is not yet."""
        body: dict[str, Any] = {"schema": text}
        if schema_type is not SchemaType.AVRO:
            body["schemaType"] = schema_type.value
        answer = await self._call("POST", f"/subjects/{quote(subject, safe='')}/versions", body)
        return int(answer["id"])


def _registered(schema_id: int, body: dict[str, Any]) -> RegisteredSchema:
    kind = SchemaType(body.get("schemaType") or "AVRO")
    return RegisteredSchema(schema_id, kind, str(body["schema"]))
