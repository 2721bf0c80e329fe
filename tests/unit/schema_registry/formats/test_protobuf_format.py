"""Protobuf schemas: parsed strictly; the identity ignores spacing and comments."""

from __future__ import annotations

import base64

import pytest
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorProto

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


def _descriptor(*type_names: str) -> FileDescriptorProto:
    """``user.proto``: message User with a string and fields of ``type_names``."""
    descriptor = FileDescriptorProto(name="user.proto", package="demo", syntax="proto3")
    message = descriptor.message_type.add(name="User")
    message.field.add(name="name", number=1, type=FieldDescriptorProto.TYPE_STRING)
    for number, type_name in enumerate(type_names, start=2):
        message.field.add(
            name=f"f{number}",
            number=number,
            type=FieldDescriptorProto.TYPE_MESSAGE,
            type_name=type_name,
        )
    return descriptor


def _b64(descriptor: FileDescriptorProto) -> str:
    return base64.b64encode(descriptor.SerializeToString()).decode()


def test_a_base64_descriptor_is_accepted_as_confluents_serializer_sends_it() -> None:
    descriptor = _descriptor(".google.protobuf.Timestamp")
    descriptor.dependency.append("google/protobuf/timestamp.proto")
    parsed = parse(SchemaSource(SchemaType.PROTOBUF, _b64(descriptor)), [])
    assert parsed.text == _b64(descriptor)
    assert isinstance(parsed.parsed, FileDescriptorProto)
    assert parsed.parsed.message_type[0].name == "User"


def test_a_descriptor_protobuf_cannot_build_is_refused() -> None:
    with pytest.raises(InvalidSchemaError, match=r"demo\.Missing"):
        parse(SchemaSource(SchemaType.PROTOBUF, _b64(_descriptor(".demo.Missing"))), [])


def test_a_descriptor_builds_on_its_descriptor_references() -> None:
    other = FileDescriptorProto(name="other.proto", package="demo", syntax="proto3")
    other.message_type.add(name="Other")
    descriptor = _descriptor(".demo.Other")
    descriptor.dependency.append("other.proto")
    source = SchemaSource(
        SchemaType.PROTOBUF, _b64(descriptor), (Reference("other.proto", "other", 1),)
    )
    parse(source, [("other.proto", _b64(other))])
    with pytest.raises(InvalidSchemaError, match=r"demo\.Other"):
        parse(source, [("other.proto", _b64(FileDescriptorProto(name="other.proto")))])


def test_compatibility_is_checked_by_confluents_rules() -> None:
    old = parse(SchemaSource(SchemaType.PROTOBUF, USER), [])
    new = parse(SchemaSource(SchemaType.PROTOBUF, USER.replace("int64", "string")), [])
    assert incompatibilities(new, old) == ["FIELD_SCALAR_KIND_CHANGED at #/User/2"]
    renamed = parse(SchemaSource(SchemaType.PROTOBUF, USER.replace("name", "nick")), [])
    assert incompatibilities(renamed, old) == []
