"""The proxy's OpenAPI document: FastAPI's, completed with what the routes do by hand.

- Request bodies that routes read themselves (``body.read_body``) are declared with
  ``openapi_body``; their schemas travel in an ``x-yak-components`` key of the operation and are
  moved into ``components/schemas`` here, so every ``$ref`` resolves.
- Success answers of the Confluent v2 dialect are negotiated (``content.negotiate``): besides
  ``application/json`` they may be ``application/vnd.kafka.v2+json``, and records the consumer's
  ``application/vnd.kafka.{json,binary}.v2+json``. Each is declared with the same schema.
- Every operation declares the error statuses its dialect may answer, with the dialect's error
  body (``{"error_code", "message"}`` or ``{"code", "message", "details"}``), replacing FastAPI's
  default 422 body, which the proxy never sends.
- A native produce that takes an ``Idempotency-Key`` declares 422 too
  (``IDEMPOTENCY_KEY_REUSED``; the other native 4xx validation answers are 400).
- ``/readyz`` declares its own 200 and 503 bodies (``yak.web.health``), not the error body.
- The Server-Sent Events stream declares ``text/event-stream``, each event an object (``event``:
  ``records`` or ``error``, ``data``: JSON text), as SSE-aware tools read a stream.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from yak.filters import MAX_FILTER_LENGTH
from yak.topic_config import CATALOGUE
from yak.web.openapi import (
    BASE64_OR_NULL,
    BASE64_PATTERN,
    by_encoding,
    changes_topic,
    constrain_bodies,
    constrain_parameters,
    constrain_properties,
    error_responses,
    integer_text_pattern,
    link_family,
    name_schema,
    operations,
    principal_schema,
    readiness_answers,
    request_property_schema,
    user_topic_schema,
)
from yak_rest_proxy.http.errors import NATIVE_PREFIXES

__all__ = ["install_openapi"]

_V2_ERROR = {
    "title": "V2Error",
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}},
}
_NATIVE_ERROR = {
    "title": "NativeError",
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "details": {"type": "object"},
    },
}
#: Statuses each dialect answers errors with (``errors.v2_error``; ``YakError.http_status``;
#: 405 from routing, 408 from the body-timeout middleware, 429 from quotas and rate limits).
_V2_STATUSES = (
    *("400", "401", "403", "404", "405", "406", "408", "409", "413", "415", "416", "421"),
    *("422", "429", "500"),
)
_NATIVE_STATUSES = (
    *("400", "401", "403", "404", "405", "406", "408", "409", "413", "415", "416", "421"),
    *("429", "500", "503", "504"),
)
#: Path and query parameters named for what ``yak.names`` and ``keyspace`` validate.
_NAMES = {
    "topic": "Topic",
    "group": "Group",
    "instance": "Consumer instance",
    "member": "Member",
    "consumer_id": "Consumer",
    "user": "User",
}
_REF = "#/components/schemas/"
_V2_TYPES = ("application/vnd.kafka.v2+json",)
_V2_RECORD_TYPES = ("application/vnd.kafka.json.v2+json", "application/vnd.kafka.binary.v2+json")
#: Paths that need no credential even with security on (``security.route_acls``).
_PUBLIC_PATHS = ("/healthz", "/readyz")


def _is_native(path: str) -> bool:
    return path.startswith(NATIVE_PREFIXES)  # health and docs paths are among them


#: One event of a member's stream (``: idle`` comments carry none): ``records`` with a poll
#: answer, or ``error`` with the native error body, as JSON text in ``data`` (a share-group
#: stream starts with ``member``: its member id).
_SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        # ``member`` first on a share-group stream: the member id the proxy gave it
        "event": {"type": "string", "enum": ["member", "records", "error"]},
        "data": {"type": "string", "description": "JSON: a poll answer, or an error body"},
    },
    "required": ["event", "data"],
}


def _takes_idempotency_key(operation: dict[str, Any]) -> bool:
    parameters = operation.get("parameters", ())
    return any(p.get("name") == "Idempotency-Key" for p in parameters if isinstance(p, dict))


def _v3_names(operation: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """``components`` named ``V3<name>``, and ``operation``'s references to them: v3 bodies
    share names with native ones (``ProduceRecord``) that have other fields."""
    renamed = {name: f"V3{name}" for name in components if not name.startswith("V3")}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.removeprefix(_REF) in renamed:
                return {**node, "$ref": _REF + renamed[ref.removeprefix(_REF)]}
            return {key: rewrite(value) for key, value in node.items()}
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    operation.update(rewrite({key: operation[key] for key in list(operation)}))
    return {renamed.get(name, name): rewrite(schema) for name, schema in components.items()}


def _complete(path: str, method: str, operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    extra = operation.pop("x-yak-components", {})
    if path.startswith("/v3/"):
        extra = _v3_names(operation, extra)
    schemas.update(extra)
    responses: dict[str, Any] = operation.setdefault("responses", {})
    native = _is_native(path)
    for status, response in responses.items():
        content = response.get("content")
        if not status.startswith("2") or not isinstance(content, dict) or native:
            continue
        json_content = content.get("application/json")
        if json_content is None:
            continue
        extra = _V2_TYPES + (_V2_RECORD_TYPES if path.endswith("/records") else ())
        for media in extra:
            content.setdefault(media, copy.deepcopy(json_content))
    if path.endswith("/stream") and method == "get":
        responses["200"] = {
            "description": "Server-Sent Events: `records` events, `error` then the end",
            "content": {"text/event-stream": {"schema": _SSE_EVENT}},
        }
    if native:
        responses.pop("422", None)  # validation failures are 400 INVALID_REQUEST here
    error = {"$ref": "#/components/schemas/" + ("NativeError" if native else "V2Error")}
    statuses: list[str] = list(_NATIVE_STATUSES if native else _V2_STATUSES)
    if native and _takes_idempotency_key(operation):
        statuses.append("422")  # IDEMPOTENCY_KEY_REUSED
    if path in _PUBLIC_PATHS:  # no credential asked, no quota applied
        statuses = [status for status in statuses if status not in ("401", "403", "429")]
    responses.update(error_responses(statuses, error["$ref"]))
    if path == "/readyz":
        responses.update(readiness_answers())


def _parameter_schema(
    cluster_id: str, path: str, method: str, where: str, name: str
) -> dict[str, Any] | None:
    """The schema of a parameter the server validates beyond its type (None: as declared)."""
    if where == "path" and name == "topic" and changes_topic(path, method):
        return user_topic_schema()
    if where == "path" and name == "cluster_id":
        return {"type": "string", "title": "Cluster id", "enum": [cluster_id]}
    if where == "path" and name == "principal":
        return principal_schema()
    if where == "path" and name == "name" and "/configs/" in path:
        return {"type": "string", "title": "Topic config", "enum": sorted(CATALOGUE)}
    if where == "query" and name == "filter":
        return {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_LENGTH}
    if where == "query" and name == "member_id":  # empty: a new member, as when absent
        return {"anyOf": [name_schema("Member"), {"const": ""}]}
    if name in _NAMES and (where == "path" or (where == "query" and name == "topic")):
        return name_schema(_NAMES[name])
    return None


#: Offsets a request names: int64, never negative (``-1`` and such are answers' sentinels).
_OFFSETS = frozenset({"V2OffsetEntry", "CommitOffset", "SeekPosition"})
#: The RFC 3339 date-times ``datetime.fromisoformat`` reads: upper-case ``T`` and ``Z``, and
#: no leap second.
_RFC3339_READ = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-5][0-9](\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"
)
#: The v3 produce's record timestamps (``produce_request._timestamp``): RFC 3339 date-times
#: as ``datetime.fromisoformat`` reads them, not before 1970 (the server also takes a time
#: without zone, as UTC).
_V3_TIMESTAMP = (
    r"^(19[7-9][0-9]|[2-9][0-9]{3})-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-5][0-9](\.[0-9]+)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})$(?!\n)"
)
_PLAIN_FORMATS = ["binary", "json"]
_SCHEMA_FORMATS = ["avro", "jsonschema", "protobuf"]


def _property_schema(
    registry: bool, max_wait_ms: int, component: str, prop: str
) -> dict[str, Any] | None:
    """Request body properties the proxy validates beyond their type (``registry``: whether
    a schema registry is configured, without which the schema formats are refused;
    ``max_wait_ms``: the longest wait a v2 consumer may ask for)."""
    if component == "V2CreateConsumer" and prop in ("name", "id"):
        # consumer_routes.member_record: an empty one counts as none
        return {"anyOf": [name_schema("Consumer instance"), {"const": ""}]}
    if component == "V2CreateConsumer" and prop == "consumer.request.timeout.ms":
        integer = {"type": "integer", "minimum": 0, "maximum": max_wait_ms}
        return {
            "anyOf": [integer, {"type": "string", "pattern": integer_text_pattern(0, max_wait_ms)}]
        }
    if component == "AcquireRequest" and prop == "topics":
        return {"type": "array", "items": name_schema("Topic"), "minItems": 1}
    if component == "V2CreateConsumer" and prop == "partition.assignment.strategy":
        return {"type": "string", "enum": ["uniform", "range"]}
    if component == "V2CreateConsumer" and prop == "format":
        return {"type": "string", "enum": _PLAIN_FORMATS + (_SCHEMA_FORMATS if registry else [])}
    if component in ("V3ConfigEntry", "V3AlterConfigEntry") and prop == "name":
        return {"type": "string", "enum": sorted(CATALOGUE)}
    if component == "V2TimestampEntry" and prop == "timestamp":
        return {"type": "string", "format": "date-time", "pattern": _RFC3339_READ}
    if component == "V3ProduceRecordHeader" and prop == "value":
        return {"type": "string", "pattern": BASE64_PATTERN}  # produce_request._headers
    if component == "V3ProduceRecord" and prop == "timestamp":
        return {"type": "string", "format": "date-time", "pattern": _V3_TIMESTAMP}
    if component in _OFFSETS and prop == "offset":
        return {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    return request_property_schema(component, prop)


_TEXT = {"type": "string"}
#: A v3 key or value's ``data`` by its ``type`` (``produce_request._data``): base64 text, text
#: or any JSON, null for none.
_V3_DATA = {"BINARY": BASE64_OR_NULL, "STRING": {"type": ["string", "null"]}, "JSON": {}}


def _v3_body_rules(registry: bool) -> dict[str, list[dict[str, Any]]]:
    """v3 config entries (``api.v3``): a created topic's entries and an ``:alter`` SET need a
    value; a key or value's data is of its type, and with no schema registry configured the
    type is one of those the proxy encodes itself (the others, and none, need a schema)."""
    data = by_encoding("type", "", _V3_DATA, lambda schema: {"data": schema})
    if registry:
        schema_types = {"enum": ["AVRO", "JSONSCHEMA", "PROTOBUF", None]}
        data["anyOf"].append({"properties": {"type": schema_types}})
    return {
        "V3ConfigEntry": [{"required": ["value"], "properties": {"value": _TEXT}}],
        "V3AlterConfigEntry": [
            {
                "required": ["operation"],
                "properties": {"operation": {"enum": ["DELETE", "delete"]}},
            },
            {"required": ["value"], "properties": {"value": _TEXT}},
        ],
        "V3ProduceRecordData": data["anyOf"],
    }


_GROUP = {"path.group": "$request.path.group"}
_V3_TOPICS = "/v3/clusters/{cluster_id}/topics/{topic}"
#: (operation that creates, its success status, the paths below which the object is used, how
#: the later operations' path parameters follow from the answer).
_LINKS: tuple[tuple[tuple[str, str, str], tuple[str, ...], dict[str, str]], ...] = (
    (
        ("/consumers/{group}", "post", "200"),
        ("/consumers/{group}/instances/{instance}",),
        {**_GROUP, "path.instance": "$response.body#/instance_id"},
    ),
    (
        ("/api/v1/groups/{group}/members", "post", "201"),
        ("/api/v1/groups/{group}",),
        {**_GROUP, "path.member": "$response.body#/member_id"},
    ),
    (
        ("/api/v1/topics", "post", "201"),
        ("/api/v1/topics/{topic}", "/topics/{topic}", _V3_TOPICS),
        {"path.topic": "$response.body#/name"},
    ),
    (
        ("/v3/clusters/{cluster_id}/topics", "post", "201"),
        (_V3_TOPICS, "/topics/{topic}", "/api/v1/topics/{topic}"),
        {"path.cluster_id": "$request.path.cluster_id", "path.topic": "$response.body#/topic_name"},
    ),
    (
        ("/api/v1/share-groups", "post", "201"),
        ("/api/v1/share-groups/{group}",),
        {"path.group": "$response.body#/name"},
    ),
    (
        ("/api/v1/security/users", "post", "201"),
        ("/api/v1/security/users/{user}",),
        {"path.user": "$response.body#/user/name"},
    ),
    (
        ("/api/v1/security/users/{user}/keys", "post", "201"),
        ("/api/v1/security/users/{user}/keys/{key_id}",),
        {"path.user": "$request.path.user", "path.key_id": "$response.body#/key_id"},
    ),
)


def _link_operations(document: dict[str, Any]) -> None:
    """Links from each operation that creates an object to those that use it."""
    for source, prefixes, parameters in _LINKS:
        for prefix in prefixes:
            link_family(document, source, prefix, parameters)


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the builder above (cached after the first call)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas["V2Error"] = _V2_ERROR
        schemas["NativeError"] = _NATIVE_ERROR
        for path, method, operation in operations(document):
            _complete(path, method, operation, schemas)
        settings = app.state.runtime.settings
        cluster_id = settings.cluster_id
        registry = settings.schema_registry_url is not None
        constrain_parameters(document, lambda *where: _parameter_schema(cluster_id, *where))
        max_wait_ms = settings.consumer_request_max_timeout_ms
        constrain_properties(document, lambda *what: _property_schema(registry, max_wait_ms, *what))
        constrain_bodies(document, _v3_body_rules(registry))
        _link_operations(document)
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = document
        return document

    app.openapi = build  # type: ignore[method-assign]
