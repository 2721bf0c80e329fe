"""Protobuf compatibility: each of Confluent's rules, compatible and incompatible, on ``.proto``
text and on descriptors (and one against the other)."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorProto

from yak_schema_registry.formats.model import SchemaSource, SchemaType
from yak_schema_registry.formats.protobuf_compatibility import Shape, differences, shape_of
from yak_schema_registry.formats.protobuf_format import parse


def _shape(body: str, *, syntax: str = "proto3", package: str = "demo") -> Shape:
    header = f'syntax = "{syntax}";\n' + (f"package {package};\n" if package else "")
    return shape_of(parse(SchemaSource(SchemaType.PROTOBUF, header + body), []).parsed)


def _diff(reader: str, writer: str, *, syntax: str = "proto3") -> list[str]:
    return differences(_shape(reader, syntax=syntax), _shape(writer, syntax=syntax))


BASE = "message U { int32 id = 1; string name = 2; }"


@pytest.mark.parametrize(
    ("change", "reader"),
    [
        ("field added", "message U { int32 id = 1; string name = 2; bool ok = 3; }"),
        ("field removed", "message U { int32 id = 1; }"),
        ("field renamed", "message U { int32 ident = 1; string nick = 2; }"),
        ("message added", BASE + " message V { int32 a = 1; }"),
        ("nested message added", "message U { int32 id = 1; string name = 2; message N {} }"),
        ("varint widened", "message U { int64 id = 1; string name = 2; }"),
        ("varint to bool", "message U { bool id = 1; string name = 2; }"),
        ("string to bytes", "message U { int32 id = 1; bytes name = 2; }"),
        ("comments and spacing", "// hi\nmessage U {\n  int32 id = 1;\n  string name = 2;\n}"),
        (
            "new oneof of one moved field",
            "message U { int32 id = 1; oneof o { string name = 2; } }",
        ),
        ("field added to a new oneof", BASE.replace("}", "oneof o { bool a = 3; bool b = 4; } }")),
    ],
)
def test_compatible_changes(change: str, reader: str) -> None:
    assert _diff(reader, BASE) == [], change


@pytest.mark.parametrize(
    ("rule", "reader"),
    [
        ("MESSAGE_REMOVED at #/U", "message V { int32 id = 1; }"),
        ("FIELD_SCALAR_KIND_CHANGED at #/U/1", "message U { sint32 id = 1; string name = 2; }"),
        ("FIELD_SCALAR_KIND_CHANGED at #/U/1", "message U { double id = 1; string name = 2; }"),
        ("FIELD_SCALAR_KIND_CHANGED at #/U/2", "message U { int32 id = 1; int64 name = 2; }"),
        ("FIELD_SCALAR_KIND_CHANGED at #/U/1", "message U { fixed32 id = 1; string name = 2; }"),
        ("FIELD_KIND_CHANGED at #/U/2", "message U { int32 id = 1; V name = 2; } message V {}"),
        (
            "FIELD_KIND_CHANGED at #/U/1",
            "message U { map<string, int32> id = 1; string name = 2; }",
        ),
    ],
)
def test_incompatible_changes(rule: str, reader: str) -> None:
    assert rule in _diff(reader, BASE)


def test_scalar_kinds_within_a_group_are_compatible_both_ways() -> None:
    for a, b in [("sint32", "sint64"), ("fixed32", "sfixed32"), ("fixed64", "sfixed64")]:
        one, other = f"message U {{ {a} x = 1; }}", f"message U {{ {b} x = 1; }}"
        assert _diff(one, other) == _diff(other, one) == []
    assert _diff("message U { float x = 1; }", "message U { double x = 1; }") == [
        "FIELD_SCALAR_KIND_CHANGED at #/U/1"
    ]


def test_a_message_removed_is_incompatible_one_way_only() -> None:
    two = BASE + " message V { int32 a = 1; }"
    assert _diff(BASE, two) == ["MESSAGE_REMOVED at #/V"]
    assert _diff(two, BASE) == []
    nested = "message U { int32 id = 1; string name = 2; message N { int32 a = 1; } }"
    assert _diff(BASE, nested) == ["MESSAGE_REMOVED at #/U.N"]


def test_named_types_are_resolved_before_they_are_compared() -> None:
    writer = "message U { N n = 1; E e = 2; message N {} enum E { A = 0; } } message N {}"
    same = "message U { U.N n = 1; .demo.U.E e = 2; message N {} enum E { A = 0; } } message N {}"
    assert _diff(same, writer) == []
    outer = "message U { .demo.N n = 1; E e = 2; message N {} enum E { A = 0; } } message N {}"
    assert _diff(outer, writer) == ["FIELD_NAMED_TYPE_CHANGED at #/U/1"]


def test_map_value_types_are_compared() -> None:
    writer = "message U { map<string, int32> m = 1; }"
    assert _diff("message U { map<string, int32> m = 1; }", writer) == []
    assert _diff("message U { map<string, string> m = 1; }", writer) == [
        "FIELD_NAMED_TYPE_CHANGED at #/U/1"
    ]


def test_a_package_rename_alone_is_compatible() -> None:
    text = "message U { N n = 1; } message N {}"
    assert differences(_shape(text, package="other"), _shape(text)) == []


def test_required_fields_added_or_removed_are_incompatible() -> None:
    plain = "message U { optional int32 id = 1; }"
    required = "message U { optional int32 id = 1; required string name = 2; }"
    assert _diff(required, plain, syntax="proto2") == ["REQUIRED_FIELD_ADDED at #/U/2"]
    assert _diff(plain, required, syntax="proto2") == ["REQUIRED_FIELD_REMOVED at #/U/2"]
    optional = "message U { optional int32 id = 1; optional string name = 2; }"
    assert _diff(optional, plain, syntax="proto2") == []


def test_oneof_rules() -> None:
    in_oneof = "message U { int32 id = 1; oneof o { string name = 2; bool flag = 3; } }"
    assert _diff("message U { int32 id = 1; oneof o { string name = 2; } }", in_oneof) == [
        "ONEOF_FIELD_REMOVED at #/U/3"
    ]
    plain = "message U { int32 id = 1; string name = 2; bool flag = 3; }"
    assert _diff(in_oneof, plain) == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF at #/U/2"]
    existing = "message U { string name = 2; oneof o { int32 id = 1; bool flag = 3; } }"
    had_oneof = "message U { int32 id = 1; string name = 2; oneof o { bool flag = 3; } }"
    assert _diff(existing, had_oneof) == ["FIELD_MOVED_TO_EXISTING_ONEOF at #/U/1"]
    assert _diff(plain, in_oneof) == []  # fields out of a oneof: compatible


def _descriptor(*fields: FieldDescriptorProto, package: str = "demo") -> FileDescriptorProto:
    descriptor = FileDescriptorProto(name="u.proto", package=package, syntax="proto3")
    message = descriptor.message_type.add(name="U")
    message.field.extend(fields)
    entry = message.nested_type.add(name="MEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=FieldDescriptorProto.TYPE_STRING)
    entry.field.add(name="value", number=2, type=FieldDescriptorProto.TYPE_INT32)
    message.oneof_decl.add(name="_opt")
    return descriptor


def _field(name: str, number: int, kind: int, **extra: object) -> FieldDescriptorProto:
    label = FieldDescriptorProto.LABEL_OPTIONAL
    return FieldDescriptorProto(name=name, number=number, type=kind, label=label, **extra)  # type: ignore[arg-type]


def test_a_descriptor_has_the_shape_of_its_text() -> None:
    repeated = FieldDescriptorProto.LABEL_REPEATED
    descriptor = _descriptor(
        _field("id", 1, FieldDescriptorProto.TYPE_INT32),
        _field("opt", 2, FieldDescriptorProto.TYPE_STRING, oneof_index=0, proto3_optional=True),
        FieldDescriptorProto(
            name="m",
            number=3,
            label=repeated,
            type=FieldDescriptorProto.TYPE_MESSAGE,
            type_name=".demo.U.MEntry",
        ),
    )
    text = "message U { int32 id = 1; optional string opt = 2; map<string, int32> m = 3; }"
    assert shape_of(descriptor) == _shape(text)
    assert differences(shape_of(descriptor), _shape(text)) == []
    changed = _shape("message U { sint32 id = 1; optional string opt = 2; }")
    assert differences(changed, shape_of(descriptor)) == ["FIELD_SCALAR_KIND_CHANGED at #/U/1"]
