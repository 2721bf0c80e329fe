"""Building blocks of Yak's OpenAPI documents, shared by the proxy, coordinator and registry.

FastAPI's document says what the route signatures say: a topic is "a string", an answer is
200 or FastAPI's own 422. Yak's services enforce more, and a client generated from the
document (or schemathesis) must know it. Each service's ``openapi`` module completes its
document with these pieces:

- **Name schemas taken from the validators** the server runs (``yak.names``: Kafka's rule of
  1-249 of ``[a-zA-Z0-9._-]``, neither ``.`` nor ``..``; ``yak.metadata.keyspace`` applies
  the same rule to member, instance and user ids; a principal is ``User:<name>``), set on
  parameters by name (``constrain_parameters``).
- **Error answers**: every status the service may answer an operation with, each with the
  service's error body (``error_responses``); a 429 declares ``Retry-After`` and the
  ``RateLimit-*`` headers, a 405 ``Allow`` (``yak.web.allow`` makes it true), a 401
  ``WWW-Authenticate``.
- **Links** between operations (``add_link``): which answer field names the object a later
  operation takes in its path, so that a generated client (and a stateful test) can chain
  create → use → delete.

Everything here edits a plain JSON document in place; nothing is cached or shared.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from yak.api.admin import MAX_PARTITIONS
from yak.filters import MAX_FILTER_LENGTH
from yak.metadata.models import ShareGroupRecord
from yak.names import (
    INTERNAL_TOPIC_PREFIX,
    MAX_NAME_LENGTH,
    NAME_CHARACTER,
    NAME_PATTERN,
    RESERVED_NAMES,
)
from yak.topic_config import CATALOGUE

__all__ = [
    "BASE64_OR_NULL",
    "BASE64_PATTERN",
    "HTTP_METHODS",
    "ParameterRule",
    "PropertyRule",
    "add_link",
    "by_encoding",
    "changes_topic",
    "constrain_bodies",
    "constrain_parameters",
    "constrain_properties",
    "error_responses",
    "integer_text_pattern",
    "link_family",
    "name_schema",
    "operations",
    "principal_schema",
    "readiness_answers",
    "request_property_schema",
    "user_topic_schema",
]

_COMPONENT = "#/components/schemas/"
_TEXT = {"type": "string"}
HTTP_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})

#: (path, method, location, parameter name) -> the parameter's schema, or None to leave it.
ParameterRule = Callable[[str, str, str, str], "dict[str, Any] | None"]
#: (component schema name, property name) -> the property's schema, or None.
PropertyRule = Callable[[str, str], "dict[str, Any] | None"]

_RATE_LIMIT_HEADERS = {
    "Retry-After": "Seconds to wait before sending again",
    "RateLimit-Limit": "The quota's burst (bytes)",
    "RateLimit-Remaining": "What the caller may send now (bytes)",
    "RateLimit-Reset": "Seconds until the quota is whole again",
    "RateLimit-Policy": "The limit and its window (`<limit>;w=<seconds>`)",
}
_DESCRIPTIONS = {
    "400": "The request is invalid",
    "401": "No valid credential (security on)",
    "403": "The credential may not do this (security on)",
    "404": "No such object, or no such path",
    "405": "Not a method this path serves; `Allow` lists those it does",
    "406": "No acceptable representation",
    "408": "The request body came too slowly",
    "409": "Conflicts with the object's state",
    "413": "The request body is too large",
    "415": "Unsupported request content type",
    "416": "Offset out of range",
    "421": "Sent to a node that does not serve it",
    "422": "Valid JSON that cannot be processed",
    "429": "Over a quota or rate limit; retry after `Retry-After` seconds",
    "500": "Unexpected server error",
    "503": "Not available now (not ready, no controller, a dependency down)",
    "504": "A dependency did not answer in time",
}


def name_schema(title: str) -> dict[str, Any]:
    """A topic, group, member, instance or user name, as ``yak.names`` validates it."""
    return {
        "type": "string",
        "title": title,
        "minLength": 1,
        "maxLength": MAX_NAME_LENGTH,
        "pattern": NAME_PATTERN,
        "not": {"enum": list(RESERVED_NAMES)},
    }


def user_topic_schema(title: str = "Topic") -> dict[str, Any]:
    """A topic a user may create or change: a name, not one of Yak's internal topics."""
    schema = name_schema(title)
    reserved = {"enum": list(RESERVED_NAMES)}
    schema["not"] = {"anyOf": [reserved, {"pattern": f"^{INTERNAL_TOPIC_PREFIX}"}]}
    return schema


