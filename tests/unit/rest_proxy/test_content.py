import pytest

from yak.errors import NotAcceptableError, UnsupportedMediaTypeError
from yak_rest_proxy.http.content import EmbeddedFormat, negotiate, parse_accept, request_format


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (None, EmbeddedFormat.JSON),
        ("", EmbeddedFormat.JSON),
        ("application/json", EmbeddedFormat.JSON),
        ("application/json; charset=utf-8", EmbeddedFormat.JSON),
        ("application/vnd.kafka.json.v2+json", EmbeddedFormat.JSON),
        ("application/vnd.kafka.binary.v2+json", EmbeddedFormat.BINARY),
        ("Application/VND.Kafka.Binary.V2+JSON", EmbeddedFormat.BINARY),
        ("application/vnd.kafka.v2+json", EmbeddedFormat.BINARY),
        ("application/vnd.kafka+json", EmbeddedFormat.BINARY),
        ("application/octet-stream", EmbeddedFormat.BINARY),
        ("application/vnd.kafka.avro.v2+json", EmbeddedFormat.AVRO),
        ("application/vnd.kafka.jsonschema.v2+json", EmbeddedFormat.JSONSCHEMA),
        ("application/vnd.kafka.protobuf.v2+json", EmbeddedFormat.PROTOBUF),
    ],
)
def test_request_formats(content_type: str | None, expected: EmbeddedFormat) -> None:
    assert request_format(content_type) is expected


@pytest.mark.parametrize(
    ("content_type", "why"),
    [
        ("application/vnd.kafka.json.v1+json", "v1"),
        ("application/vnd.kafka.v3+json", "v3"),
        ("application/vnd.kafka.text.v2+json", "unknown embedded format"),
        ("text/plain", "not supported"),
        ("application/xml", "not supported"),
    ],
)
def test_unsupported_request_types(content_type: str, why: str) -> None:
    with pytest.raises(UnsupportedMediaTypeError, match=why):
        request_format(content_type)


def test_accept_q_values_order_and_exclude() -> None:
    ranges = parse_accept("application/json; q=0.5, application/vnd.kafka.v2+json; q=0.9")
    assert [r.media_type for r in ranges] == ["application/vnd.kafka.v2+json", "application/json"]
    assert negotiate("application/json; q=0.5, application/vnd.kafka.v2+json; q=0.9") == (
        "application/vnd.kafka.v2+json"
    )
    assert negotiate("application/vnd.kafka.v2+json; q=0, application/json") == "application/json"
    assert negotiate(None) == "application/vnd.kafka.v2+json"
    assert negotiate("*/*") == "application/vnd.kafka.v2+json"


def test_records_answer_in_the_consumers_format() -> None:
    json_type = "application/vnd.kafka.json.v2+json"
    assert negotiate(None, EmbeddedFormat.JSON) == json_type
    assert negotiate(json_type, EmbeddedFormat.JSON) == json_type
    assert negotiate("application/json", EmbeddedFormat.BINARY) == "application/json"
    with pytest.raises(NotAcceptableError) as info:
        negotiate("application/vnd.kafka.binary.v2+json", EmbeddedFormat.JSON)
    assert info.value.details["reason"] == "consumer_format"
    with pytest.raises(NotAcceptableError):
        negotiate("text/html")
    with pytest.raises(NotAcceptableError):
        negotiate("application/vnd.kafka.json.v2+json")  # metadata has no embedded format
