"""kcat-like formats of ``yak consume -f`` and the default line without one."""

from __future__ import annotations

import pytest

from yak.cli.record_format import RecordFormat, default_format
from yak.sdk.records import ConsumerRecord

RECORD = ConsumerRecord(
    topic="orders",
    partition=2,
    offset=41,
    timestamp=1_700_000_000_123,
    key=b"k1",
    value=b"caf\xc3\xa9",
    headers=(("trace", b"abc"), ("empty", None)),
)
TOMBSTONE = RECORD._replace(key=None, value=None, headers=())


@pytest.mark.parametrize(
    ("template", "record", "expected"),
    [
        ("%t %p %o %k %v %h %T\\n", RECORD, "orders 2 41 k1 café trace=abc,empty= 1700000000123\n"),
        ("%s|%K|%S\\t100%%\\r\\\\", RECORD, "café|2|5\t100%\r\\"),
        ("[%k][%v] %K %S %h", TOMBSTONE, "[][] -1 -1 "),
        ("plain \\x %", None, None),
    ],
)
def test_render(template: str, record: ConsumerRecord | None, expected: str | None) -> None:
    if record is None:
        with pytest.raises(ValueError, match="unknown placeholder %"):
            RecordFormat(template)
        return
    assert RecordFormat(template).render(record) == expected


def test_unknown_placeholders_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="%x"):
        RecordFormat("%v %x")


def test_undecodable_bytes_are_replaced() -> None:
    assert RecordFormat("%v").render(RECORD._replace(value=b"\xff")) == "\ufffd"


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        ((False, False, False), "café\n"),
        ((True, False, False), "41\tcafé\n"),
        ((True, True, True), "41\tk1\ttrace=abc,empty=\tcafé\n"),
        ((False, True, False), "k1\tcafé\n"),
    ],
)
def test_default_format(flags: tuple[bool, bool, bool], line: str) -> None:
    assert RecordFormat(default_format(*flags)).render(RECORD) == line
