"""A typed client of Confluent's Schema Registry API, as Yak's registry serves it
(docs/schema-registry.md): what ``yak schemas`` and the console's schema page call.

Every answer of Confluent's API is a small JSON value; this client turns the ones it uses
into ``RegisteredSchema`` values and plain lists, and an error body ``{"error_code",
"message"}`` into ``SchemaRegistryError`` carrying Confluent's ``error_code`` (40401 subject
not found, 409 incompatible, 42201 invalid schema ...). A registry that cannot be reached
raises ``NetworkError``, one that answers late ``KafkaTimeoutError``, both retriable.

Credentials and TLS are the SDK's (``auth_headers``, ``client_verify``): an API key as
Bearer or a user name and password as Basic, ``YAK_TLS_CA`` for an ``https://`` registry.
One instance may serve concurrent tasks of one event loop. ``schema_diff`` is difflib's
unified diff of two versions' readable texts (JSON indented), for the CLI and the console.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

import httpx

from yak.clients._http import segment
from yak.errors import KafkaTimeoutError, NetworkError, YakError
from yak.observability.request_id import propagate_request_id
from yak.sdk._client import Verify, auth_headers, client_verify

__all__ = [
    "RegisteredSchema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "readable_text",
    "schema_diff",
]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(YakError):
    """An error answer of the registry; ``error_code`` is Confluent's number for it."""

    code = "SCHEMA_REGISTRY_ERROR"
    http_status = 422

    def __init__(self, message: str, *, error_code: int, status: int) -> None:
        super().__init__(message, error_code=error_code, status=status)
        self.error_code = error_code
        self.status = status


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A schema another one uses: its name there, and where it is registered."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """One version of a subject: its global ``id``, type and text."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()


def _references(items: Any) -> tuple[SchemaReference, ...]:
    return tuple(
        SchemaReference(str(i["name"]), str(i["subject"]), int(i["version"])) for i in items or ()
    )


class SchemaRegistryClient:
    """Requests to one registry at ``url`` (e.g. ``http://127.0.0.1:9460``)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        verify: Verify = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url,
            timeout=timeout_s,
            transport=transport,
            headers={
                "accept": _CONTENT_TYPE,
                **auth_headers(api_key=api_key, username=username, password=password),
            },
            verify=client_verify(verify),
            event_hooks={"request": [propagate_request_id]},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> SchemaRegistryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _call(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        headers = {"content-type": _CONTENT_TYPE} if body is not None else None
        try:
            response = await self._http.request(
                method, path, json=body, params=params, headers=headers
            )
        except httpx.TimeoutException as exc:
            raise KafkaTimeoutError(f"schema registry {self.url}: timed out ({exc})") from None
        except httpx.TransportError as exc:
            raise NetworkError(f"schema registry {self.url} unreachable: {exc}") from None
        try:
            document = response.json()
        except ValueError:
            document = None
        if response.is_success:
            return document
        if isinstance(document, dict) and "error_code" in document:
            raise SchemaRegistryError(
                str(document.get("message", "")),
                error_code=int(document["error_code"]),
                status=response.status_code,
            )
        raise SchemaRegistryError(
            f"HTTP {response.status_code}: {response.text[:200]}",
            error_code=response.status_code,
            status=response.status_code,
        )

    async def subjects(self, *, prefix: str | None = None, deleted: bool = False) -> list[str]:
        """The subjects with a live version (``deleted``: soft-deleted ones too)."""
        params = {"deleted": "true"} if deleted else {}
        if prefix:
            params["subjectPrefix"] = prefix
        return [str(s) for s in await self._call("GET", "/subjects", params=params)]

    async def versions(self, subject: str) -> list[int]:
        """The subject's live version numbers, oldest first."""
        return [int(v) for v in await self._call("GET", f"/subjects/{segment(subject)}/versions")]

    async def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """One version of ``subject`` (a number or ``latest``)."""
        path = f"/subjects/{segment(subject)}/versions/{segment(version)}"
        body = await self._call("GET", path)
        return RegisteredSchema(
            subject=str(body["subject"]),
            version=int(body["version"]),
            id=int(body["id"]),
            schema=str(body["schema"]),
            schema_type=str(body.get("schemaType", "AVRO")),
            references=_references(body.get("references")),
        )

    @staticmethod
    def _schema_body(
        schema: str, schema_type: str, references: tuple[SchemaReference, ...]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": schema}
        if schema_type.upper() != "AVRO":
            body["schemaType"] = schema_type.upper()
        if references:
            body["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version} for r in references
            ]
        return body

    async def register(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: tuple[SchemaReference, ...] = (),
    ) -> int:
        """Register ``schema`` under ``subject``; its global id (the same one again: its id)."""
        body = self._schema_body(schema, schema_type, references)
        answer = await self._call("POST", f"/subjects/{segment(subject)}/versions", body)
        return int(answer["id"])

    async def check(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: tuple[SchemaReference, ...] = (),
        *,
        version: int | str | None = None,
    ) -> tuple[bool, list[str]]:
        """Whether ``schema`` could be registered under the subject's level (or against one
        ``version``), with the registry's reasons when it could not."""
        path = f"/compatibility/subjects/{segment(subject)}/versions"
        if version is not None:
            path += f"/{segment(version)}"
        body = self._schema_body(schema, schema_type, references)
        answer = await self._call("POST", path, body, params={"verbose": "true"})
        return bool(answer["is_compatible"]), [str(m) for m in answer.get("messages") or ()]

    async def compatibility(self, subject: str | None = None) -> str:
        """The level in force: the subject's own, else the global one."""
        if subject is None:
            answer = await self._call("GET", "/config")
        else:
            params = {"defaultToGlobal": "true"}
            answer = await self._call("GET", f"/config/{segment(subject)}", params=params)
        return str(answer["compatibilityLevel"])

    async def set_compatibility(self, level: str, subject: str | None = None) -> str:
        """Set the global level, or ``subject``'s own; the level now in force there."""
        path = "/config" if subject is None else f"/config/{segment(subject)}"
        answer = await self._call("PUT", path, {"compatibility": level.upper()})
        return str(answer["compatibility"])

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete every version of ``subject`` (``permanent``: after a soft delete)."""
        params = {"permanent": "true"} if permanent else {}
        answer = await self._call("DELETE", f"/subjects/{segment(subject)}", params=params)
        return [int(v) for v in answer]

    async def delete_version(
        self, subject: str, version: int | str, *, permanent: bool = False
    ) -> int:
        """Soft-delete one version (``permanent``: after a soft delete); its number."""
        params = {"permanent": "true"} if permanent else {}
        path = f"/subjects/{segment(subject)}/versions/{segment(version)}"
        return int(await self._call("DELETE", path, params=params))


def readable_text(schema: RegisteredSchema) -> str:
    """The schema as people read it: JSON (Avro, JSON Schema) indented, ``.proto`` as is."""
    if schema.schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema.schema), indent=2, ensure_ascii=False) + "\n"
        except ValueError:
            pass
    return schema.schema if schema.schema.endswith("\n") else schema.schema + "\n"


def schema_diff(old: RegisteredSchema, new: RegisteredSchema) -> list[str]:
    """difflib's unified diff of the two versions' readable texts (empty: the same text)."""
    return list(
        difflib.unified_diff(
            readable_text(old).splitlines(keepends=True),
            readable_text(new).splitlines(keepends=True),
            fromfile=f"{old.subject} v{old.version} (id {old.id})",
            tofile=f"{new.subject} v{new.version} (id {new.id})",
        )
    )
