"""Confluent's serializers against an in-memory registry (``mock://``): an independent
implementation of the wire format for the serde tests to agree with."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient


@pytest.fixture
def confluent_registry() -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": f"mock://{uuid.uuid4().hex}"})
