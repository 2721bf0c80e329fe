"""The message browser: a bounded, resumable, server-side scan of a topic's partitions.

One browse request reads the chosen partitions from their start offsets and keeps the records
that pass the ``Filters``. It stops at the first of: the page holds ``limit`` matches, the scan
budget (``max_scan`` records examined) is spent, every partition reached its high watermark.

* **Order.** Partitions are merged as a k-way merge on (timestamp, partition, offset) of each
  partition's next record; each partition is read in offset order. With one partition that is
  offset order; with several it is timestamp order as long as each partition's timestamps rise.
* **Cursor.** Per partition, the offset of the first record not examined yet. Continuing from
  it examines every record exactly once: nothing is repeated or skipped across pages.
* **Start.** ``offset`` (clamped into the log), ``timestamp`` (the first offset of the batch
  holding the first record at or after it; the batch's earlier records are dropped by
  ``Filters.since_ms``) or ``newest``: the last ``limit`` records of each partition (fewer when
  the budget cannot cover them all), of whose matches the newest ``limit`` are shown.
* **Filters** are substrings of the key and the value decoded as UTF-8, and a header:
  ``name`` (a header of that name exists) or ``name=value`` (a header of that name whose value
  contains ``value``). Case-sensitive unless ``ignore_case``.

Rendering (``render``) and export (``export_json``/``export_csv``) are pure functions of records.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

from yak.api.admin import PartitionOffset
from yak.errors import OffsetOutOfRangeError
from yak.sdk.reader import PartitionRead
from yak.sdk.records import ConsumerRecord
from yak_console.timestamps import format_timestamp

__all__ = [
    "DEFAULT_LIMIT",
    "EXPORT_COLUMNS",
    "MAX_LIMIT",
    "BrowsePage",
    "Filters",
    "Format",
    "OffsetLookup",
    "Reader",
    "Rendered",
    "Start",
    "StartKind",
    "decode_cursor",
    "encode_cursor",
    "export_csv",
    "export_json",
    "export_rows",
    "hex_dump",
    "render",
    "scan",
    "start_offsets",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: A partition's first read asks for this much; each further read doubles it up to the max.
_FIRST_READ_BYTES = 64 * 1024
_MAX_READ_BYTES = 1024 * 1024
#: Bytes of one key or value shown on the page (the export always has all of it).
_DISPLAY_BYTES = 64 * 1024


class Reader(Protocol):
    """What the scan reads with (``yak.sdk.reader.AsyncPartitionReader``)."""

    async def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = ...,
        timeout_ms: int = ...,
    ) -> PartitionRead: ...


class OffsetLookup(Protocol):
    """What start positions are looked up with (``yak.sdk.AsyncAdmin``)."""

    async def partition_offset(
        self, topic: str, partition: int, timestamp: int | Literal["earliest", "latest"]
    ) -> PartitionOffset: ...


class StartKind(StrEnum):
    NEWEST = "newest"
    OFFSET = "offset"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class Start:
    kind: StartKind = StartKind.NEWEST
    #: The offset or the timestamp (ms), by ``kind``.
    value: int = 0


@dataclass(frozen=True, slots=True)
class Filters:
    """Which records a page keeps (an empty field keeps every record)."""

    key: str = ""
    header: str = ""
    value: str = ""
    ignore_case: bool = False
    #: Records older than this (ms) are examined but not kept (a timestamp start).
    since_ms: int | None = None

    def matches(self, record: ConsumerRecord) -> bool:
        if self.since_ms is not None and record.timestamp < self.since_ms:
            return False
        fold: Callable[[str], str] = str.casefold if self.ignore_case else str
        if self.key and (record.key is None or fold(self.key) not in fold(_text(record.key))):
            return False
        if self.value and (
            record.value is None or fold(self.value) not in fold(_text(record.value))
        ):
            return False
        if self.header:
            name, has_value, wanted = self.header.partition("=")
            return any(
                fold(n) == fold(name) and (not has_value or fold(wanted) in fold(_text(v)))
                for n, v in record.headers
            )
        return True


@dataclass(frozen=True, slots=True)
class BrowsePage:
    """One page of matches and where the next page starts."""

    records: tuple[ConsumerRecord, ...]
    cursor: Mapping[int, int]
    scanned: int
    matched: int
    #: Every partition was read up to its high watermark.
    at_end: bool
    #: The scan stopped because ``max_scan`` records were examined.
    budget_spent: bool


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


async def start_offsets(
    admin: OffsetLookup,
    topic: str,
    partitions: Sequence[int],
    start: Start,
    limit: int,
    max_scan: int,
    known: Mapping[int, tuple[int, int]] | None = None,
) -> dict[int, int]:
    """Each partition's first offset to examine for ``start``.

    ``known`` (partition → (log start, high watermark), e.g. from the console's latest
    sample) spares the two lookups per partition for ``newest``: a high watermark that is a
    sample old only widens the window, and the scan runs on to the real end. Offsets and
    timestamps are always looked up, since a stale bound would move the start.
    """

    async def one(partition: int) -> int:
        bounds = (known or {}).get(partition)
        if start.kind is StartKind.NEWEST and bounds is not None:
            low, high = bounds
            return max(low, high - _window(limit, max_scan, len(partitions)))
        earliest, latest = await asyncio.gather(
            admin.partition_offset(topic, partition, "earliest"),
            admin.partition_offset(topic, partition, "latest"),
        )
        low, high = earliest.offset, latest.offset
        if start.kind is StartKind.OFFSET:
            return min(max(start.value, low), high)
        if start.kind is StartKind.TIMESTAMP:
            found = (await admin.partition_offset(topic, partition, start.value)).offset
            return high if found < 0 else min(max(found, low), high)
        return max(low, high - _window(limit, max_scan, len(partitions)))

    offsets = await asyncio.gather(*(one(p) for p in partitions))
    return dict(zip(partitions, offsets, strict=True))


def _window(limit: int, max_scan: int, partitions: int) -> int:
    """How many of each partition's newest records a ``newest`` start reads."""
    return max(1, min(limit, max_scan // max(1, partitions)))


@dataclass(slots=True)
class _Partition:
    """One partition's read position during a scan."""

    partition: int
    #: The offset to read next.
    fetch_at: int
    buffer: deque[ConsumerRecord] = field(default_factory=deque)
    high_watermark: int | None = None
    stuck: bool = False
    read_bytes: int = _FIRST_READ_BYTES

    @property
    def exhausted(self) -> bool:
        if self.buffer:
            return False
        return self.stuck or (
            self.high_watermark is not None and self.fetch_at >= self.high_watermark
        )

    @property
    def next_offset(self) -> int:
        return self.buffer[0].offset if self.buffer else self.fetch_at

    async def fill(self, reader: Reader, topic: str) -> None:
        """Read until a record is buffered or the partition is exhausted."""
        while not self.buffer and not self.exhausted:
            try:
                read = await reader.read(
                    topic, self.partition, self.fetch_at, max_bytes=self.read_bytes
                )
            except OffsetOutOfRangeError as exc:
                start = exc.details.get("log_start_offset")
                if isinstance(start, int) and start > self.fetch_at:
                    self.fetch_at = start  # the records before it were deleted meanwhile
                    continue
                self.stuck = True
                return
            self.read_bytes = min(self.read_bytes * 2, _MAX_READ_BYTES)
            self.high_watermark = read.high_watermark
            self.buffer.extend(r for r in read.records if r.offset >= self.fetch_at)
            if read.next_offset <= self.fetch_at and not self.buffer:
                self.stuck = True  # nothing readable below the high watermark now
            self.fetch_at = max(read.next_offset, self.fetch_at)


async def scan(
    reader: Reader,
    topic: str,
    positions: Mapping[int, int],
    filters: Filters,
    *,
    limit: int = DEFAULT_LIMIT,
    max_scan: int,
    keep_last: bool = False,
) -> BrowsePage:
    """Examine records from ``positions`` (partition → offset) and keep ``filters``' matches.

    ``keep_last`` scans on past a full page and keeps the newest ``limit`` matches (``newest``).
    """
    parts = [_Partition(p, offset) for p, offset in sorted(positions.items())]
    matches: list[ConsumerRecord] = []
    matched = scanned = 0
    while scanned < max_scan and (keep_last or matched < limit):
        empty = [p for p in parts if not p.buffer and not p.exhausted]
        if empty:
            await asyncio.gather(*(p.fill(reader, topic) for p in empty))
        live = [p for p in parts if p.buffer]
        if not live:
            break
        head = min(live, key=lambda p: (p.buffer[0].timestamp, p.partition, p.buffer[0].offset))
        record = head.buffer.popleft()
        scanned += 1
        if filters.matches(record):
            matched += 1
            matches.append(record)
            if keep_last and len(matches) > limit:
                matches.pop(0)
    at_end = all(p.exhausted for p in parts)
    return BrowsePage(
        records=tuple(matches),
        cursor={p.partition: p.next_offset for p in parts},
        scanned=scanned,
        matched=matched,
        at_end=at_end,
        budget_spent=scanned >= max_scan and not at_end,
    )


def encode_cursor(cursor: Mapping[int, int]) -> str:
    """``{0: 12, 2: 7}`` → ``"0:12,2:7"`` (for a query string)."""
    return ",".join(f"{p}:{o}" for p, o in sorted(cursor.items()))


def decode_cursor(text: str) -> dict[int, int]:
    """The inverse of ``encode_cursor`` (``ValueError`` when malformed)."""
    cursor: dict[int, int] = {}
    for item in text.split(","):
        partition, _, offset = item.partition(":")
        p, o = int(partition), int(offset)
        if p < 0 or o < 0 or p in cursor:
            raise ValueError(f"bad cursor entry {item!r}")
        cursor[p] = o
    return cursor


class Format(StrEnum):
    """How a key or value is shown."""

    AUTO = "auto"
    TEXT = "text"
    JSON = "json"
    HEX = "hex"


@dataclass(frozen=True, slots=True)
class Rendered:
    """A key or value as shown: ``kind`` is what it was shown as (``null`` for none)."""

    text: str
    kind: Literal["null", "text", "json", "hex"]
    note: str = ""

    @property
    def preview(self) -> str:
        """One line of up to 80 characters (runs of white space shown as one space)."""
        line = " ".join(self.text[:400].split())
        return line[:80] + "…" if len(line) > 80 else line

    @property
    def long(self) -> bool:
        """Too long to show in a table cell at once."""
        return "\n" in self.text or len(self.text) > 80


def hex_dump(data: bytes) -> str:
    """16 bytes a line: offset, hex bytes and the printable ASCII."""
    lines = []
    width = 47 if len(data) > 16 else 0  # columns line up when there are several lines
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes:<{width}}  |{printable}|")
    return "\n".join(lines)


def _json(data: bytes) -> object:
    """The parsed JSON document, or ``ValueError``."""
    return json.loads(data.decode("utf-8"))


def render(data: bytes | None, fmt: Format) -> Rendered:
    """``data`` shown as ``fmt``: ``json`` falls back to text when it does not parse; ``auto``
    is json for a JSON object or array, else text when valid UTF-8, else hex."""
    if data is None:
        return Rendered("", "null")
    note = ""
    if len(data) > _DISPLAY_BYTES:
        note = f"first {_DISPLAY_BYTES:,} of {len(data):,} bytes shown"
    shown = data[:_DISPLAY_BYTES]
    if fmt in (Format.JSON, Format.AUTO) and not note:
        try:
            document = _json(data)
        except ValueError:
            document = None
            if fmt is Format.JSON:
                note = "not JSON: shown as text"
        else:
            if fmt is Format.JSON or isinstance(document, dict | list):
                return Rendered(json.dumps(document, indent=2, ensure_ascii=False), "json")
    if fmt is Format.HEX or (fmt is Format.AUTO and not _is_utf8(data)):
        return Rendered(hex_dump(shown), "hex", note)
    return Rendered(shown.decode("utf-8", "replace"), "text", note)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _encoded(data: bytes | None) -> tuple[str | None, str | None]:
    """Export form: (text, ``utf-8``), or (base64, ``base64``) when not UTF-8."""
    if data is None:
        return None, None
    if _is_utf8(data):
        return data.decode("utf-8"), "utf-8"
    return base64.b64encode(data).decode("ascii"), "base64"


#: The export's fields, in order.
EXPORT_COLUMNS: tuple[str, ...] = ("topic", "partition", "offset", "timestamp", "timestamp_ms")
EXPORT_COLUMNS += ("key", "key_encoding", "value", "value_encoding", "headers")


def export_rows(records: Iterable[ConsumerRecord]) -> list[dict[str, object]]:
    """One JSON-ready object per record (``EXPORT_COLUMNS``; headers as a list of objects)."""
    rows: list[dict[str, object]] = []
    for r in records:
        headers = [
            dict(zip(("name", "value", "encoding"), (name, *_encoded(data)), strict=True))
            for name, data in r.headers
        ]
        cells: tuple[object, ...] = (r.topic, r.partition, r.offset)
        cells += (format_timestamp(r.timestamp), r.timestamp)
        cells += (*_encoded(r.key), *_encoded(r.value), headers)
        rows.append(dict(zip(EXPORT_COLUMNS, cells, strict=True)))
    return rows


def export_json(records: Iterable[ConsumerRecord]) -> str:
    return json.dumps(export_rows(records), indent=2, ensure_ascii=False) + "\n"


def export_csv(records: Iterable[ConsumerRecord]) -> str:
    """``EXPORT_COLUMNS`` with a header row; headers as JSON text, a null as an empty cell."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(EXPORT_COLUMNS)
    for row in export_rows(records):
        row["headers"] = json.dumps(row["headers"], ensure_ascii=False)
        writer.writerow("" if row[c] is None else row[c] for c in EXPORT_COLUMNS)
    return out.getvalue()
