"""JSON schemas: valid when ``jsonschema`` finds them valid against their own metaschema.

The draft is the one the schema's ``$schema`` names (``jsonschema.validators.validator_for``;
the latest draft when it names none), and ``check_schema`` validates the schema against that
draft's metaschema, as Confluent does. References are other schemas addressed by the ``$ref``
URL given as the reference's name; they are checked the same way and put in a
``referencing.Registry``, so a validator built from the parsed schema resolves them.

Compatibility: a reader schema can read what a writer schema wrote when it accepts every
document the writer accepts. ``jsoncompat`` (a Rust core with Python bindings) decides that
inclusion on the schemas' meaning (types widened or narrowed, ``required`` added, enums,
bounds, ``additionalProperties`` ...), as its "deserializer" role: the new schema (reader)
must accept everything the old one (writer) does. It reads one document with local
``#/...`` references only, and reads the 2020-12 draft: a schema of an older draft (what
Confluent's serializers generate: draft-07) is read as 2020-12 without its ``$schema`` unless
it uses a keyword whose meaning changed (``dependencies``, ``additionalItems``, ``items`` as a
list: jsoncompat would read them otherwise). A schema that uses another registered schema (a
reference), one of those keywords, or a keyword jsoncompat does not support cannot be
decided, and is then not checked (compatible, as docs/schema-registry.md says) rather than
refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsoncompat
import jsonschema.exceptions
import jsonschema.validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.model import ParsedSchema, SchemaSource

__all__ = ["incompatibilities", "parse"]


def _checked(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid JSON schema{what}: not JSON: {exc}") from None
    if not isinstance(document, dict | bool):
        raise InvalidSchemaError(f"Invalid JSON schema{what}: not an object or a boolean")
    try:
        jsonschema.validators.validator_for(document).check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchemaError(f"Invalid JSON schema{what}: {exc.message}") from None
    return document


def parse(source: SchemaSource, resolved: Sequence[tuple[str, str]]) -> ParsedSchema:
    """Check ``source`` and its references' texts (``(name, text)``) against their metaschemas;
    the parsed object is a validator whose registry holds the references."""
    registry: Registry[Any] = Registry()
    for name, text in resolved:
        document = _checked(text, f" reference {name!r}")
        # ``$schema`` names the draft; without one, the latest (as validator_for assumes).
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        registry = registry.with_resource(name, resource)
    document = _checked(source.text, "")
    validator = jsonschema.validators.validator_for(document)(document, registry=registry)
    return ParsedSchema(
        schema_type=source.schema_type,
        text=json.dumps(document, separators=(",", ":"), ensure_ascii=False),
        identity=json.dumps(document, separators=(",", ":"), sort_keys=True),
        references=source.references,
        parsed=validator,
    )


#: The draft jsoncompat reads; a document naming no draft is read as this one too.
_DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
#: Keywords whose meaning before 2020-12 differs from theirs in 2020-12.
_CHANGED_KEYWORDS = frozenset({"dependencies", "additionalItems"})


def _changed_meaning(node: Any) -> bool:
    """Whether ``node`` uses a keyword that an older draft means otherwise than 2020-12."""
    if isinstance(node, list):
        return any(_changed_meaning(item) for item in node)
    if not isinstance(node, dict):
        return False
    if _CHANGED_KEYWORDS & node.keys() or isinstance(node.get("items"), list):
        return True
    return any(_changed_meaning(value) for value in node.values())


def _as_2020_12(text: str) -> str | None:
    """The schema as a 2020-12 document for jsoncompat, or None if it would mean otherwise."""
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("$schema", _DRAFT_2020_12) in (
        _DRAFT_2020_12,
        _DRAFT_2020_12 + "#",
    ):
        return text
    if _changed_meaning(document):
        return None
    document.pop("$schema")
    return json.dumps(document)


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why ``reader`` does not accept every document ``writer`` accepts (empty: it does, or
    jsoncompat cannot decide: see the module doc)."""
    if reader.references or writer.references:
        return []
    new, old = _as_2020_12(reader.text), _as_2020_12(writer.text)
    if new is None or old is None:
        return []
    try:
        accepts = jsoncompat.check_compat(old, new, jsoncompat.Role.DESERIALIZER)
    except ValueError:
        return []
    if accepts:
        return []
    return ["the new schema refuses documents that the old schema accepts"]
