"""Kafka's wire primitives and frame splitting (pure: no asyncio, no I/O).

The building blocks of ``kafka_wire``'s messages: big-endian integers, unsigned varints,
compact strings and bytes (length + 1 as a varint, 0 for null), tagged fields (a count, then
``tag, size, bytes`` each, ascending tags), a bounds-checked ``Reader`` over a memoryview that
turns every overrun into ``InvalidRequestError``, and the ``FrameSplitter`` that cuts a TCP byte
stream into ``int32 size``-prefixed frames without copying large ones. Safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from yak.errors import InvalidRequestError
from yak.protocol.broker_wire import Buffer

__all__ = [
    "EMPTY_TAGS",
    "I8",
    "I16",
    "I32",
    "I64",
    "MAX_FRAME_BYTES",
    "SIZE",
    "FrameSplitter",
    "FrameTooLargeError",
    "Reader",
    "compact_string",
    "tags",
    "uvarint",
]

#: The largest frame either side accepts by default.
MAX_FRAME_BYTES = 1024 * 1024 * 1024
I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
SIZE = I32
EMPTY_TAGS = b"\x00"

# --- encoding -------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return uvarint(len(data) + 1) + data


def tags(fields: Mapping[int, bytes]) -> bytes:
    if not fields:
        return EMPTY_TAGS
    out = [uvarint(len(fields))]
    for tag in sorted(fields):
        data = fields[tag]
        out.append(uvarint(tag) + uvarint(len(data)) + data)
    return b"".join(out)


class Reader:
    """Reads Kafka primitives from a memoryview; every overrun is an InvalidRequestError."""

    __slots__ = ("pos", "view", "what")

    def __init__(self, data: Buffer, what: str) -> None:
        self.view = memoryview(data)
        self.pos = 0
        self.what = what

    def _need(self, size: int, field: str) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.view):
            raise InvalidRequestError(
                f"{self.what}: {field} runs past the end of the {len(self.view)}-byte message"
            )
        self.pos = start + size
        return start

    def unpack(self, form: struct.Struct, field: str) -> tuple[Any, ...]:
        return form.unpack_from(self.view, self._need(form.size, field))

    def int16(self, field: str) -> int:
        return int(I16.unpack_from(self.view, self._need(2, field))[0])

    def int32(self, field: str) -> int:
        return int(I32.unpack_from(self.view, self._need(4, field))[0])

    def int64(self, field: str) -> int:
        return int(I64.unpack_from(self.view, self._need(8, field))[0])

    def uvarint(self, field: str) -> int:
        view, pos, shift, value = self.view, self.pos, 0, 0
        while True:
            if pos >= len(view) or shift > 28:
                raise InvalidRequestError(f"{self.what}: {field} is not a valid varint")
            byte = view[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return value
            shift += 7

    def compact_bytes(self, field: str) -> memoryview | None:
        length = self.uvarint(field) - 1
        if length < 0:
            return None
        start = self._need(length, field)
        return self.view[start : start + length]

    def compact_string(self, field: str) -> str | None:
        data = self.compact_bytes(field)
        if data is None:
            return None
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError(f"{self.what}: {field} is not UTF-8") from None

    def string(self, field: str) -> str:
        text = self.compact_string(field)
        if text is None:
            raise InvalidRequestError(f"{self.what}: {field} must not be null")
        return text

    def nullable_string16(self, field: str) -> str | None:
        length = self.int16(field)
        if length < 0:
            return None
        start = self._need(length, field)
        try:
            return str(self.view[start : start + length], "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError(f"{self.what}: {field} is not UTF-8") from None

    def array_length(self, field: str, *, nullable: bool = False) -> int:
        count = self.uvarint(field) - 1
        if count < 0:
            if nullable:
                return 0
            raise InvalidRequestError(f"{self.what}: {field} must not be null")
        if count > len(self.view) - self.pos:  # each entry takes at least one byte
            raise InvalidRequestError(f"{self.what}: {field} claims {count} entries")
        return count

    def tags(self, field: str) -> dict[int, memoryview]:
        found: dict[int, memoryview] = {}
        for _ in range(self.uvarint(f"{field} tag count")):
            tag = self.uvarint(f"{field} tag")
            size = self.uvarint(f"{field} tag size")
            start = self._need(size, f"{field} tag {tag}")
            found[tag] = self.view[start : start + size]
        return found

    def end(self) -> None:
        if self.pos != len(self.view):
            raise InvalidRequestError(
                f"{self.what}: {len(self.view) - self.pos} bytes left over after the message"
            )


# --- frame splitting --------------------------------------------------------------------------


class FrameTooLargeError(Exception):
    """A frame's size prefix exceeds the limit (the connection must be closed)."""


class FrameSplitter:
    """Cuts a byte stream into frames, for an ``asyncio.BufferedProtocol`` (pure: no I/O).

    The protocol asks ``buffer()`` for where to read into and reports ``filled(n)``; complete
    frames come out of ``filled`` as read-only buffers (the size prefix stripped). Small frames
    share one scratch buffer (and are copied out, once); a frame larger than ``direct_bytes``
    gets a buffer of its own that the socket fills directly — the record bytes of a produce
    request or a fetch response are never copied here. A frame larger than ``max_bytes``
    raises ``FrameTooLargeError`` (the connection cannot be kept: the stream has no resync point).
    """

    def __init__(
        self,
        *,
        max_bytes: int = MAX_FRAME_BYTES,
        direct_bytes: int = 64 * 1024,
        scratch_bytes: int = 256 * 1024,
    ) -> None:
        self._max = max_bytes
        self._direct = direct_bytes
        self._scratch = bytearray(scratch_bytes)
        self._start = 0  # first unread byte of scratch
        self._end = 0  # end of the bytes read into scratch
        self._big: bytearray | None = None
        self._big_filled = 0

    def buffer(self) -> memoryview:
        """Where the next read goes."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._scratch):
            self._compact()
        return memoryview(self._scratch)[self._end :]

    def filled(self, count: int) -> list[Buffer]:
        """``count`` bytes were read into the last ``buffer()``; the frames now complete."""
        frames: list[Buffer] = []
        if self._big is not None:
            self._big_filled += count
            if self._big_filled < len(self._big):
                return frames
            frames.append(memoryview(self._big).toreadonly())
            self._big = None
            return frames
        self._end += count
        scratch = self._scratch
        while self._end - self._start >= 4:
            size = int(SIZE.unpack_from(scratch, self._start)[0])
            if size < 0 or size > self._max:
                raise FrameTooLargeError(f"a frame of {size} bytes exceeds {self._max}")
            available = self._end - self._start - 4
            if available >= size:
                begin = self._start + 4
                frames.append(bytes(memoryview(scratch)[begin : begin + size]))
                self._start = begin + size
                continue
            if size > self._direct or size > len(scratch) - 4:
                big = bytearray(size)
                big[:available] = scratch[self._start + 4 : self._end]
                self._start = self._end = 0
                self._big, self._big_filled = big, available
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames

    def _compact(self) -> None:
        remaining = self._end - self._start
        self._scratch[:remaining] = self._scratch[self._start : self._end]
        self._start, self._end = 0, remaining
