"""JSON schemas: valid when ``jsonschema`` finds them valid against their own metaschema.

The draft is the one the schema's ``$schema`` names (``jsonschema.validators.validator_for``;
the latest draft when it names none), and ``check_schema`` validates the schema against that
draft's metaschema, as Confluent does. References are other schemas addressed by the ``$ref``
URL given as the reference's name; they are checked the same way and put in a
``referencing.Registry``, so a validator built from the parsed schema resolves them.

Compatibility: no well-kept Python library decides whether one JSON Schema accepts every
document another accepts, so the registry does not check JSON schemas for compatibility
(``incompatibilities`` is always empty) and says so in docs/schema-registry.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Not checked for JSON Schema (see the module doc): always compatible."""
    return []