def changes_topic(path: str, method: str) -> bool:
    """Whether the operation creates, deletes or alters the topic its path names (a
    produce or a read does not)."""
    if method in ("delete", "patch", "put"):
        return not path.endswith(("/scheduled/{offset}", "/subscription"))
    return method == "post" and path.endswith(("/partitions", "/configs:alter"))


def principal_schema(title: str = "Principal") -> dict[str, Any]:
    """``User:<name>`` (``yak.security.acl.user_name``)."""
    return {
        "type": "string",
        "title": title,
        "pattern": f"^User:{NAME_CHARACTER}{{1,{MAX_NAME_LENGTH}}}$(?!\\n)",
        "not": {"enum": [f"User:{name}" for name in RESERVED_NAMES]},
    }


def operations(document: Mapping[str, Any]) -> Iterable[tuple[str, str, dict[str, Any]]]:
    """(path, method, operation) of every operation of ``document``."""
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if method in HTTP_METHODS and isinstance(operation, dict):
                yield path, method, operation


def constrain_parameters(document: dict[str, Any], rule: ParameterRule) -> None:
    """Replace the schema of every parameter ``rule`` has one for, keeping its description and
    default, whether it may be null, and whether it is a list (then ``rule`` gives the items')."""
    for path, method, operation in operations(document):
        for parameter in operation.get("parameters", ()):
            schema = rule(path, method, parameter.get("in", ""), parameter.get("name", ""))
            if schema is None:
                continue
            parameter["schema"] = _replaced(parameter.get("schema", {}), schema)


def constrain_properties(document: dict[str, Any], rule: PropertyRule) -> None:
    """Replace the schema of every component property ``rule`` has one for, as
    ``constrain_parameters`` does for parameters."""
    schemas = document.get("components", {}).get("schemas", {})
    for name in _request_components(document):
        properties = schemas[name].get("properties", {})
        for key, old in properties.items():
            schema = rule(name, key)
            if schema is not None:
                properties[key] = _replaced(old, schema)


