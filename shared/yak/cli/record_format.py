"""kcat-like output formats for ``yak consume -f``.

A format is text with placeholders, rendered once per record: ``%t`` topic, ``%p`` partition,
``%o`` offset, ``%k`` key, ``%K`` key length, ``%v`` (or ``%s``) value, ``%S`` value length,
``%h`` headers as ``k1=v1,k2=v2``, ``%T`` timestamp (ms since the epoch), ``%%`` a percent
sign; and the escapes ``\\n``, ``\\t``, ``\\r`` and ``\\\\``. Keys, values and header values
print as UTF-8 text (undecodable bytes replaced); a null key or value prints as nothing, its
length as -1. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from yak.sdk.records import ConsumerRecord

__all__ = ["RecordFormat", "default_format"]

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


def _length(data: bytes | None) -> str:
    return "-1" if data is None else str(len(data))


def _headers(record: ConsumerRecord) -> str:
    return ",".join(f"{key}={_text(value)}" for key, value in record.headers)


_FIELDS: dict[str, Callable[[ConsumerRecord], str]] = {
    "t": lambda r: r.topic,
    "p": lambda r: str(r.partition),
    "o": lambda r: str(r.offset),
    "k": lambda r: _text(r.key),
    "K": lambda r: _length(r.key),
    "v": lambda r: _text(r.value),
    "s": lambda r: _text(r.value),
    "S": lambda r: _length(r.value),
    "h": _headers,
    "T": lambda r: str(r.timestamp),
}


class RecordFormat:
    """A parsed format (``ValueError`` naming the first unknown placeholder)."""

    def __init__(self, template: str) -> None:
        self.template = template
        self._parts: list[str | Callable[[ConsumerRecord], str]] = []
        literal: list[str] = []
        index = 0
        while index < len(template):
            char = template[index]
            following = template[index + 1] if index + 1 < len(template) else ""
            if char == "%":
                if following == "%":
                    literal.append("%")
                elif following in _FIELDS:
                    self._flush(literal)
                    self._parts.append(_FIELDS[following])
                else:
                    known = " ".join(f"%{c}" for c in _FIELDS)
                    raise ValueError(
                        f"unknown placeholder %{following} in {template!r} (known: {known} %%)"
                    )
                index += 2
            elif char == "\\" and following in _ESCAPES:
                literal.append(_ESCAPES[following])
                index += 2
            else:
                literal.append(char)
                index += 1
        self._flush(literal)

    def _flush(self, literal: list[str]) -> None:
        if literal:
            self._parts.append("".join(literal))
            literal.clear()

    def render(self, record: ConsumerRecord) -> str:
        return "".join(p if isinstance(p, str) else p(record) for p in self._parts)


def default_format(print_offset: bool, print_key: bool, print_headers: bool) -> str:
    """What ``yak consume`` prints without ``-f``: the chosen fields and the value, tab-separated,
    one record per line."""
    fields = [
        code
        for code, wanted in (("%o", print_offset), ("%k", print_key), ("%h", print_headers))
        if wanted
    ]
    return "\\t".join([*fields, "%v"]) + "\\n"
