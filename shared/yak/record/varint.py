"""Zig-zag varints, as Kafka writes them inside RecordBatch v2 records.

Byte layout (``ByteUtils.writeVarint`` / ``writeVarlong``): the signed value is first zig-zag
mapped to an unsigned one, ``(v << 1) ^ (v >> 31)`` for an int32 (``>> 63`` for an int64), so
that small magnitudes of either sign stay small (0→0, -1→1, 1→2, -2→3 ...). The unsigned value
is then written little-endian in groups of 7 bits, least significant group first; every byte
but the last has its high bit (0x80) set::

    300  → zig-zag 600 → 0xD8 0x04
    -1   → zig-zag 1   → 0x01

Invariants: a varint (int32) takes 1-5 bytes and a varlong (int64) 1-10 bytes; a longer run of
continuation bytes, or a value outside the type's range, is a corrupt record
(``CorruptRecordError``), as is a varint that runs past the end of the buffer.

The record codec inlines the one- and two-byte cases for speed (``ZIGZAG_DECODE`` and
``VARINT_OF``); the functions here are the general path and the reference for tests.
Pure functions and read-only tables; safe from any thread.
"""

from __future__ import annotations

from yak.errors import CorruptRecordError

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "SMALL_LIMIT",
    "VARINT_OF",
    "ZIGZAG_DECODE",
    "decode_uvarint",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "zigzag_decode",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_VARINT_MAX_BYTES = 5
_VARLONG_MAX_BYTES = 10

#: Non-negative values below this have a precomputed encoding in ``VARINT_OF`` (two bytes at
#: most: zig-zag doubles them to < 2**14).
SMALL_LIMIT = 1 << 13


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """The zig-zag varint bytes of an int32 (raises ValueError outside the int32 range)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    if 0 <= value < SMALL_LIMIT:
        return VARINT_OF[value]
    return _encode_unsigned(value << 1 if value >= 0 else (-value << 1) - 1)


def encode_varlong(value: int) -> bytes:
    """The zig-zag varint bytes of an int64 (raises ValueError outside the int64 range)."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    if 0 <= value < SMALL_LIMIT:
        return VARINT_OF[value]
    return _encode_unsigned(value << 1 if value >= 0 else (-value << 1) - 1)


def size_of_varint(value: int) -> int:
    """How many bytes ``encode_varlong(value)`` takes."""
    u = value << 1 if value >= 0 else (-value << 1) - 1
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def zigzag_decode(u: int) -> int:
    """Map an unsigned zig-zag value back to the signed value it stands for."""
    return (u >> 1) ^ -(u & 1)


def decode_uvarint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Read an unsigned base-128 varint of at most ``max_bytes`` at ``pos``.

    Returns ``(value, position after it)``. Raises CorruptRecordError if the buffer ends first
    or the varint is longer than ``max_bytes``.
    """
    result = 0
    shift = 0
    end = len(buf)
    for i in range(pos, min(pos + max_bytes, end)):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i + 1
        shift += 7
    if pos + max_bytes <= end:
        raise CorruptRecordError(f"varint at position {pos} is longer than {max_bytes} bytes")
    raise CorruptRecordError(f"varint at position {pos} runs past the end of the buffer")


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint (int32) at ``pos``; returns ``(value, position after it)``."""
    u, pos = decode_uvarint(buf, pos, _VARINT_MAX_BYTES)
    if u > 0xFFFFFFFF:
        raise CorruptRecordError(f"varint ending at position {pos} overflows an int32")
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zig-zag varlong (int64) at ``pos``; returns ``(value, position after it)``."""
    u, pos = decode_uvarint(buf, pos, _VARLONG_MAX_BYTES)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError(f"varlong ending at position {pos} overflows an int64")
    return (u >> 1) ^ -(u & 1), pos


#: ``ZIGZAG_DECODE[u]`` is the signed value of the unsigned zig-zag value ``u`` for every
#: ``u`` a one- or two-byte varint can carry (``u < 2**14``).
ZIGZAG_DECODE: tuple[int, ...] = tuple((u >> 1) ^ -(u & 1) for u in range(1 << 14))

#: ``VARINT_OF[n]`` is the zig-zag varint encoding of ``n`` for ``0 <= n < SMALL_LIMIT``:
#: every length and offset delta of a typical record, without a function call.
VARINT_OF: tuple[bytes, ...] = tuple(_encode_unsigned(n << 1) for n in range(SMALL_LIMIT))
