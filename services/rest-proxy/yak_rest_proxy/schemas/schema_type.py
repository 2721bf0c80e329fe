"""The registry's schema types, and the embedded formats and v3 data types that name them."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SchemaType"]


class SchemaType(StrEnum):
    """The registry's ``schemaType`` names."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"

    @classmethod
    def of_format(cls, name: str) -> SchemaType:
        """The type of an embedded format or v3 data type (``avro``, ``JSONSCHEMA`` ...)."""
        return {"avro": cls.AVRO, "jsonschema": cls.JSON, "protobuf": cls.PROTOBUF}[name.lower()]

    @property
    def format_name(self) -> str:
        """The v2 embedded format's name (``jsonschema`` for JSON)."""
        return "jsonschema" if self is SchemaType.JSON else self.value.lower()
