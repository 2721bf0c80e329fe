"""``.proto`` text to a ``FileDescriptorProto``: what ``protoc`` would hand ``protobuf``.

``protobuf`` cannot read ``.proto`` text and no compiler is installed, so this walks
``proto-schema-parser``'s tree (the same parser the registry validates with) and fills the
descriptor's messages, fields, enums, maps (a nested ``<Name>Entry`` message with
``map_entry``), oneofs and proto3 ``optional`` (a synthetic oneof), leaving type names as
written: ``DescriptorPool.Add`` resolves them by protobuf's scoping rules and refuses what
does not resolve, a field number used twice and the other errors ``protoc`` reports. Options,
services, extensions, groups and reserved ranges are not carried (they change no encoding of
the messages served here). Imports become dependencies; only Google's well-known types can be
imported (registry references are not followed). Pure: no I/O.
"""

from __future__ import annotations

from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

__all__ = ["file_descriptor"]

F = FieldDescriptorProto
_SCALARS = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32,
    "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
    "uint32": F.TYPE_UINT32,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
}
_LABELS = {
    ast.FieldCardinality.REQUIRED: F.LABEL_REQUIRED,
    ast.FieldCardinality.REPEATED: F.LABEL_REPEATED,
}


def _typed(field: FieldDescriptorProto, type_name: str) -> None:
    scalar = _SCALARS.get(type_name)
    if scalar is not None:
        field.type = scalar
    else:
        field.type_name = type_name  # message or enum: the pool resolves which


def _enum(target: EnumDescriptorProto, node: ast.Enum) -> None:
    target.name = node.name
    for element in node.elements:
        if isinstance(element, ast.EnumValue):
            target.value.add(name=element.name, number=element.number)


def _map_entry(message: DescriptorProto, node: ast.MapField) -> None:
    entry_name = "".join(part[:1].upper() + part[1:] for part in node.name.split("_")) + "Entry"
    entry = message.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    _typed(entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL), node.key_type)
    _typed(entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL), node.value_type)
    message.field.add(
        name=node.name, number=node.number, label=F.LABEL_REPEATED, type_name=entry_name
    )


def _field(
    message: DescriptorProto, node: ast.Field, proto3: bool, oneof: int | None = None
) -> None:
    field = message.field.add(name=node.name, number=node.number)
    field.label = _LABELS.get(node.cardinality, F.LABEL_OPTIONAL)  # type: ignore[arg-type]
    _typed(field, node.type)
    if oneof is not None:
        field.oneof_index = oneof
    elif proto3 and node.cardinality is ast.FieldCardinality.OPTIONAL:
        field.proto3_optional = True
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name=f"_{node.name}")


def _message(target: DescriptorProto, node: ast.Message, proto3: bool) -> None:
    target.name = node.name
    synthetic: list[ast.Field] = []
    for element in node.elements:
        if isinstance(element, ast.Field):
            if proto3 and element.cardinality is ast.FieldCardinality.OPTIONAL:
                synthetic.append(element)  # synthetic oneofs go after the real ones
            else:
                _field(target, element, proto3)
        elif isinstance(element, ast.MapField):
            _map_entry(target, element)
        elif isinstance(element, ast.OneOf):
            index = len(target.oneof_decl)
            target.oneof_decl.add(name=element.name)
            for member in element.elements:
                if isinstance(member, ast.Field):
                    _field(target, member, proto3, index)
        elif isinstance(element, ast.Message):
            _message(target.nested_type.add(), element, proto3)
        elif isinstance(element, ast.Enum):
            _enum(target.enum_type.add(), element)
    for element in synthetic:
        _field(target, element, proto3)


def file_descriptor(text: str, name: str) -> FileDescriptorProto:
    """The descriptor of ``.proto`` ``text``, as file ``name``; ``ValueError`` if the parser
    refuses it (the pool checks the rest when the descriptor is added)."""
    tree = Parser().parse(text)
    proto3 = tree.syntax == "proto3"
    result = FileDescriptorProto(name=name, syntax="proto3" if proto3 else "proto2")
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            result.package = element.name
        elif isinstance(element, ast.Import):
            result.dependency.append(element.name)
        elif isinstance(element, ast.Message):
            _message(result.message_type.add(), element, proto3)
        elif isinstance(element, ast.Enum):
            _enum(result.enum_type.add(), element)
    return result
