"""JSON schemas: valid when their draft's metaschema says so; compatible when the reader
accepts every document the writer accepts (jsoncompat), each rule checked both ways."""

from __future__ import annotations

import json

import jsoncompat
import pytest

from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.json_format import incompatibilities, parse
from yak_schema_registry.formats.model import Reference, SchemaSource, SchemaType

OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}}


def _source(document: object, *refs: Reference) -> SchemaSource:
    return SchemaSource(SchemaType.JSON, json.dumps(document), refs)


def test_a_valid_schema_keeps_its_text_compact_and_validates() -> None:
    parsed = parse(_source(OBJECT), [])
    assert parsed.text == json.dumps(OBJECT, separators=(",", ":"))
    validator = parsed.parsed
    assert validator.is_valid({"a": 1})  # type: ignore[attr-defined]
    assert not validator.is_valid({"a": "x"})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"type": "nope"}, "not valid"),
        ({"type": "object", "required": "a"}, "not of type 'array'"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "minimum": "1"}, "number"),
        ([1, 2], "not an object or a boolean"),
    ],
)
def test_schemas_their_metaschema_refuses_are_invalid(document: object, problem: str) -> None:
    with pytest.raises(InvalidSchemaError, match=problem):
        parse(_source(document), [])


def test_a_reference_is_resolved_by_its_name() -> None:
    ref = Reference("https://example.com/address.json", "address", 1)
    address = {"type": "object", "required": ["city"]}
    document = {"type": "object", "properties": {"home": {"$ref": ref.name}}}
    parsed = parse(_source(document, ref), [(ref.name, json.dumps(address))])
    validator = parsed.parsed
    assert validator.is_valid({"home": {"city": "Oslo"}})  # type: ignore[attr-defined]
    assert not validator.is_valid({"home": {}})  # type: ignore[attr-defined]


def _compatible(reader: object, writer: object) -> bool:
    return incompatibilities(parse(_source(reader), []), parse(_source(writer), [])) == []


def _closed(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _open(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties}


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


WIDENINGS: list[tuple[str, object, object]] = [
    # Each pair: every document ``narrow`` accepts, ``wide`` accepts, not the reverse.
    ("type widened", INTEGER, {"type": "number"}),
    ("null allowed", STRING, {"type": ["string", "null"]}),
    ("enum value added", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}),
    ("maximum raised", {"type": "integer", "maximum": 5}, {"type": "integer", "maximum": 10}),
    (
        "maxLength raised",
        {"type": "string", "maxLength": 3},
        {"type": "string", "maxLength": 9},
    ),
    ("required dropped", {**_open(a=STRING), "required": ["a"]}, _open(a=STRING)),
    ("property added to a closed model", _closed(a=STRING), _closed(a=STRING, b=INTEGER)),
    ("property removed from an open model", _open(a=STRING, b=INTEGER), _open(a=STRING)),
    ("closed model opened", _closed(a=STRING), _open(a=STRING)),
    ("items widened", {"type": "array", "items": INTEGER}, {"type": "array"}),
    (
        "local $ref widened",
        {**_open(a={"$ref": "#/$defs/x"}), "$defs": {"x": INTEGER}},
        _open(a={"type": "number"}),
    ),
]


@pytest.mark.parametrize(("rule", "narrow", "wide"), WIDENINGS)
def test_a_reader_accepting_more_reads_the_writer_but_not_the_reverse(
    rule: str, narrow: object, wide: object
) -> None:
    assert _compatible(wide, narrow), rule
    assert not _compatible(narrow, wide), rule


@pytest.mark.parametrize(("rule", "narrow", "wide"), WIDENINGS)
def test_what_the_writer_accepts_jsonschema_finds_the_reader_accepts(
    rule: str, narrow: object, wide: object
) -> None:
    """The verdict checked by another implementation: documents jsoncompat generates for the
    writer are valid, by ``jsonschema``, against the reader it called compatible."""
    writer = parse(_source(narrow), [])
    reader = parse(_source(wide), [])
    assert incompatibilities(reader, writer) == [], rule
    for _ in range(30):
        document = json.loads(jsoncompat.generate_value(writer.text, 5))
        assert writer.parsed.is_valid(document), (rule, document)  # type: ignore[attr-defined]
        assert reader.parsed.is_valid(document), (rule, document)  # type: ignore[attr-defined]


def test_a_typed_property_added_to_an_open_model_breaks_backward_only() -> None:
    # The old open model took any ``b``; the new one only integers (Confluent's
    # PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL); the old reads what the new writes.
    old, new = _open(a=STRING), _open(a=STRING, b=INTEGER)
    assert not _compatible(new, old)
    assert _compatible(old, new)


def test_an_unchanged_schema_is_compatible_and_the_message_says_what_broke() -> None:
    assert _compatible(_closed(a=STRING), _closed(a=STRING))
    old, new = parse(_source(STRING), []), parse(_source(INTEGER), [])
    assert incompatibilities(new, old) == [
        "the new schema refuses documents that the old schema accepts"
    ]


def test_a_draft_07_schema_is_read_as_2020_12_when_its_keywords_mean_the_same() -> None:
    old = {"$schema": DRAFT_07, **_open(a=STRING), "required": ["a"]}
    new = {"$schema": DRAFT_07, **_open(a=STRING)}
    assert _compatible(new, old)
    assert not _compatible(old, new)
    definitions = {"$schema": DRAFT_07, **_open(a={"$ref": "#/definitions/x"})}
    assert not _compatible(
        {**definitions, "definitions": {"x": INTEGER}},
        {**definitions, "definitions": {"x": STRING}},
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # Keywords an older draft means otherwise: not decided, so not refused.
        (
            {"$schema": DRAFT_07, "type": "array", "items": [STRING]},
            {"type": "array", "items": INTEGER},
        ),
        ({"$schema": DRAFT_07, "type": "object", "dependencies": {"a": ["b"]}}, INTEGER),
        # What jsoncompat does not support: a non-integral multipleOf.
        ({"type": "number", "multipleOf": 0.5}, STRING),
    ],
)
def test_what_jsoncompat_cannot_decide_is_not_checked(old: object, new: object) -> None:
    assert _compatible(new, old)


def test_schemas_with_references_are_not_checked() -> None:
    ref = Reference("https://example.com/address.json", "address", 1)
    address = json.dumps({"type": "object"})
    old = parse(_source(_open(home={"$ref": ref.name}), ref), [(ref.name, address)])
    new = parse(_source(INTEGER), [])
    assert incompatibilities(new, old) == []
    assert incompatibilities(old, new) == []
