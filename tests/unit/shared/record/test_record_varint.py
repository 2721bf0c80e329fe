import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yak.errors import CorruptRecordError
from yak.record.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    SMALL_LIMIT,
    VARINT_OF,
    ZIGZAG_DECODE,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
)

with warnings.catch_warnings():
    # kafka-python's package import uses a deprecated importlib API; not our code.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.util import decode_varint as kp_decode_varint
    from kafka.record.util import encode_varint as kp_encode_varint


def _kafka_python_bytes(value: int) -> bytes:
    out = bytearray()
    kp_encode_varint(value, out.append)
    return bytes(out)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        # Protocol-buffers sint32 examples: zig-zag then base-128, least significant group first.
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (150, b"\xac\x02"),
        (300, b"\xd8\x04"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded)


def test_varlong_extremes_take_ten_bytes() -> None:
    assert encode_varlong(INT64_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(INT64_MIN) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(encode_varlong(INT64_MIN), 0) == (INT64_MIN, 10)


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_agrees_with_kafka_python(value: int) -> None:
    encoded = encode_varlong(value)
    assert encoded == _kafka_python_bytes(value)
    assert decode_varlong(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))
    assert kp_decode_varint(encoded, 0) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded)


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trips(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded, 0) == (value, len(encoded))


def test_tables_match_the_general_functions() -> None:
    assert len(VARINT_OF) == SMALL_LIMIT
    for n in (0, 1, 63, 64, 127, 128, 1024, SMALL_LIMIT - 1):
        assert VARINT_OF[n] == _kafka_python_bytes(n)
        assert len(VARINT_OF[n]) <= 2
    for u in (0, 1, 2, 127, 128, 2047, (1 << 14) - 1):
        assert ZIGZAG_DECODE[u] == kp_decode_varint(_unsigned_varint(u), 0)[0]


def _unsigned_varint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append(u & 0x7F | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_encode_varint_rejects_values_outside_int32(value: int) -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(value)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x80",
        b"\xff\xff",
        b"\x80\x80\x80\x80",
    ],
)
def test_truncated_varints_are_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varint(raw, 0)
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varlong(raw, 0)


def test_overlong_varints_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(b"\x80" * 5 + b"\x00", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x00", 0)


def test_five_byte_varint_above_32_bits_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="overflows an int32"):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0)
