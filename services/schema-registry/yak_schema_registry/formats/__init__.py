"""Schema formats, pure: parsing, identity and compatibility of AVRO, JSON and PROTOBUF schemas.

Nothing here touches the network, the store or a clock; every check is a library's:
fastavro and Apache ``avro`` for Avro, ``jsonschema`` for JSON Schema, ``proto-schema-parser``
for Protobuf.
"""
