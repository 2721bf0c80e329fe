"""The proxy's document states the rules its produce parsers apply (``http.openapi``): a body
the document's schema takes is one the parser takes, and the reverse, for the rules between
fields — an encoding and the data it names, a v3 key's type and its data."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
import pytest

from yak.api.records import ProduceRecordsRequest
from yak.errors import YakError
from yak_rest_proxy.api.native.routes import _outgoing
from yak_rest_proxy.api.v2.consumer_routes import member_record
from yak_rest_proxy.api.v2.models import V2CreateConsumer
from yak_rest_proxy.api.v3.produce_request import parse_record
from yak_rest_proxy.app import create_app
from yak_rest_proxy.http.body import parse_model
from yak_rest_proxy.settings import ProxySettings


@cache
def _document() -> dict[str, Any]:
    """The default proxy's document, generated once for the module's 36 cases (each took
    0.3 s to build the app and its document; every case only reads it)."""
    document: dict[str, Any] = create_app(ProxySettings()).openapi()
    return document


def _validator(component: str) -> jsonschema.Draft202012Validator:
    document = _document()
    schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def _native_takes(body: dict[str, Any]) -> bool:
    try:
        _outgoing(parse_model(ProduceRecordsRequest, json.dumps(body).encode()))
    except YakError:
        return False
    return True


@pytest.mark.parametrize(
    "body",
    [
        {"records": [{"key": "k", "value": {"a": [1]}}]},
        {"records": [{"key": ["k"]}]},
        {"records": [{"key": ["k"]}], "key_encoding": "json"},
        {"records": [{"key": "a2V5", "value": "dmFsdWU="}], "key_encoding": "base64"},
        {"records": [{"value": "dmFsdWU"}], "value_encoding": "base64"},
        {"records": [{"value": 7}], "value_encoding": "string"},
        {"records": [{"value": None}], "value_encoding": "base64"},
        {"records": [{"headers": [{"key": "h", "value": "!!"}]}], "header_encoding": "base64"},
        {"records": [{"headers": [{"key": "h", "value": "aA=="}]}], "header_encoding": "base64"},
        {"records": [{"headers": [{"key": "h", "value": "!!"}]}]},
    ],
)
def test_a_native_produce_body_is_documented_as_its_encodings_take_it(
    body: dict[str, Any],
) -> None:
    assert _validator("ProduceRecordsRequest").is_valid(body) == _native_takes(body)


def _v3_takes(record: dict[str, Any]) -> bool:
    try:
        parse_record(json.dumps(record).encode(), now_ms=0)
    except YakError:
        return False
    return True


@pytest.mark.parametrize(
    "record",
    [
        {"value": {"type": "BINARY", "data": "AAAA"}},
        {"value": {"type": "BINARY", "data": "AAA"}},
        {"value": {"type": "BINARY", "data": None}},
        {"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": [1, {}]}},
        {"key": {"type": "STRING", "data": 3}},
        {"key": {"data": "k"}},
        {"key": {"type": "AVRO", "data": "k"}},
        {"headers": [{"name": "h", "value": "aGk="}]},
        {"headers": [{"name": "h", "value": "hi"}]},
        {"headers": [{"name": "h", "value": None}]},
        {"timestamp": "2021-02-05T19:14:42.5+01:00"},
        {"timestamp": "yesterday"},
        {"timestamp": "1969-12-31T23:59:59Z"},
    ],
)
def test_a_v3_record_is_documented_as_the_parser_takes_it(record: dict[str, Any]) -> None:
    assert _validator("V3ProduceRecord").is_valid(record) == _v3_takes(record)


def test_with_a_registry_keys_and_values_may_name_a_schema_type_or_none() -> None:
    settings = ProxySettings(schema_registry_url="http://registry:8081")
    document = create_app(settings).openapi()
    branches = document["components"]["schemas"]["V3ProduceRecordData"]["anyOf"]
    assert {"properties": {"type": {"enum": ["AVRO", "JSONSCHEMA", "PROTOBUF", None]}}} in branches


def _consumer_takes(body: dict[str, Any]) -> bool:
    try:
        parsed = parse_model(V2CreateConsumer, json.dumps(body).encode())
        member_record(parsed, ProxySettings(), now_ms=0)
    except YakError:
        return False
    return True


@pytest.mark.parametrize(
    "body",
    [
        {"name": "c", "id": ""},
        {"name": "", "id": ""},
        {"id": "a b"},
        {"id": "c", "name": ".."},
        {"auto.offset.reset": "smallest", "auto.commit.enable": "false"},
        {"auto.offset.reset": "nowhere"},
        {"auto.commit.enable": "maybe"},
        {"auto.commit.enable": 0},
        {"fetch.min.bytes": "-1", "consumer.request.timeout.ms": 30_000},
        {"fetch.min.bytes": "10000001"},
        {"fetch.min.bytes": 5.0, "consumer.instance.timeout.ms": "1000"},
        {"consumer.request.timeout.ms": "30001"},
        {"consumer.instance.timeout.ms": 999},
    ],
)
def test_a_v2_consumer_is_documented_as_the_proxy_creates_it(body: dict[str, Any]) -> None:
    assert _validator("V2CreateConsumer").is_valid(body) == _consumer_takes(body)
