"""Schema formats, pure: parsing, identity and compatibility of AVRO, JSON and PROTOBUF schemas.

Nothing here touches the network, the store or a clock. Validity is a library's: fastavro
and Apache ``avro`` for Avro, ``jsonschema`` for JSON Schema, ``proto-schema-parser`` (and
``protobuf`` for descriptors) for Protobuf; so is compatibility for Avro (``avro``) and JSON
Schema (``jsoncompat``), while Protobuf's is Confluent's documented rules over both schemas'
shapes (``protobuf_compatibility``), no library comparing two ``.proto`` files.
"""
