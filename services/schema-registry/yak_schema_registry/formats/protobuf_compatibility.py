"""Protobuf compatibility: Confluent's documented rules over the shape of two schemas.

Neither ``protobuf`` (it cannot read ``.proto`` text) nor ``proto-schema-parser`` compares two
files, so the registry reduces each schema, from the parser's tree or from a
``FileDescriptorProto``, to a *shape*: its messages by name (nested ones as ``Outer.Inner``,
relative to the file's package, so a package rename alone changes nothing), each with its
fields by number (type, ``required``, oneof) and its real oneofs (proto3's synthetic oneof of
an ``optional`` field is none). Types are resolved as protoc does, innermost scope first, and
a type declared in the file is named relative to its package.

A reader can read what a writer wrote unless one of Confluent's incompatible differences holds
(the names are Confluent's ``errorType``s), every other change (a field or message added, a
field renamed or removed, an enum value added or removed ...) being compatible:

- ``MESSAGE_REMOVED``: a message of the writer is not in the reader;
- ``FIELD_KIND_CHANGED``: a field number's type moves between scalar, named and map;
- ``FIELD_SCALAR_KIND_CHANGED``: a scalar field changes wire kind (varint ``int32 uint32 int64
  uint64 bool``, zigzag ``sint32 sint64``, ``fixed32 sfixed32``, ``fixed64 sfixed64``, length
  delimited ``string bytes``, ``float``, ``double``: within a group a change is compatible);
- ``FIELD_NAMED_TYPE_CHANGED``: a message, enum or map field names another type;
- ``REQUIRED_FIELD_ADDED`` / ``REQUIRED_FIELD_REMOVED`` (proto2);
- ``ONEOF_FIELD_REMOVED``: a field of a oneof is gone;
- ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``, ``FIELD_MOVED_TO_EXISTING_ONEOF``: plain fields put in
  one new oneof together, or into a oneof the writer already had.

Pure: no I/O; callers pass the parsed objects ``protobuf_format`` made.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)
from proto_schema_parser import ast

__all__ = ["Shape", "differences", "shape_of"]

_WIRE_KINDS = {
    **dict.fromkeys(("int32", "uint32", "int64", "uint64", "bool"), "varint"),
    **dict.fromkeys(("sint32", "sint64"), "zigzag"),
    **dict.fromkeys(("fixed32", "sfixed32"), "fixed32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "fixed64"),
    **dict.fromkeys(("string", "bytes"), "length-delimited"),
    "float": "float",
    "double": "double",
}
_DESCRIPTOR_SCALARS = {
    number: name.removeprefix("TYPE_").lower()
    for name, number in FieldDescriptorProto.Type.items()
    if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}


@dataclass(frozen=True, slots=True)
class FieldShape:
    """A field by what decides compatibility: ``kind`` is scalar, named or map; ``type`` the
    scalar's name, the resolved type's name, or ``map<key,value>``."""

    kind: str
    type: str
    required: bool = False
    oneof: str | None = None


@dataclass(slots=True)
class MessageShape:
    fields: dict[int, FieldShape] = field(default_factory=dict)


#: Messages by name relative to the file's package.
Shape = dict[str, MessageShape]


def shape_of(parsed: object) -> Shape:
    """The shape of what ``protobuf_format`` parsed: a parser tree or a descriptor."""
    if isinstance(parsed, FileDescriptorProto):
        return _DescriptorShape(parsed).shape
    assert isinstance(parsed, ast.File)
    return _TreeShape(parsed).shape


def _named(kind: str, type_name: str, required: bool, oneof: str | None) -> FieldShape:
    if type_name in _WIRE_KINDS:
        return FieldShape("scalar", type_name, required, oneof)
    return FieldShape(kind, type_name, required, oneof)


class _TreeShape:
    """The shape of ``proto-schema-parser``'s tree."""

    def __init__(self, tree: ast.File) -> None:
        self.package = next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")
        self.declared: set[str] = set()
        self._declare(tree.file_elements, "")
        self.shape: Shape = {}
        for element in tree.file_elements:
            if isinstance(element, ast.Message):
                self._message(element, "")

    def _declare(self, elements: list[Any], scope: str) -> None:
        for element in elements:
            if isinstance(element, ast.Message | ast.Enum):
                name = f"{scope}{element.name}"
                self.declared.add(name)
                if isinstance(element, ast.Message):
                    self._declare(element.elements, f"{name}.")

    def _resolve(self, type_name: str, scope: str) -> str:
        if type_name in _WIRE_KINDS:
            return type_name
        if type_name.startswith("."):
            absolute = type_name[1:]
            relative = absolute.removeprefix(f"{self.package}.") if self.package else absolute
            return relative if relative in self.declared else absolute
        parts = scope.split(".") if scope else []
        for depth in range(len(parts), -1, -1):
            candidate = ".".join([*parts[:depth], type_name])
            if candidate in self.declared:
                return candidate
        return type_name.removeprefix(f"{self.package}.") if self.package else type_name

    def _message(self, message: ast.Message, scope: str) -> None:
        name = f"{scope}{message.name}"
        shape = self.shape.setdefault(name, MessageShape())
        for element in message.elements:
            self._member(shape, element, name, None)
            if isinstance(element, ast.OneOf):
                for inner in element.elements:
                    self._member(shape, inner, name, element.name)
            elif isinstance(element, ast.Message):
                self._message(element, f"{name}.")

    def _member(self, shape: MessageShape, element: Any, scope: str, oneof: str | None) -> None:
        if isinstance(element, ast.Field):
            required = element.cardinality is ast.FieldCardinality.REQUIRED
            resolved = self._resolve(element.type, scope)
            shape.fields[element.number] = _named("named", resolved, required, oneof)
        elif isinstance(element, ast.MapField):
            key, value = element.key_type, self._resolve(element.value_type, scope)
            shape.fields[element.number] = FieldShape("map", f"map<{key},{value}>", oneof=oneof)


