"""Compatibility levels: which versions are checked, in which direction."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.unit.schema_registry.conftest import avro_record
from yak_schema_registry.errors import InvalidCompatibilityLevelError, InvalidSchemaError
from yak_schema_registry.formats.compatibility import check_compatibility, parse_schema
from yak_schema_registry.formats.model import (
    CompatibilityLevel,
    ParsedSchema,
    SchemaSource,
    SchemaType,
)

A = {"name": "a", "type": "int"}
B = {"name": "b", "type": "int"}
B_DEFAULT = {"name": "b", "type": "int", "default": 0}
C = {"name": "c", "type": "int"}


def avro(*fields: Mapping[str, object]) -> ParsedSchema:
    return parse_schema(SchemaSource(SchemaType.AVRO, avro_record(*fields)), [])


# An added field without a default breaks BACKWARD; a removed one without a default breaks
# FORWARD; a field with a default added or removed breaks neither.
CASES = [
    (CompatibilityLevel.BACKWARD, [avro(A)], avro(A, B), False),
    (CompatibilityLevel.BACKWARD, [avro(A)], avro(A, B_DEFAULT), True),
    (CompatibilityLevel.BACKWARD, [avro(A, B)], avro(A), True),
    (CompatibilityLevel.FORWARD, [avro(A, B)], avro(A), False),
    (CompatibilityLevel.FORWARD, [avro(A)], avro(A, B), True),
    (CompatibilityLevel.FULL, [avro(A)], avro(A, B), False),
    (CompatibilityLevel.FULL, [avro(A, B)], avro(A), False),
    (CompatibilityLevel.FULL, [avro(A)], avro(A, B_DEFAULT), True),
    (CompatibilityLevel.NONE, [avro(A)], avro(C), True),
    # Non-transitive levels look at the latest version only; transitive ones at all.
    (CompatibilityLevel.BACKWARD, [avro(A), avro(B_DEFAULT)], avro(B_DEFAULT), True),
    (CompatibilityLevel.FORWARD, [avro(A, B), avro(A)], avro(A, C), True),
    (CompatibilityLevel.FORWARD_TRANSITIVE, [avro(A, B), avro(A)], avro(A, C), False),
    (CompatibilityLevel.BACKWARD_TRANSITIVE, [avro(C), avro(A, C)], avro(A, C), False),
    (CompatibilityLevel.FULL_TRANSITIVE, [avro(A), avro(A, B_DEFAULT)], avro(A), True),
]


@pytest.mark.parametrize(("level", "previous", "new", "compatible"), CASES)
def test_levels(
    level: CompatibilityLevel, previous: list[ParsedSchema], new: ParsedSchema, compatible: bool
) -> None:
    assert (check_compatibility(level, new, previous) == []) is compatible


def test_nothing_to_check_against_is_compatible() -> None:
    assert check_compatibility(CompatibilityLevel.FULL_TRANSITIVE, avro(A), []) == []


def test_a_change_of_type_is_incompatible_under_any_level_but_none() -> None:
    json_schema = parse_schema(SchemaSource(SchemaType.JSON, '{"type": "object"}'), [])
    problems = check_compatibility(CompatibilityLevel.BACKWARD, json_schema, [avro(A)])
    assert problems == ["reading older data: schema type JSON cannot read AVRO data"]
    assert check_compatibility(CompatibilityLevel.NONE, json_schema, [avro(A)]) == []


def test_messages_say_which_direction_failed() -> None:
    problems = check_compatibility(CompatibilityLevel.FULL, avro(A, B), [avro(A, C)])
    assert [p.split(":")[0] for p in problems] == ["reading older data", "older readers"]


def test_names_are_parsed_case_insensitively_and_refused_with_confluent_codes() -> None:
    assert CompatibilityLevel.of("full_transitive") is CompatibilityLevel.FULL_TRANSITIVE
    assert SchemaType.of(None) is SchemaType.AVRO
    assert SchemaType.of("protobuf") is SchemaType.PROTOBUF
    with pytest.raises(InvalidCompatibilityLevelError) as level:
        CompatibilityLevel.of("SIDEWAYS")
    assert level.value.error_code == 42203
    with pytest.raises(InvalidSchemaError) as schema_type:
        SchemaType.of("XML")
    assert schema_type.value.error_code == 42201
