"""PROTOBUF schemas: ``.proto`` text parsed by ``proto-schema-parser`` (an ANTLR grammar of
the proto2/proto3/editions language), strictly: the first syntax error rejects the schema.

The parser is lenient by default (ANTLR recovers from errors and prints them, and its lexer
drops characters it cannot read); the registry installs a listener that raises on the first
lexer or parser error, and ANTLR's bail-out strategy. It checks syntax only: the parser is not
a compiler, so an unknown type or a field number used twice is accepted.

A schema may also come as a base64 ``FileDescriptorProto`` (what Confluent's Python
``ProtobufSerializer`` registers, and what its deserializer asks back with
``format=serialized``): ``protobuf`` decodes it and builds it in a fresh descriptor pool, with
the references that are descriptors too and the well-known types, which checks its types and
names as protoc would. It is stored and served as sent.

The identity is the parser's own re-generation of the file (``proto_schema_parser.generator``),
so spacing does not make a new version (comments are part of the parser's tree, and do); for a
descriptor, its deterministic serialization. References are the files the schema imports, by
import path; each is parsed the same way.

Compatibility: Confluent's documented rules over both schemas' shapes (messages, field
numbers and types, oneofs), ``protobuf_compatibility``; a text and a descriptor compare too.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import Sequence
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from antlr4.error.Errors import ParseCancellationException
from antlr4.error.ErrorStrategy import BailErrorStrategy
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError
from proto_schema_parser.generator import Generator
from proto_schema_parser.parser import Parser

from yak_schema_registry.errors import InvalidSchemaError
from yak_schema_registry.formats.model import ParsedSchema, SchemaSource
from yak_schema_registry.formats.protobuf_compatibility import differences, shape_of

__all__ = ["incompatibilities", "parse"]


class _Raise(ErrorListener):  # type: ignore[misc]  # antlr4 ships no types
    """Turns the first lexer or parser error into an exception (ANTLR only prints them)."""

    def syntaxError(  # noqa: N802 (ANTLR's name)
        self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise ParseCancellationException(f"line {line}:{column}: {msg}")


def _strict(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())
    if hasattr(recognizer, "_errHandler"):  # the parser: no recovery either
        recognizer._errHandler = BailErrorStrategy()


def _parsed(text: str, what: str) -> Any:
    """The parser's tree of ``.proto`` text, or the ``FileDescriptorProto`` it encodes."""
    if not text.strip():
        raise InvalidSchemaError(f"Invalid Protobuf schema{what}: empty")
    try:
        return Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
    except (ParseCancellationException, ValueError) as exc:
        descriptor = _descriptor(text)
        if descriptor is not None:
            return descriptor
        problem = _describe(exc)
        raise InvalidSchemaError(f"Invalid Protobuf schema{what}: {problem}") from None


def _descriptor(text: str) -> FileDescriptorProto | None:
    """``text`` as a base64 ``FileDescriptorProto``, or None if it is not one."""
    try:
        data = base64.b64decode(text.strip(), validate=True)
        descriptor = FileDescriptorProto.FromString(data)
    except (binascii.Error, DecodeError):
        return None
    return descriptor if descriptor.name or descriptor.message_type else None


def _build(descriptor: FileDescriptorProto, resolved: dict[str, Any], what: str) -> None:
    """Build ``descriptor`` in a fresh pool after its dependencies (references that are
    descriptors, well-known types); refuse it if protobuf does. A dependency given as
    ``.proto`` text cannot be built (no compiler here): then only the decoding is checked."""
    pool = DescriptorPool()
    for dependency in descriptor.dependency:
        known = resolved.get(dependency)
        if isinstance(known, FileDescriptorProto):
            pool.Add(known)
        elif dependency.startswith("google/protobuf/"):
            module = importlib.import_module(
                "google.protobuf." + dependency.removeprefix("google/protobuf/")[:-6] + "_pb2"
            )
            pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
        else:
            return
    try:
        pool.Add(descriptor)
        pool.FindFileByName(descriptor.name)
    except (TypeError, ValueError, KeyError) as exc:
        raise InvalidSchemaError(f"Invalid Protobuf schema{what}: {exc}") from None


def _describe(exc: Exception) -> str:
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    cause = exc.args[0] if exc.args else exc.__cause__ or exc.__context__
    token = getattr(getattr(cause, "offendingToken", None), "text", None)
    line = getattr(getattr(cause, "offendingToken", None), "line", None)
    if token is not None:
        return f"unexpected {token!r} at line {line}"
    return str(exc) or type(exc).__name__


def parse(source: SchemaSource, resolved: Sequence[tuple[str, str]]) -> ParsedSchema:
    """Parse ``source`` and its imports' texts (``(import path, text)``)."""
    references = {name: _parsed(text, f" reference {name!r}") for name, text in resolved}
    tree = _parsed(source.text, "")
    if isinstance(tree, FileDescriptorProto):
        if not tree.name:
            tree.name = "schema.proto"
        _build(tree, references, "")
        identity = base64.b64encode(tree.SerializeToString(deterministic=True)).decode()
    else:
        identity = Generator().generate(tree)
    return ParsedSchema(
        schema_type=source.schema_type,
        text=source.text,
        identity=identity,
        references=source.references,
        parsed=tree,
    )


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Confluent's incompatible differences of ``reader`` from ``writer`` (empty: none)."""
    return differences(shape_of(reader.parsed), shape_of(writer.parsed))