class _DescriptorShape:
    """The shape of a ``FileDescriptorProto`` (types there are fully qualified already)."""

    def __init__(self, descriptor: FileDescriptorProto) -> None:
        self.package = descriptor.package
        self.maps: dict[str, str] = {}
        self.shape: Shape = {}
        for message in descriptor.message_type:
            self._maps(message, "")
        for message in descriptor.message_type:
            self._message(message, "")

    def _relative(self, type_name: str) -> str:
        absolute = type_name.removeprefix(".")
        return absolute.removeprefix(f"{self.package}.") if self.package else absolute

    def _maps(self, message: DescriptorProto, scope: str) -> None:
        name = f"{scope}{message.name}"
        for nested in message.nested_type:
            if nested.options.map_entry:
                key, value = (self._type(f) for f in nested.field)
                self.maps[f"{name}.{nested.name}"] = f"map<{key.type},{value.type}>"
            else:
                self._maps(nested, f"{name}.")

    def _type(self, field_: FieldDescriptorProto) -> FieldShape:
        if field_.type in _DESCRIPTOR_SCALARS:
            return FieldShape("scalar", _DESCRIPTOR_SCALARS[field_.type])
        relative = self._relative(field_.type_name)
        if relative in self.maps:
            return FieldShape("map", self.maps[relative])
        return FieldShape("named", relative)

    def _message(self, message: DescriptorProto, scope: str) -> None:
        name = f"{scope}{message.name}"
        shape = self.shape.setdefault(name, MessageShape())
        for field_ in message.field:
            real_oneof = field_.HasField("oneof_index") and not field_.proto3_optional
            oneof = message.oneof_decl[field_.oneof_index].name if real_oneof else None
            required = field_.label == FieldDescriptorProto.LABEL_REQUIRED
            typed = self._type(field_)
            shape.fields[field_.number] = FieldShape(typed.kind, typed.type, required, oneof)
        for nested in message.nested_type:
            if not nested.options.map_entry:
                self._message(nested, f"{name}.")


def differences(reader: Shape, writer: Shape) -> list[str]:
    """Confluent's incompatible differences of ``reader`` from ``writer`` (empty: it reads
    what ``writer`` wrote), each as ``TYPE at #/<message>[/<field number>]``."""
    found: list[str] = []
    for name, old in writer.items():
        new = reader.get(name)
        if new is None:
            found.append(f"MESSAGE_REMOVED at #/{name}")
            continue
        found += (f"{kind} at #/{name}/{number}" for kind, number in _fields(new, old))
    return found


def _fields(new: MessageShape, old: MessageShape) -> Iterator[tuple[str, int]]:
    for number, was in sorted(old.fields.items()):
        now = new.fields.get(number)
        if now is None:
            if was.required:
                yield "REQUIRED_FIELD_REMOVED", number
            if was.oneof is not None:
                yield "ONEOF_FIELD_REMOVED", number
        elif now.kind != was.kind:
            yield "FIELD_KIND_CHANGED", number
        elif now.kind == "scalar" and _WIRE_KINDS[now.type] != _WIRE_KINDS[was.type]:
            yield "FIELD_SCALAR_KIND_CHANGED", number
        elif now.kind != "scalar" and now.type != was.type:
            yield "FIELD_NAMED_TYPE_CHANGED", number
    for number, now in sorted(new.fields.items()):
        if now.required and number not in old.fields:
            yield "REQUIRED_FIELD_ADDED", number
    yield from _moved_to_oneofs(new, old)


def _moved_to_oneofs(new: MessageShape, old: MessageShape) -> Iterator[tuple[str, int]]:
    old_oneofs = {f.oneof for f in old.fields.values() if f.oneof is not None}
    moved: dict[str, list[int]] = {}
    for number, now in sorted(new.fields.items()):
        was = old.fields.get(number)
        if now.oneof is not None and was is not None and was.oneof is None:
            moved.setdefault(now.oneof, []).append(number)
    for oneof, numbers in moved.items():
        if oneof in old_oneofs:
            yield from (("FIELD_MOVED_TO_EXISTING_ONEOF", n) for n in numbers)
        elif len(numbers) > 1:
            yield "MULTIPLE_FIELDS_MOVED_TO_ONEOF", numbers[0]
