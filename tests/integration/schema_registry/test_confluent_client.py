"""Confluent's own client against a real registry process on a real etcd.

One ``yak-schema-registry`` process per module, on the session's etcd under a fresh cluster
id; each test uses its own subjects. The client is ``confluent_kafka``'s
``SchemaRegistryClient`` and its Avro/JSON serializers, unchanged: every call below is one a
Kafka application makes against Confluent's registry.
"""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass

from yak.etcd_server import EmbeddedEtcd, free_ports

pytestmark = pytest.mark.integration

_START_TIMEOUT_S = 20.0
USER_V1: dict[str, Any] = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}],
}
AGE = {"name": "age", "type": "int"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}


def user(*extra: Mapping[str, object]) -> Schema:
    fields = [*USER_V1["fields"], *extra]
    return Schema(json.dumps({**USER_V1, "fields": fields}), "AVRO")


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[str]:
    (port,) = free_ports(1)
    log = tmp_path_factory.mktemp("schema-registry") / "registry.log"
    script = str(Path(sys.executable).with_name("yak-schema-registry"))
    argv = [script, "--port", str(port), "--etcd", etcd.endpoint]
    argv += ["--cluster-id", f"sr-{uuid.uuid4().hex[:12]}"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, url, log)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll /readyz of the fresh process until it answers 200 (with a deadline)."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"registry exited during startup:\n{log.read_text(errors='replace')}")
            try:
                if client.get(f"{url}/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    pytest.fail(f"registry not ready in {_START_TIMEOUT_S} s:\n{log.read_text(errors='replace')}")


@pytest.fixture
def client(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as sr:
        yield sr


@pytest.fixture
def subject() -> str:
    return f"users-{uuid.uuid4().hex[:8]}-value"


def test_register_get_by_id_latest_versions_and_lookup(
    client: SchemaRegistryClient, subject: str
) -> None:
    first = client.register_schema(subject, user())
    assert client.register_schema(subject, user()) == first  # the same schema: the same id
    second = client.register_schema(subject, user(AGE_DEFAULT))
    assert second > first
    fetched = client.get_schema(second)
    assert fetched.schema_str is not None
    assert json.loads(fetched.schema_str) == json.loads(str(user(AGE_DEFAULT).schema_str))
    assert fetched.schema_type == "AVRO"
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version, latest.subject) == (second, 2, subject)
    assert client.get_versions(subject) == [1, 2]
    assert client.get_version(subject, 1).schema_id == first
    found = client.lookup_schema(subject, user())
    assert (found.schema_id, found.version) == (first, 1)
    assert subject in client.get_subjects()
    assert client.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"]
    assert [(v.subject, v.version) for v in client.get_schema_versions(first)] == [(subject, 1)]


def test_compatibility_checks_and_an_incompatible_registration(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, user())
    assert client.test_compatibility(subject, user(AGE_DEFAULT)) is True
    assert client.test_compatibility(subject, user(AGE)) is False
    assert client.test_compatibility_all_versions(subject, user(AGE)) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, user(AGE))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert client.get_versions(subject) == [1]  # nothing stored


def test_an_invalid_schema_is_refused_and_nothing_is_stored(
    client: SchemaRegistryClient, subject: str
) -> None:
    bad = Schema(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a"}]}), "AVRO")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, bad)
    assert (refused.value.http_status_code, refused.value.error_code) == (422, 42201)
    assert subject not in client.get_subjects()
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_version(subject)
    assert missing.value.error_code == 40401


def test_compatibility_config_set_and_get(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, user())
    # The client's annotation says str; Confluent's registry (and Yak's) answers the body.
    answer: object = client.set_compatibility(subject, "NONE")
    assert answer == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    client.register_schema(subject, user(AGE))  # allowed under NONE
    assert client.get_versions(subject) == [1, 2]
    with pytest.raises(SchemaRegistryError) as invalid:
        client.set_compatibility(subject, "SIDEWAYS")
    assert invalid.value.error_code == 42203
    assert client.get_compatibility() == "BACKWARD"  # the global level is untouched


def test_delete_versions_and_subjects(client: SchemaRegistryClient, subject: str) -> None:
    client.set_compatibility(subject, "NONE")
    client.register_schema(subject, user())
    client.register_schema(subject, user(AGE))
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.delete_version(subject, 2, permanent=True) == 2
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    assert client.delete_subject(subject, permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_versions(subject)
    assert gone.value.error_code == 40401


def test_avro_serializer_round_trip(client: SchemaRegistryClient, subject: str) -> None:
    topic = subject.removesuffix("-value")
    schema = user(AGE_DEFAULT).schema_str
    serializer = AvroSerializer(client, schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    payload = serializer({"name": "ada", "age": 36}, ctx)
    assert payload is not None
    magic, schema_id = struct.unpack(">bI", payload[:5])
    assert magic == 0
    assert schema_id == client.get_latest_version(subject).schema_id  # auto-registered
    # The bytes after the header are plain Avro, readable by fastavro with the stored schema.
    stored = fastavro.parse_schema(json.loads(str(client.get_schema(schema_id).schema_str)))
    assert fastavro.schemaless_reader(io.BytesIO(payload[5:]), stored) == {"name": "ada", "age": 36}
    assert AvroDeserializer(client)(payload, ctx) == {"name": "ada", "age": 36}


def test_json_serializer_round_trip(client: SchemaRegistryClient, subject: str) -> None:
    topic = subject.removesuffix("-value")
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "User",
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        }
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    payload = JSONSerializer(schema, client)({"name": "ada"}, ctx)
    assert payload is not None
    assert client.get_latest_version(subject).schema.schema_type == "JSON"
    assert JSONDeserializer(schema)(payload, ctx) == {"name": "ada"}


def _user_message_class() -> Any:
    """A ``demo.User`` message class built at run time (no generated ``_pb2`` module)."""
    descriptor = FileDescriptorProto(
        name=f"yak_test_{uuid.uuid4().hex[:8]}.proto", package="demo", syntax="proto3"
    )
    message = descriptor.message_type.add(name="User")
    message.field.add(name="name", number=1, type=FieldDescriptorProto.TYPE_STRING)
    message.field.add(name="age", number=2, type=FieldDescriptorProto.TYPE_INT32)
    pool = DescriptorPool()
    pool.Add(descriptor)
    return GetMessageClass(pool.FindMessageTypeByName("demo.User"))


def test_protobuf_serializer_round_trip(client: SchemaRegistryClient, subject: str) -> None:
    user_class = _user_message_class()
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    serializer = ProtobufSerializer(user_class, client, {"use.deprecated.format": False})
    payload = serializer(user_class(name="ada", age=36), ctx)
    assert payload is not None
    registered = client.get_latest_version(subject)
    assert registered.schema.schema_type == "PROTOBUF"
    assert struct.unpack(">bI", payload[:5]) == (0, registered.schema_id)
    deserializer = ProtobufDeserializer(user_class, {"use.deprecated.format": False}, client)
    decoded = deserializer(payload, ctx)
    assert (decoded.name, decoded.age) == ("ada", 36)
