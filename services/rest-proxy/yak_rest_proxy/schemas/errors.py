"""The schema formats' typed errors; ``http.errors`` (v2) and ``api.v3.errors`` (v3) map them.

=================================  ======  ==========  ==========  ==============================
error                              status  v2 code     v3 code     when
=================================  ======  ==========  ==========  ==============================
SchemaRegistryNotConfiguredError   415     41502       422         avro/protobuf/jsonschema on a
                                                                   proxy without
                                                                   ``YAK_SCHEMA_REGISTRY_URL``
SchemaRegistryUnavailableError     408     40801       40801       the registry cannot be reached
                                                                   or answers 5xx (Confluent's
                                                                   SerializationException code)
SchemaMissingError                 422     42201 key,  422         keys or values but no schema
                                           42202 value             (nor schema id) for them
InvalidSchemaError                 422     42205       42205       the registry refuses the schema
                                                                   (invalid, incompatible), an id
                                                                   or version it does not know, a
                                                                   schema the proxy cannot compile
RecordConversionError              422     42203       400         a record the schema does not
                                                                   accept (nothing is written)
RecordDeserializationError         500     50002       50002       a consumed record not in the
                                                                   wire format, or not readable
                                                                   with its schema
=================================  ======  ==========  ==========  ==============================
"""

from __future__ import annotations

from yak.errors import YakError

__all__ = [
    "InvalidSchemaError",
    "RecordConversionError",
    "RecordDeserializationError",
    "SchemaMissingError",
    "SchemaRegistryNotConfiguredError",
    "SchemaRegistryUnavailableError",
]


class SchemaRegistryNotConfiguredError(YakError):
    """A schema format asked of a proxy that has no schema registry configured."""

    code = "SCHEMA_REGISTRY_NOT_CONFIGURED"
    http_status = 415


class SchemaRegistryUnavailableError(YakError):
    """The schema registry could not be reached or failed (5xx)."""

    code = "SCHEMA_REGISTRY_UNAVAILABLE"
    retriable = True
    http_status = 408


class SchemaMissingError(YakError):
    """Keys (``details["field"] == "key"``) or values given without a schema."""

    code = "SCHEMA_MISSING"
    http_status = 422


class InvalidSchemaError(YakError):
    """A schema the registry refused or does not know, or one the proxy cannot compile."""

    code = "INVALID_SCHEMA"
    http_status = 422


class RecordConversionError(YakError):
    """A key or value its schema does not accept."""

    code = "RECORD_CONVERSION_FAILED"
    http_status = 422


class RecordDeserializationError(YakError):
    """A consumed key or value that is not framed, or not readable with its schema."""

    code = "RECORD_DESERIALIZATION_FAILED"
    http_status = 500
