import pytest

from yak.api.records import Encoding, decode_data, encode_data
from yak.errors import InvalidRequestError
from yak_rest_proxy.api.v2.embedded import from_embedded, to_embedded
from yak_rest_proxy.http.content import EmbeddedFormat


def test_binary_round_trip_and_errors() -> None:
    assert from_embedded("aGVsbG8=", EmbeddedFormat.BINARY, 0, "value") == b"hello"
    assert to_embedded(b"hello", EmbeddedFormat.BINARY) == "aGVsbG8="
    assert from_embedded(None, EmbeddedFormat.BINARY, 0, "value") is None
    with pytest.raises(InvalidRequestError, match=r"records\[2\].value: not valid base64"):
        from_embedded("aGVsbG8", EmbeddedFormat.BINARY, 2, "value")
    with pytest.raises(InvalidRequestError, match="must be a base64 string"):
        from_embedded(12, EmbeddedFormat.BINARY, 0, "key")


def test_json_round_trip_and_non_json_bytes() -> None:
    assert from_embedded({"a": [1, 2]}, EmbeddedFormat.JSON, 0, "value") == b'{"a":[1,2]}'
    assert to_embedded(b'{"a":[1,2]}', EmbeddedFormat.JSON) == {"a": [1, 2]}
    assert to_embedded(b"\xffplain", EmbeddedFormat.JSON) == "\ufffdplain"


@pytest.mark.parametrize("encoding", list(Encoding))
def test_native_encodings_round_trip(encoding: Encoding) -> None:
    value = (
        {"json": [1]}
        if encoding is Encoding.JSON
        else "aGk="
        if encoding is Encoding.BASE64
        else "hi"
    )
    data = encode_data(value, encoding, "v")
    assert decode_data(data, encoding) == value
    assert encode_data(None, encoding, "v") is None


@pytest.mark.parametrize(
    ("value", "encoding"),
    [
        (2**70, Encoding.JSON),  # JSON readers elsewhere cannot hold it
        ({"nested": ["\ud800"]}, Encoding.JSON),  # a lone surrogate has no UTF-8 form
        ("\udfff", Encoding.STRING),
    ],
)
def test_values_without_a_stored_form_are_refused(value: object, encoding: Encoding) -> None:
    with pytest.raises(InvalidRequestError, match=r"records\[1\]\.key"):
        encode_data(value, encoding, "records[1].key")
    if encoding is Encoding.JSON:
        with pytest.raises(InvalidRequestError, match=r"records\[1\]\.key"):
            from_embedded(value, EmbeddedFormat.JSON, 1, "key")