def _request_components(document: dict[str, Any]) -> list[str]:
    """The component schemas request bodies use, directly or through others (sorted)."""
    schemas = document.get("components", {}).get("schemas", {})
    found: set[str] = set()
    pending: list[object] = [op.get("requestBody") for _p, _m, op in operations(document)]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_COMPONENT):
                name = ref.removeprefix(_COMPONENT)
                if name in schemas and name not in found:
                    found.add(name)
                    pending.append(schemas[name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return sorted(found)


_ARRAY_BOUNDS = ("minItems", "maxItems", "uniqueItems")


def _replaced(old: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` in place of ``old``, keeping its description, default, title, whether it may
    be null and whether it is a list (then ``schema`` is the items', unless it is a list too,
    and the list keeps its bounds)."""
    alternatives = old.get("anyOf", [old])
    listed = [alt for alt in alternatives if alt.get("type") == "array"]
    if schema.get("type") != "array" and listed:
        bounds = {key: listed[0][key] for key in _ARRAY_BOUNDS if key in listed[0]}
        schema = {"type": "array", "items": schema, **bounds}
    nullable = any(alt.get("type") == "null" for alt in alternatives)
    new = {"anyOf": [schema, {"type": "null"}]} if nullable else dict(schema)
    for key in ("description", "default", "title"):
        if key in old:
            new[key] = old[key]
    return new


def error_responses(
    statuses: Iterable[str], error_ref: str, *, media_type: str = "application/json"
) -> dict[str, Any]:
    """``responses`` entries for ``statuses``, each with the error body at ``error_ref``."""
    answers: dict[str, Any] = {}
    for status in statuses:
        answer: dict[str, Any] = {
            "description": _DESCRIPTIONS.get(status, "Error"),
            "content": {media_type: {"schema": {"$ref": error_ref}}},
        }
        headers = _headers(status)
        if headers:
            answer["headers"] = headers
        answers[status] = answer
    return answers


#: What ``/readyz`` answers (``yak.web.health``): 200 ready, 503 not ready and why.
_READINESS = {
    "title": "Readiness",
    "type": "object",
    "required": ["status", "service"],
    "properties": {
        "status": {"type": "string", "enum": ["ready", "not_ready"]},
        "service": {"type": "string"},
        "reason": {"type": "string", "description": "Why it is not ready"},
    },
}


def readiness_answers() -> dict[str, Any]:
    """``responses`` entries of ``GET /readyz``: its 200 and 503 bodies (not an error body)."""
    content = {"application/json": {"schema": copy.deepcopy(_READINESS)}}
    return {
        "200": {"description": "Ready to serve", "content": content},
        "503": {"description": "Not ready (a dependency down)", "content": copy.deepcopy(content)},
    }


def _headers(status: str) -> dict[str, Any]:
    text = {"type": "string"}
    if status == "429":
        return {
            name: {"description": description, "schema": text}
            for name, description in _RATE_LIMIT_HEADERS.items()
        }
    if status == "405":
        return {"Allow": {"description": "The methods the path serves", "schema": text}}
    if status == "401":
        return {"WWW-Authenticate": {"description": "The schemes accepted", "schema": text}}
    return {}


def add_link(
    document: dict[str, Any],
    source: tuple[str, str, str],
    name: str,
    target: tuple[str, str],
    parameters: Mapping[str, str],
) -> None:
    """Link the ``source`` answer (path, method, status) to the ``target`` operation (path,
    method), whose ``parameters`` (``path.group`` ...) come from runtime expressions
    (``$request.path.group``, ``$response.body#/instance_id``). Absent operations are skipped:
    a route that a configuration leaves out is not linked."""
    paths = document.get("paths", {})
    path, method, status = source
    target_path, target_method = target
    if method not in paths.get(path, {}) or target_method not in paths.get(target_path, {}):
        return
    answer = paths[path][method].get("responses", {}).get(status)
    if answer is None:
        return
    pointer = target_path.replace("~", "~0").replace("/", "~1")
    answer.setdefault("links", {})[name] = {
        "operationRef": f"#/paths/{pointer}/{target_method}",
        "parameters": dict(parameters),
    }


def link_family(
    document: dict[str, Any],
    source: tuple[str, str, str],
    prefix: str,
    parameters: Mapping[str, str],
) -> None:
    """Link the ``source`` answer to every other operation under ``prefix`` (``/topics/{topic}``
    and below), each given those of ``parameters`` its path takes."""
    for path, method, _operation in list(operations(document)):
        if not path.startswith(prefix) or (path, method) == source[:2]:
            continue
        taken = {
            key: value
            for key, value in parameters.items()
            if not key.startswith("path.") or "{" + key.removeprefix("path.") + "}" in path
        }
        add_link(document, source, f"{method.upper()} {path}", (path, method), taken)


#: Request properties that name a topic, a group member, or (in these bodies) the object made.
_TOPIC_PROPERTIES = frozenset({"topic", "dead_letter_topic", "topics"})
_MEMBER_PROPERTIES = frozenset({"member_id"})
_NAMED_BODIES = frozenset({"CreateShareGroupRequest", "CreateUserRequest"})
_CONFIG_NAMES = frozenset({("AlterConfigsRequest", "delete")})
_CONFIG_MAPS = frozenset({("AlterConfigsRequest", "set"), ("CreateTopicRequest", "configs")})
#: Share-group settings, bounded as the stored record (``ShareGroupRecord``) bounds them.
_SHARE_BODIES = frozenset({"CreateShareGroupRequest", "AlterShareGroupRequest"})
_SHARE_BOUNDED = frozenset({"max_delivery_attempts", "lock_duration_ms"})
_PARTITION_COUNTS = frozenset(
    {("CreateTopicRequest", "partitions"), ("CreatePartitionsRequest", "count")}
)


def request_property_schema(component: str, prop: str) -> dict[str, Any] | None:
    """The schema of a property of the shared request bodies (``yak.api``) that the server
    validates beyond its type: names (``yak.names``), topic config names
    (``yak.topic_config.CATALOGUE``), partition counts (``MAX_PARTITIONS``), filters,
    share-group settings (``ShareGroupRecord``'s bounds)."""
    if component == "TopicPartitionRef":
        return None  # ElectLeaders answers any name per partition (UNKNOWN_TOPIC_...), as Kafka
    if prop in _TOPIC_PROPERTIES:
        return name_schema("Topic")
    if prop in _MEMBER_PROPERTIES:
        return name_schema("Member")
    if prop == "topic_name" or (component, prop) == ("CreateTopicRequest", "name"):
        return user_topic_schema()
    if prop == "name" and component in _NAMED_BODIES:
        return name_schema("Name")
    if (component, prop) in _CONFIG_NAMES:
        return {"type": "string", "enum": sorted(CATALOGUE)}
    if (component, prop) in _CONFIG_MAPS:
        names = {"enum": sorted(CATALOGUE)}
        return {
            "type": "object",
            "propertyNames": names,
            "additionalProperties": {"type": "string"},
        }
    if component in _SHARE_BODIES and prop in _SHARE_BOUNDED:
        bounds = ShareGroupRecord.model_json_schema()["properties"][prop]
        return {"type": "integer", "minimum": bounds["minimum"], "maximum": bounds["maximum"]}
    if (component, prop) == ("ReassignmentRequest", "replicas"):  # no broker twice
        return {"type": "array", "items": {"type": "integer"}, "minItems": 1, "uniqueItems": True}
    if (component, prop) in _PARTITION_COUNTS:
        return {"type": "integer", "minimum": 1, "maximum": MAX_PARTITIONS}
    if prop == "filter":
        return {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_LENGTH}
    return None


_NULL = {"type": "null"}
#: What ``base64.b64decode(text, validate=True)`` takes (``records.encode_data``, the v3
#: produce's ``_base64``): groups of four of the alphabet, the last one padded with ``=``, or
#: whole groups followed by any number of ``=`` (which it ignores).
_B64 = "[A-Za-z0-9+/]"
BASE64_PATTERN = f"^(({_B64}{{4}})+=*|({_B64}{{4}})*({_B64}{{2}}==|{_B64}{{3}}=))?$(?!\\n)"
BASE64_OR_NULL: dict[str, Any] = {"anyOf": [{"type": "string", "pattern": BASE64_PATTERN}, _NULL]}
#: What a key or value in each encoding may be (``records.encode_data``): any JSON value,
#: text, base64 text; null for none in each.
_ENCODED: dict[str, dict[str, Any]] = {
    "json": {},
    "string": {"type": ["string", "null"]},
    "base64": BASE64_OR_NULL,
}


def _in_records(prop: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"records": {"items": {"properties": {prop: schema}}}}


def _in_headers(schema: dict[str, Any]) -> dict[str, Any]:
    header = {"items": {"properties": {"value": schema}}}
    return {"records": {"items": {"properties": {"headers": header}}}}


def _same_length(low: str, high: str) -> list[str]:
    """Regular expressions, one of which matches each decimal of ``low``'s length from
    ``low`` to ``high`` (as many digits)."""
    if low == high:
        return [low]
    if low.strip("0") == "" and high.strip("9") == "":
        return [f"[0-9]{{{len(low)}}}"]
    if len(low) == 1:
        return [f"[{low}-{high}]"]
    if low[0] == high[0]:
        return [low[0] + rest for rest in _same_length(low[1:], high[1:])]
    tail = len(low) - 1
    found = [low[0] + rest for rest in _same_length(low[1:], "9" * tail)]
    if int(high[0]) - int(low[0]) > 1:
        found.append(f"[{int(low[0]) + 1}-{int(high[0]) - 1}][0-9]{{{tail}}}")
    return found + [high[0] + rest for rest in _same_length("0" * tail, high[1:])]


def integer_text_pattern(low: int, high: int) -> str:
    """The pattern of the integers ``low``..``high`` (0 <= low, or -1) written in decimal
    without leading zeros: what ``int(text)`` and a range check take (Confluent's clients
    send some numbers as strings)."""
    found = ["-1"] if low == -1 else []
    low = max(low, 0)
    for digits in range(len(str(low)), len(str(high)) + 1):
        first = max(low, 10 ** (digits - 1) if digits > 1 else 0)
        last = min(high, 10**digits - 1)
        if first <= last:
            found += _same_length(str(first), str(last))
    return f"^({'|'.join(found)})$(?!\\n)"


def by_encoding(
    field: str,
    default: str,
    schemas: Mapping[str, dict[str, Any]],
    holding: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """The rule that ``field`` (``default`` when absent) names the encoding of what
    ``holding`` places: one alternative per encoding, with its ``schemas`` entry."""
    branches = []
    for name, schema in schemas.items():
        branch: dict[str, Any] = {"properties": {field: {"const": name}, **holding(schema)}}
        if name != default:
            branch["required"] = [field]
        branches.append(branch)
    return {"anyOf": branches}


#: A produce body's keys, values and header values are in the encodings it names.
_ENCODINGS_RULE = {
    "allOf": [
        by_encoding("key_encoding", "string", _ENCODED, lambda s: _in_records("key", s)),
        by_encoding("value_encoding", "json", _ENCODED, lambda s: _in_records("value", s)),
        by_encoding(
            "header_encoding", "string", {"string": {}, "base64": BASE64_OR_NULL}, _in_headers
        ),
    ]
}


def _just(given: str, *others: str, kind: str = "integer") -> dict[str, Any]:
    """``given`` is there (not null) and none of ``others`` is."""
    properties: dict[str, Any] = {given: {"type": kind}}
    properties.update(dict.fromkeys(others, _NULL))
    return {"required": [given], "properties": properties}


#: Rules between the fields of a request body that its model checks (``yak.api``), as the
#: alternatives JSON Schema states them with (``anyOf``; the branches exclude each other).
_BODY_RULES: dict[str, list[dict[str, Any]]] = {
    # JoinGroupRequest._one_subscription: topics (not empty) or a topic_pattern
    "JoinGroupRequest": [
        {"required": ["topics"], "properties": {"topics": {"minItems": 1}, "topic_pattern": _NULL}},
        {
            "required": ["topic_pattern"],
            "properties": {"topic_pattern": {"type": "string"}, "topics": {"maxItems": 0}},
        },
    ],
    # the native seek: exactly one of offset, to, timestamp
    "SeekPosition": [
        _just("offset", "to", "timestamp"),
        _just("to", "offset", "timestamp", kind="string"),
        _just("timestamp", "offset", "to"),
    ],
    # OffsetResetRequest._explicit_offsets: offsets exactly when to is "explicit" (and
    # "offset" and "timestamp" need theirs)
    "OffsetResetRequest": [
        {
            "required": ["to", "offsets"],
            "properties": {
                "to": {"const": "explicit"},
                "offsets": {"type": "array"},
                "topics": _NULL,  # _explicit_offsets: explicit takes offsets, not topics
            },
        },
        *(
            {
                "required": ["to", *needed],
                "properties": {
                    "to": {"enum": list(names)},
                    "offsets": _NULL,
                    **{field: {"type": "integer"} for field in needed},
                },
            }
            for names, needed in (
                (("earliest", "latest"), ()),
                (("offset",), ("offset",)),
                (("timestamp",), ("timestamp",)),
            )
        ),
    ],
    # records.encode_data: each key, value and header value in its encoding
    "ProduceRecordsRequest": [_ENCODINGS_RULE],
    "ProduceBatchRequest": [_ENCODINGS_RULE],
    # AckEntry._one_range: an offset, or first_offset and last_offset
    "AckEntry": [
        _just("offset", "first_offset", "last_offset"),
        {
            "required": ["first_offset", "last_offset"],
            "properties": {
                "offset": _NULL,
                "first_offset": {"type": "integer"},
                "last_offset": {"type": "integer"},
            },
        },
    ],
}


def constrain_bodies(
    document: dict[str, Any], more: Mapping[str, list[dict[str, Any]]] | None = None
) -> None:
    """Add the rules between fields of the shared request bodies (``_BODY_RULES``), and the
    service's own (``more``), to the components of ``document`` that have them."""
    schemas = document.get("components", {}).get("schemas", {})
    for name, alternatives in {**_BODY_RULES, **(more or {})}.items():
        if name in schemas:
            schemas[name]["anyOf"] = copy.deepcopy(alternatives)
