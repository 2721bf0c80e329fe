"""The avro, jsonschema and protobuf embedded formats: Confluent's wire format, encoders and
decoders per schema, and the registry client behind them (``Schemas``). Pure modules
(``wire``, the ``*_serde`` modules, ``proto_descriptor``) do no I/O; ``registry_client`` is the
only one that talks to the registry. The proxy never imports the registry service: it speaks
Confluent's Schema Registry API over HTTP, so any compatible registry serves.
"""

from yak_rest_proxy.schemas.errors import (
    InvalidSchemaError,
    RecordConversionError,
    RecordDeserializationError,
    SchemaMissingError,
    SchemaRegistryNotConfiguredError,
    SchemaRegistryUnavailableError,
)
from yak_rest_proxy.schemas.registry_client import RegistryClient
from yak_rest_proxy.schemas.schema_type import SchemaType
from yak_rest_proxy.schemas.schemas import Schemas
from yak_rest_proxy.schemas.serde import Serde

__all__ = [
    "InvalidSchemaError",
    "RecordConversionError",
    "RecordDeserializationError",
    "RegistryClient",
    "SchemaMissingError",
    "SchemaRegistryNotConfiguredError",
    "SchemaRegistryUnavailableError",
    "SchemaType",
    "Schemas",
    "Serde",
]
