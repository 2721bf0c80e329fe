import base64
from typing import Any

import orjson
import pytest

from yak.errors import InvalidRequestError, KafkaTimeoutError, UnknownTopicOrPartitionError
from yak_rest_proxy.api.v3.errors import UnsupportedFormatError, v3_error
from yak_rest_proxy.api.v3.produce_request import delivery_report, iso_timestamp, parse_record
from yak_rest_proxy.api.v3.schema_data import schema_ref
from yak_rest_proxy.produce.accumulator import ProducedRecord

NOW = 1_700_000_000_000


def parse(body: dict[str, Any]) -> Any:
    return parse_record(orjson.dumps(body), NOW)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_confluent_example_record() -> None:
    parsed = parse(
        {
            "partition_id": 1,
            "headers": [{"name": "Header-1", "value": b64(b"Header-1")}, {"name": "n"}],
            "key": {"type": "BINARY", "data": b64(b"foobar")},
            "value": {"type": "JSON", "data": {"foo": "bar"}},
            "timestamp": "2021-02-05T19:14:42Z",
        }
    )
    record = parsed.outgoing.record
    assert parsed.outgoing.partition == 1
    assert record.key == b"foobar"
    assert orjson.loads(record.value or b"") == {"foo": "bar"}
    assert record.headers == (("Header-1", b"Header-1"), ("n", None))
    assert record.timestamp == 1_612_552_482_000
    assert parsed.key == ("BINARY", 6)
    assert parsed.value == ("JSON", len(b'{"foo":"bar"}'))


def test_defaults_and_nulls() -> None:
    parsed = parse({"value": {"type": "STRING", "data": "héllo"}})
    assert parsed.outgoing.partition is None
    assert parsed.outgoing.record.key is None
    assert parsed.outgoing.record.value == "héllo".encode()
    assert parsed.outgoing.record.timestamp == NOW
    assert parsed.key is None
    assert parsed.value == ("STRING", 6)
    tombstone = parse({"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON"}})
    assert tombstone.outgoing.record.value is None
    assert tombstone.value == ("JSON", 0)


def test_timestamps_with_offsets_and_without_zone() -> None:
    assert parse({"timestamp": "2021-02-05T20:14:42.5+01:00"}).outgoing.record.timestamp == (
        1_612_552_482_500
    )
    assert parse({"timestamp": "2021-02-05T19:14:42"}).outgoing.record.timestamp == (
        1_612_552_482_000
    )


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"value": {"type": "BINARY", "data": "!!"}}, 400, "not a base64 string"),
        ({"value": {"type": "BINARY", "data": 12}}, 400, "base64"),
        ({"value": {"type": "STRING", "data": 12}}, 400, "STRING data must be a string"),
        ({"headers": [{"name": "h", "value": "%%"}]}, 400, "headers[0].value"),
        ({"timestamp": "yesterday"}, 400, "ISO 8601"),
        ({"partition": 1}, 422, "unknown field 'partition'"),
        ({"value": {"type": "BINARY", "dta": ""}}, 422, "unknown field 'dta'"),
        ({"value": {"type": "XML", "data": ""}}, 422, "BINARY, JSON or STRING"),
        ({"value": {"type": ["AVRO"], "data": ""}}, 422, "BINARY, JSON or STRING"),
        ({"value": "raw"}, 422, "object with type and data"),
        ({"headers": {"h": "v"}}, 422, "headers"),
        ({"partition_id": "1"}, 422, "partition_id"),
        ({"partition_id": 1.5}, 422, "partition_id"),
        ({"partition_id": True}, 422, "partition_id"),
        ({"timestamp": 12}, 422, "timestamp"),
    ],
)
def test_bad_records(body: dict[str, Any], status: int, words: str) -> None:
    with pytest.raises(
        InvalidRequestError, match=words.replace("[", r"\[").replace("]", r"\]")
    ) as e:
        parse(body)
    assert v3_error(e.value)[0] == status


@pytest.mark.parametrize("kind", ["AVRO", "JSONSCHEMA", "PROTOBUF", None])
def test_schema_formats_are_not_served_yet(kind: str | None) -> None:
    data: dict[str, Any] = {"data": {"f": 1}, "schema_id": 3}
    if kind is not None:
        data["type"] = kind
    with pytest.raises(UnsupportedFormatError, match="schema registry") as e:
        parse({"value": data})
    assert v3_error(e.value) == (422, 422)


def test_an_integral_number_is_the_integer_json_schema_takes_it_for() -> None:
    assert parse({"partition_id": 5.0}).outgoing.partition == 5


def test_negative_partition_is_partition_not_found() -> None:
    with pytest.raises(UnknownTopicOrPartitionError) as e:
        parse({"partition_id": -1})
    assert v3_error(e.value) == (404, 40402)


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(InvalidRequestError) as e:
        parse_record(b'{"value": }', NOW)
    assert v3_error(e.value) == (400, 400)
    with pytest.raises(InvalidRequestError, match="JSON object"):
        parse_record(b"[]", NOW)


def test_delivery_reports() -> None:
    parsed = parse({"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": 1}})
    ok = delivery_report("c1", "t", parsed, ProducedRecord(2, 41, 1_612_552_482_123))
    assert ok == {
        "error_code": 200,
        "cluster_id": "c1",
        "topic_name": "t",
        "partition_id": 2,
        "offset": 41,
        "timestamp": "2021-02-05T19:14:42.123Z",
        "key": {"type": "STRING", "size": 1},
        "value": {"type": "JSON", "size": 1},
    }
    failed = delivery_report("c1", "t", parsed, KafkaTimeoutError("not delivered in time"))
    assert failed == {"error_code": 50003, "message": "not delivered in time"}


def test_iso_timestamp() -> None:
    assert iso_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert iso_timestamp(1_612_552_482_007) == "2021-02-05T19:14:42.007Z"
    assert iso_timestamp(-1) is None


@pytest.mark.parametrize("strategy", [["TOPIC_NAME"], {"a": 1}, "SUBJECT"])
def test_a_subject_name_strategy_that_is_not_one_of_confluents_is_refused(strategy: Any) -> None:
    given = {"type": "AVRO", "subject_name_strategy": strategy, "schema_id": 1}
    with pytest.raises(InvalidRequestError, match="is not TOPIC_NAME, RECORD_NAME") as e:
        schema_ref(given, "t", "value")
    assert v3_error(e.value)[0] in (400, 422)
