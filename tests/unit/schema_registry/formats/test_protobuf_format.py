"""Protobuf schemas: parsed strictly; the identity ignores spacing and comments."""

from __future__ import annotations

import pytest

from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.model import Reference, SchemaSource, SchemaType
from yak_schema_registry.formats.protobuf_format import incompatibilities, parse

USER = 'syntax = "proto3";\npackage demo;\nmessage User { string name = 1; int64 id = 2; }\n'


def _parse(text: str, *refs: Reference, resolved: list[tuple[str, str]] | None = None) -> object:
    return parse(SchemaSource(SchemaType.PROTOBUF, text, refs), resolved or [])


def test_spacing_keeps_the_identity_and_the_text_is_kept() -> None:
    parsed = parse(SchemaSource(SchemaType.PROTOBUF, USER), [])
    spaced = USER.replace("{ ", "{\n\n    ").replace("; }", ";\n}").replace(" = ", "=")
    other = parse(SchemaSource(SchemaType.PROTOBUF, spaced), [])
    assert parsed.text == USER
    assert parsed.identity == other.identity
    renamed = parse(SchemaSource(SchemaType.PROTOBUF, USER.replace("name", "nick")), [])
    assert renamed.identity != parsed.identity


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "",
        'syntax = "proto3"; message M { string a = ; }',
        'syntax = "proto3"; message M { string a = 1 }',
        'syntax = "proto3"; message M { string a = 1;',
        'syntax = "proto3"; message M { string a = 1; } @',  # the lexer's error, not skipped
    ],
)
def test_syntax_errors_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid Protobuf schema"):
        _parse(text)


def test_an_invalid_import_is_refused_with_its_name() -> None:
    ref = Reference("other.proto", "other", 1)
    text = 'syntax = "proto3"; import "other.proto"; message M { Other o = 1; }'
    with pytest.raises(InvalidSchemaError, match=r"other\.proto"):
        _parse(text, ref, resolved=[("other.proto", "message {")])
    _parse(text, ref, resolved=[("other.proto", 'syntax = "proto3"; message Other {}')])


def test_the_whole_language_parses() -> None:
    text = (
        'syntax = "proto3"; package a.b; import "google/protobuf/timestamp.proto";'
        "message M { map<string, int32> m = 1; oneof o { string s = 2; } repeated M r = 3;"
        " enum E { A = 0; } google.protobuf.Timestamp at = 4; }"
        "service S { rpc Get(M) returns (M); }"
    )
    assert _parse(text) is not None


def test_compatibility_is_not_checked() -> None:
    old = parse(SchemaSource(SchemaType.PROTOBUF, USER), [])
    new = parse(SchemaSource(SchemaType.PROTOBUF, USER.replace("int64", "string")), [])
    assert incompatibilities(new, old) == []
