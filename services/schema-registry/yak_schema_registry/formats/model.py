"""The registry's values: schema types, compatibility levels, modes, references, schemas.

A ``SchemaSource`` is what a client sends (type, text, references by subject and version); a
``ParsedSchema`` is what a format made of it: the text to store and serve, an ``identity``
string equal for two texts that mean the same schema (so registering it again returns the
first id), and the library's own parsed object for compatibility checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from yak_schema_registry.errors import (
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
)

__all__ = [
    "LATEST",
    "CompatibilityLevel",
    "Mode",
    "ParsedSchema",
    "Reference",
    "SchemaSource",
    "SchemaType",
]

#: The version number Confluent's API accepts for "the latest version" (and ``latest``).
LATEST = -1


class SchemaType(StrEnum):
    """Confluent's schema types; ``AVRO`` when a request names none."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"

    @classmethod
    def of(cls, name: str | None) -> SchemaType:
        if name is None or name == "":
            return cls.AVRO
        try:
            return cls(name.upper())
        except ValueError:
            raise InvalidSchemaError(f"Invalid schema type {name!r}") from None


class CompatibilityLevel(StrEnum):
    """Which registered versions a new one is checked against, and in which direction."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @classmethod
    def of(cls, name: str | None) -> CompatibilityLevel:
        """The level named (any case); 42203 for another name or none ("NONE" is one)."""
        if name is not None and name.upper() in cls.__members__:
            return cls[name.upper()]
        raise InvalidCompatibilityLevelError(
            f"Invalid compatibility level. Valid values are {', '.join(cls)}"
        )

    @property
    def transitive(self) -> bool:
        return self.name.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """The new schema must read data written with the old ones."""
        return self.name.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """The old schemas must read data written with the new one."""
        return self.name.startswith(("FORWARD", "FULL"))


class Mode(StrEnum):
    """What writes the registry accepts: all, none, or imports that keep their ids."""

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    IMPORT = "IMPORT"

    @classmethod
    def of(cls, name: str | None) -> Mode:
        """The mode named (any case); 42204 for another name or none."""
        if name is not None and name.upper() in cls.__members__:
            return cls[name.upper()]
        raise InvalidModeError(f"Invalid mode. Valid values are {', '.join(cls)}")


class Reference(NamedTuple):
    """A schema this one uses: ``name`` as the schema spells it (an Avro full name, a JSON
    ``$ref`` URL, a Protobuf import path), found under ``subject`` at ``version``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class SchemaSource:
    """A schema as a client sends it, before any parsing."""

    schema_type: SchemaType
    text: str
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class ParsedSchema:
    """A schema a format accepted: ``text`` to store, ``identity`` to compare, ``parsed`` for
    that format's compatibility check (its own library's object)."""

    schema_type: SchemaType
    text: str
    identity: str
    references: tuple[Reference, ...]
    parsed: object

    def same_as(self, other: ParsedSchema) -> bool:
        """Whether both mean the same schema with the same references."""
        return (self.schema_type, self.identity, self.references) == (
            other.schema_type,
            other.identity,
            other.references,
        )
