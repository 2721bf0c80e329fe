"""Splitting a stream of concatenated JSON objects into one ``bytes`` per object, as it arrives.

The v3 records route reads its body as Concatenated JSON: JSON objects one after another,
separated by nothing or by whitespace (newline-delimited JSON is one case of it). ``JsonSplitter``
is fed the body's chunks as they come and hands back each top-level object once its closing
brace has arrived; it does not parse the objects (``orjson`` does, one at a time), it only
follows strings, escapes and bracket depth. Scanning jumps between the bytes that matter
(brackets and quotes outside strings, quotes and backslashes inside) with one regex search each.

Invariants: the buffer holds only the object in progress (what came before it is dropped), and
never more than ``max_object_bytes`` of it (``ObjectTooLargeError`` beyond), so memory is bounded
whatever the stream's length. Anything but whitespace between objects, or an object left open at
the end, is ``NotConcatenatedJsonError``: the stream cannot be resynchronised after it. Mismatched
brackets inside an object (``{]``) are not noticed here: that object's own parse fails. Not
thread-safe; one splitter per stream. Pure: no I/O.
"""

from __future__ import annotations

import re

from yak.errors import InvalidRequestError, MessageTooLargeError

__all__ = ["JsonSplitter", "NotConcatenatedJsonError", "ObjectTooLargeError"]

_OUTSIDE = re.compile(rb'[{}\[\]"]')
_INSIDE = re.compile(rb'["\\]')
_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
_OPEN = frozenset(b"{[")
_QUOTE = ord('"')
_BACKSLASH = ord("\\")
_BRACE = ord("{")


class NotConcatenatedJsonError(InvalidRequestError):
    """The stream holds something other than JSON objects (and whitespace between them)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="malformed_json")


class ObjectTooLargeError(MessageTooLargeError):
    """One object of the stream is longer than the splitter's limit."""


class JsonSplitter:
    """Feed chunks in order (``feed``), then ``finish``; see the module docstring."""

    def __init__(self, max_object_bytes: int) -> None:
        self._max = max_object_bytes
        self._buffer = bytearray()
        self._pos = 0  # where scanning resumes
        self._start = 0  # where the object in progress starts
        self._depth = 0
        self._in_string = False
        self._seen = 0  # objects handed out so far
        self._failed: NotConcatenatedJsonError | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        """The objects ``chunk`` completes, in order (those before a fault in the stream,
        which the next call raises)."""
        if self._failed is not None:
            raise self._failed
        buffer = self._buffer
        buffer += chunk
        done: list[bytes] = []
        pos, depth, in_string = self._pos, self._depth, self._in_string
        while True:
            if in_string:
                found = _INSIDE.search(buffer, pos)
                if found is None:
                    pos = len(buffer)
                    break
                at = found.start()
                if buffer[at] == _BACKSLASH:
                    if at + 1 >= len(buffer):  # the escaped byte has not arrived yet
                        pos = at
                        break
                    pos = at + 2
                else:
                    in_string, pos = False, at + 1
            elif depth == 0:
                found = _NOT_SPACE.search(buffer, pos)
                if found is None:
                    pos = len(buffer)
                    break
                at = found.start()
                if buffer[at] != _BRACE:
                    self._failed = NotConcatenatedJsonError(
                        f"record {self._seen + len(done)} (from 0) is not a JSON object: "
                        f"found {bytes(buffer[at : at + 20])!r}"
                    )
                    break
                self._start, depth, pos = at, 1, at + 1
            else:
                found = _OUTSIDE.search(buffer, pos)
                if found is None:
                    pos = len(buffer)
                    break
                at = found.start()
                pos = at + 1
                byte = buffer[at]
                if byte == _QUOTE:
                    in_string = True
                elif byte in _OPEN:
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        done.append(bytes(buffer[self._start : pos]))
        self._seen += len(done)
        # Keep only the object in progress (nothing when between objects).
        keep = self._start if depth else pos
        if keep > len(buffer):
            keep = len(buffer)
        del buffer[:keep]
        self._pos, self._start = pos - keep, 0
        self._depth, self._in_string = depth, in_string
        if depth and len(buffer) > self._max:
            raise ObjectTooLargeError(
                f"record {self._seen} is over the limit of {self._max:,} bytes", limit=self._max
            )
        return done

    def finish(self) -> None:
        """The stream ended: ``NotConcatenatedJsonError`` if it held anything but objects or an
        object was left open."""
        if self._failed is not None:
            raise self._failed
        if self._depth:
            raise NotConcatenatedJsonError(
                f"record {self._seen}: the body ended inside a JSON object ({len(self._buffer):,} "
                "bytes unterminated)"
            )

    @property
    def objects(self) -> int:
        """How many objects were handed out."""
        return self._seen
