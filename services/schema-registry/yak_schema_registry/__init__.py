"""Yak's schema registry: Confluent's Schema Registry API over etcd (issue 33).

Layers, outermost first (an import-linter contract checks them): ``main`` (the CLI entry),
``app`` (the app factory), ``api`` (FastAPI routes, wire models, the error table),
``registry`` (the operations: register, look up, delete, configure), ``storage`` (the
``schemas/`` keyspace in the metadata store), ``formats`` (pure: parse and check schemas with
fastavro, avro, jsonschema and proto-schema-parser) and ``errors``.
"""
