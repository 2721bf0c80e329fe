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

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from yak.names import MAX_NAME_LENGTH, NAME_CHARACTER, NAME_PATTERN, RESERVED_NAMES

__all__ = [
    "HTTP_METHODS",
    "ParameterRule",
    "add_link",
    "constrain_parameters",
    "error_responses",
    "link_family",
    "name_schema",
    "operations",
    "principal_schema",
]

HTTP_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})

#: (path, location, parameter name) -> the parameter's schema, or None to leave it as it is.
ParameterRule = Callable[[str, str, str], "dict[str, Any] | None"]

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
    for path, _method, operation in operations(document):
        for parameter in operation.get("parameters", ()):
            schema = rule(path, parameter.get("in", ""), parameter.get("name", ""))
            if schema is None:
                continue
            old = parameter.get("schema", {})
            alternatives = old.get("anyOf", [old])
            if any(alt.get("type") == "array" for alt in alternatives):
                schema = {"type": "array", "items": schema}
            nullable = any(alt.get("type") == "null" for alt in alternatives)
            new = {"anyOf": [schema, {"type": "null"}]} if nullable else dict(schema)
            for key in ("description", "default"):
                if key in old:
                    new[key] = old[key]
            parameter["schema"] = new


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
