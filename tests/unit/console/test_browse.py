"""The message browser's scan, filters, cursor, rendering and export, on a fake log."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

import httpx
import pytest

from yak.api.admin import PartitionInfo, PartitionOffset, TopicDescription
from yak.errors import InvalidRequestError, OffsetOutOfRangeError
from yak.sdk.reader import PartitionRead
from yak.sdk.records import ConsumerRecord
from yak_console.app import create_app
from yak_console.browse import (
    BrowsePage,
    Filters,
    Format,
    Start,
    StartKind,
    decode_cursor,
    encode_cursor,
    export_csv,
    export_json,
    hex_dump,
    render,
    scan,
    start_offsets,
)
from yak_console.pages.browse import parse_request, parse_timestamp
from yak_console.pages.produce import MAX_RECORD_BYTES, ProduceForm, parse_headers
from yak_console.settings import ConsoleSettings

TOPIC = "orders"


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def record(
    partition: int,
    offset: int,
    timestamp: int,
    key: bytes | None = None,
    value: bytes | None = b"",
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> ConsumerRecord:
    return ConsumerRecord(TOPIC, partition, offset, timestamp, key, value, headers)


class FakeLog:
    """Partitions of records; reads answer whole "batches" of ``batch`` records from the one
    holding the offset (so a read may start before the offset asked, as Kafka's do)."""

    def __init__(self, partitions: dict[int, list[ConsumerRecord]], batch: int = 7) -> None:
        self.partitions = partitions
        self.batch = batch
        self.reads: list[tuple[int, int]] = []

    def bounds(self, partition: int) -> tuple[int, int]:
        records = self.partitions[partition]
        if not records:
            return 0, 0
        return records[0].offset, records[-1].offset + 1

    async def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1024 * 1024,
        timeout_ms: int = 0,
    ) -> PartitionRead:
        assert topic == TOPIC
        assert max_bytes > 0
        self.reads.append((partition, offset))
        low, high = self.bounds(partition)
        if not low <= offset <= high:
            raise OffsetOutOfRangeError("out of range", log_start_offset=low)
        first = offset - (offset - low) % self.batch
        chosen = [r for r in self.partitions[partition] if r.offset >= first][: self.batch]
        next_offset = chosen[-1].offset + 1 if chosen else offset
        return PartitionRead(chosen, next_offset, high, low)

    async def partition_offset(
        self, topic: str, partition: int, timestamp: int | Literal["earliest", "latest"]
    ) -> PartitionOffset:
        low, high = self.bounds(partition)
        if timestamp == "earliest":
            return PartitionOffset(topic=topic, partition=partition, offset=low)
        if timestamp == "latest":
            return PartitionOffset(topic=topic, partition=partition, offset=high)
        found = [r.offset for r in self.partitions[partition] if r.timestamp >= timestamp]
        offset = found[0] - (found[0] - low) % self.batch if found else -1
        return PartitionOffset(topic=topic, partition=partition, offset=offset)


def interleaved(partitions: int, per_partition: int) -> FakeLog:
    """Record i of partition p has timestamp 1000 + i * partitions + p: a strict global order."""
    return FakeLog(
        {
            p: [
                record(p, i, 1000 + i * partitions + p, f"k{i}".encode(), f"v-{p}-{i}".encode())
                for i in range(per_partition)
            ]
            for p in range(partitions)
        }
    )


def browse(
    log: FakeLog,
    positions: dict[int, int],
    filters: Filters | None = None,
    limit: int = 50,
    max_scan: int = 10_000,
    keep_last: bool = False,
) -> BrowsePage:
    return run(
        scan(
            log,
            TOPIC,
            positions,
            filters or Filters(),
            limit=limit,
            max_scan=max_scan,
            keep_last=keep_last,
        )
    )


def ids(page: BrowsePage) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in page.records]


# The scan ----------------------------------------------------------------------------------


def test_one_partition_pages_in_offset_order() -> None:
    log = interleaved(1, 30)
    page = browse(log, {0: 3}, limit=10)
    assert ids(page) == [(0, o) for o in range(3, 13)]
    assert (page.scanned, page.matched, page.at_end, page.budget_spent) == (10, 10, False, False)
    assert page.cursor == {0: 13}


def test_several_partitions_merge_by_timestamp_and_pages_repeat_and_skip_nothing() -> None:
    log = interleaved(3, 40)  # 120 records
    seen: list[tuple[int, int]] = []
    positions = {0: 0, 1: 0, 2: 0}
    sizes = []
    for _ in range(3):
        page = browse(log, positions, limit=50)
        timestamps = [r.timestamp for r in page.records]
        assert timestamps == sorted(timestamps)
        sizes.append(len(page.records))
        seen += ids(page)
        positions = dict(page.cursor)
    assert sizes == [50, 50, 20]
    assert page.at_end
    assert not page.budget_spent
    assert sorted(seen) == sorted((p, o) for p in range(3) for o in range(40))
    assert len(set(seen)) == 120
    assert browse(log, positions).records == ()


def test_merge_breaks_timestamp_ties_by_partition_then_offset() -> None:
    log = FakeLog({0: [record(0, 0, 5), record(0, 1, 5)], 1: [record(1, 0, 5)]})
    assert ids(browse(log, {0: 0, 1: 0})) == [(0, 0), (0, 1), (1, 0)]


def test_the_budget_stops_a_scan_for_rare_matches_and_the_cursor_continues_it() -> None:
    log = interleaved(2, 100)
    rare = Filters(value="-99")  # v-0-99 and v-1-99: the last record of each partition
    page = browse(log, {0: 0, 1: 0}, rare, max_scan=150)
    assert (page.scanned, page.matched, page.budget_spent, page.at_end) == (150, 0, True, False)
    page = browse(log, dict(page.cursor), rare, max_scan=150)
    assert ids(page) == [(0, 99), (1, 99)]
    assert (page.scanned, page.at_end, page.budget_spent) == (50, True, False)


def test_a_full_page_at_the_very_end_is_at_the_end() -> None:
    log = interleaved(1, 10)
    page = browse(log, {0: 0}, limit=10)
    assert len(page.records) == 10
    assert page.at_end
    assert page.cursor == {0: 10}


def test_a_cursor_below_the_log_start_moves_up_to_it() -> None:
    log = FakeLog({0: [record(0, o, o) for o in range(20, 30)]})
    page = browse(log, {0: 5})
    assert ids(page) == [(0, o) for o in range(20, 30)]


def test_a_cursor_past_the_end_finds_nothing() -> None:
    log = interleaved(1, 5)
    page = browse(log, {0: 9})
    assert (page.records, page.at_end, page.cursor) == ((), True, {0: 9})


def test_compaction_gaps_are_stepped_over() -> None:
    log = FakeLog({0: [record(0, o, o) for o in (0, 1, 5, 9, 10, 17)]}, batch=2)
    assert [o for _, o in ids(browse(log, {0: 2}))] == [5, 9, 10, 17]


def test_keep_last_keeps_the_newest_matches() -> None:
    log = interleaved(2, 10)
    page = browse(log, {0: 0, 1: 0}, Filters(key="k"), limit=3, keep_last=True)
    assert ids(page) == [(1, 8), (0, 9), (1, 9)]
    assert (page.matched, page.scanned, page.at_end) == (20, 20, True)


def test_start_offsets_for_each_start() -> None:
    log = interleaved(2, 40)
    both = [0, 1]

    def start(kind: StartKind, value: int = 0, limit: int = 50, max_scan: int = 10_000) -> Any:
        return run(start_offsets(log, TOPIC, both, Start(kind, value), limit, max_scan))

    assert start(StartKind.OFFSET, 7) == {0: 7, 1: 7}
    assert start(StartKind.OFFSET, 400) == {0: 40, 1: 40}
    assert start(StartKind.NEWEST, limit=10) == {0: 30, 1: 30}
    assert start(StartKind.NEWEST, limit=100) == {0: 0, 1: 0}
    assert start(StartKind.NEWEST, limit=50, max_scan=20) == {0: 30, 1: 30}
    # Record 10 of partition 1 has timestamp 1021; its batch (of 7) starts at offset 7.
    assert start(StartKind.TIMESTAMP, 1021) == {0: 7, 1: 7}
    assert start(StartKind.TIMESTAMP, 10**12) == {0: 40, 1: 40}


def test_known_bounds_spare_the_lookups_for_newest_only() -> None:
    log = interleaved(2, 40)
    known = {0: (5, 20), 1: (0, 40)}

    def start(kind: StartKind, value: int = 0) -> Any:
        return run(start_offsets(log, TOPIC, [0, 1], Start(kind, value), 10, 10_000, known))

    # Partition 0's (stale) bounds are used as they are; no lookup was needed for it.
    assert start(StartKind.NEWEST) == {0: 10, 1: 30}
    # An explicit offset is clamped to the live log, never to bounds a sample old.
    assert start(StartKind.OFFSET, 30) == {0: 30, 1: 30}


def test_a_timestamp_start_drops_the_earlier_records_of_its_batch() -> None:
    log = interleaved(1, 20)
    positions = run(start_offsets(log, TOPIC, [0], Start(StartKind.TIMESTAMP, 1010), 50, 100))
    page = browse(log, positions, Filters(since_ms=1010))
    assert page.records[0].offset == 10
    assert page.scanned == 13


# Filters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(), True),
        (Filters(key="user-4"), True),
        (Filters(key="USER"), False),
        (Filters(key="USER", ignore_case=True), True),
        (Filters(value='"total": 12'), True),
        (Filters(value="absent"), False),
        (Filters(header="trace"), True),
        (Filters(header="Trace"), False),
        (Filters(header="Trace", ignore_case=True), True),
        (Filters(header="trace=ab"), True),
        (Filters(header="trace=zz"), False),
        (Filters(header="empty="), True),
        (Filters(header="missing"), False),
        (Filters(key="user", value="total", header="trace=abc"), True),
        (Filters(since_ms=2000), False),
        (Filters(since_ms=1000), True),
    ],
)
def test_filters(filters: Filters, expected: bool) -> None:
    subject = record(0, 0, 1000, b"user-42", b'{"total": 12}', (("trace", b"abc"), ("empty", None)))
    assert filters.matches(subject) is expected


def test_a_missing_key_or_value_never_matches_a_substring() -> None:
    subject = record(0, 0, 0, None, None)
    assert not Filters(key="x").matches(subject)
    assert not Filters(value="x").matches(subject)
    assert Filters().matches(subject)


def test_filters_read_invalid_utf8_with_replacement() -> None:
    assert Filters(value="ok").matches(record(0, 0, 0, value=b"\xffok"))


# Cursor -----------------------------------------------------------------------------------


def test_cursor_round_trip_and_bad_cursors() -> None:
    assert decode_cursor(encode_cursor({2: 7, 0: 12})) == {0: 12, 2: 7}
    assert encode_cursor({2: 7, 0: 12}) == "0:12,2:7"
    for bad in ("", "x:1", "0:1,0:2", "0:-1", "1"):
        with pytest.raises(ValueError, match=r"invalid literal|bad cursor entry"):
            decode_cursor(bad)


# Rendering --------------------------------------------------------------------------------


def test_render_text_json_hex_and_auto() -> None:
    document = b'{"b": [1, 2], "a": "\xc3\xa9"}'
    pretty = '{\n  "b": [\n    1,\n    2\n  ],\n  "a": "é"\n}'
    assert render(document, Format.JSON).text == pretty
    assert render(document, Format.JSON).kind == "json"
    assert render(document, Format.AUTO).kind == "json"
    assert render(document, Format.TEXT).text == document.decode()
    assert render(b"\xffab", Format.TEXT).text == "\ufffdab"
    not_json = render(b"plain", Format.JSON)
    assert (not_json.text, not_json.kind, not_json.note) == (
        "plain",
        "text",
        "not JSON: shown as text",
    )
    assert render(b"42", Format.JSON).kind == "json"
    assert render(b"42", Format.AUTO).kind == "text"  # a bare scalar stays as typed
    assert render(b"hello", Format.AUTO) == render(b"hello", Format.TEXT)
    assert render(b"\x00\xff", Format.AUTO).kind == "hex"
    assert render(b"AB", Format.HEX).text == "00000000  41 42  |AB|"
    assert render(None, Format.AUTO).kind == "null"


def test_a_preview_is_one_short_line() -> None:
    shown = render(b'{"a": 1, "b": [2]}', Format.JSON)
    assert shown.long
    assert shown.preview == '{ "a": 1, "b": [ 2 ] }'
    assert not render(b"short", Format.TEXT).long


def test_hex_dump_lines() -> None:
    dump = hex_dump(bytes(range(0x3E, 0x3E + 18)))
    lines = dump.split("\n")
    assert (
        lines[0] == "00000000  3e 3f 40 41 42 43 44 45 46 47 48 49 4a 4b 4c 4d  |>?@ABCDEFGHIJKLM|"
    )
    assert lines[1].startswith("00000010  4e 4f" + " " * 42 + "  |NO|")
    assert lines[1].endswith("|NO|")
    assert hex_dump(b"") == ""
    assert hex_dump(b"\n")[-3:] == "|.|"


def test_render_shows_the_start_of_a_huge_value_with_a_note() -> None:
    shown = render(b"a" * 100_000, Format.AUTO)
    assert len(shown.text) == 65_536
    assert "of 100,000 bytes" in shown.note
    assert shown.long
    assert shown.preview.endswith("…")


# Export -----------------------------------------------------------------------------------

EXPORTED = [
    record(
        1, 7, 1_700_000_000_123, b"k", b'{"a": 1}', (("h", b"v"), ("bin", b"\xff"), ("n", None))
    ),
    record(0, 3, 1_700_000_000_000, None, b"\x00\xff"),
]


def test_export_json() -> None:
    rows = json.loads(export_json(EXPORTED))
    assert rows[0] == {
        "topic": TOPIC,
        "partition": 1,
        "offset": 7,
        "timestamp": "2023-11-14T22:13:20.123Z",
        "timestamp_ms": 1_700_000_000_123,
        "key": "k",
        "key_encoding": "utf-8",
        "value": '{"a": 1}',
        "value_encoding": "utf-8",
        "headers": [
            {"name": "h", "value": "v", "encoding": "utf-8"},
            {"name": "bin", "value": "/w==", "encoding": "base64"},
            {"name": "n", "value": None, "encoding": None},
        ],
    }
    assert (rows[1]["key"], rows[1]["key_encoding"]) == (None, None)
    assert base64.b64decode(rows[1]["value"]) == b"\x00\xff"
    assert rows[1]["value_encoding"] == "base64"


def test_export_csv() -> None:
    table = list(csv.DictReader(io.StringIO(export_csv(EXPORTED))))
    assert len(table) == 2
    assert table[0]["offset"] == "7"
    assert table[0]["value"] == '{"a": 1}'
    assert json.loads(table[0]["headers"])[1] == {
        "name": "bin",
        "value": "/w==",
        "encoding": "base64",
    }
    assert table[1]["key"] == ""
    assert table[1]["value_encoding"] == "base64"
    assert export_csv([]).strip() == (
        "topic,partition,offset,timestamp,timestamp_ms,key,key_encoding,value,value_encoding,headers"
    )


# The form's query -------------------------------------------------------------------------


def topic(partitions: int = 3) -> TopicDescription:
    infos = [
        PartitionInfo(
            partition=p, leader=1, leader_epoch=0, partition_epoch=0, replicas=[1], isr=[1]
        )
        for p in range(partitions)
    ]
    return TopicDescription(
        name=TOPIC,
        topic_id="t",
        partition_count=partitions,
        replication_factor=1,
        configs={},
        partitions=infos,
    )


def test_parse_request_defaults_and_values() -> None:
    query = parse_request({}, topic())
    assert query.partitions == (0, 1, 2)
    assert query.start == Start()
    assert (query.limit, query.fmt, query.cursor) == (50, Format.AUTO, None)
    query = parse_request(
        {
            "partition": "2",
            "start": "timestamp",
            "timestamp": "2023-11-14T22:13:20",
            "key": "k",
            "header": "h=v",
            "ignore_case": "on",
            "format": "hex",
            "limit": "500",
            "cursor": "2:9",
        },
        topic(),
    )
    assert query.partitions == (2,)
    assert query.start == Start(StartKind.TIMESTAMP, 1_700_000_000_000)
    assert query.filters == Filters("k", "h=v", "", True, 1_700_000_000_000)
    assert (query.fmt, query.limit, query.cursor) == (Format.HEX, 500, {2: 9})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"partition": "3"}, "has no partition 3"),
        ({"partition": "x"}, "partition must be a whole number"),
        ({"start": "offset", "offset": "-1"}, "offset must be a whole number at least 0"),
        ({"start": "offset"}, "offset must be"),
        ({"start": "timestamp", "timestamp": "yesterday"}, "timestamp must be a UTC date"),
        ({"limit": "501"}, "page size must be a whole number between 1 and 500"),
        ({"limit": "0"}, "between 1 and 500"),
        ({"format": "xml"}, "format must be one of auto, text, json, hex"),
        ({"start": "oldest"}, "start must be one of"),
        ({"cursor": "zz"}, "malformed"),
        ({"partition": "1", "cursor": "0:5"}, "did not choose"),
    ],
)
def test_parse_request_refuses_bad_input(params: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse_request(params, topic())


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13") == 1_699_999_980_000
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20.123Z") == 1_700_000_000_123


# The produce form -------------------------------------------------------------------------


def test_parse_headers() -> None:
    assert parse_headers("a: 1\n\n b :x:y \nc:") == [("a", b"1"), ("b", b"x:y"), ("c", b"")]
    with pytest.raises(ValueError, match="line 2: the header has no name"):
        parse_headers("a: 1\n: 2")
    with pytest.raises(ValueError, match="line 1: write the header as name: value"):
        parse_headers("novalue")


def test_produce_form_validation() -> None:
    form = ProduceForm(partition="4", headers=": x", value="v" * (MAX_RECORD_BYTES + 1))
    assert form.validate(3) == (4, [])
    assert set(form.errors) == {"partition", "headers", "value"}
    form = ProduceForm(key="k", value="v", headers="h: 1", partition="2")
    assert form.validate(3) == (2, [("h", b"1")])
    assert not form.errors
    assert ProduceForm().validate(1) == (None, [])


# The pages, in process, on a mock public API ---------------------------------------------


def _api(request: httpx.Request) -> httpx.Response:
    """The public API's answers the browse and produce pages need for ``TOPIC``."""
    if request.url.path == f"/api/v1/topics/{TOPIC}":
        return httpx.Response(200, json=topic(1).model_dump(mode="json"))
    if request.url.path.endswith("/offsets"):
        return httpx.Response(200, json={"topic": TOPIC, "partition": 0, "offset": 0})
    if request.url.path.endswith("/records"):
        body = {
            "topic": TOPIC,
            "partition": 0,
            "records": [],
            "next_offset": 0,
            "high_watermark": 0,
            "log_start_offset": 0,
        }
        return httpx.Response(200, json=body)
    return httpx.Response(404, json={"code": "UNKNOWN_TOPIC_OR_PARTITION", "message": "no topic"})


def _client(**settings: Any) -> httpx.AsyncClient:
    """The console in process (no lifespan: the sampler stays off) on the mock API."""
    app = create_app(ConsoleSettings(**settings), transport=httpx.MockTransport(_api))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console")


async def test_export_switched_off_is_refused_and_its_buttons_hidden() -> None:
    async with _client(allow_export=False) as client:
        for suffix in ("json", "csv"):
            refused = await client.get(f"/topics/{TOPIC}/messages/export.{suffix}")
            assert refused.status_code == 403
            assert "message export is switched off" in refused.text
        page = await client.get(f"/topics/{TOPIC}/messages")
    assert page.status_code == 200
    assert "Scanned 0 records" in page.text
    assert "Export JSON" not in page.text


async def test_a_read_only_console_hides_the_produce_form_and_refuses_a_post() -> None:
    async with _client(read_only=True) as client:
        page = await client.get(f"/topics/{TOPIC}/produce")
        assert page.status_code == 200
        assert "read-only" in page.text
        assert "<form" not in page.text.split("<main", 1)[1]
        browser = await client.get(f"/topics/{TOPIC}/messages")
        assert "Produce a message" not in browser.text
        refused = await client.post(f"/topics/{TOPIC}/produce", data={"value": "x"})
        assert refused.status_code == 403


async def test_pages_answer_404_for_an_unknown_topic_and_400_for_bad_input() -> None:
    htmx = {"HX-Request": "true"}
    async with _client() as client:
        assert (await client.get("/topics/absent/messages")).status_code == 404
        bad = await client.get(f"/topics/{TOPIC}/messages?limit=0")
        fragment = await client.get(f"/topics/{TOPIC}/messages/results?partition=1", headers=htmx)
        refused = await client.post(
            f"/topics/{TOPIC}/produce", data={"headers": ": v"}, headers=htmx
        )
    assert bad.status_code == 400
    assert "page size must be a whole number between 1 and 500" in bad.text
    assert 'id="browse-form"' in bad.text  # the form stays, to correct the input
    assert fragment.status_code == 400
    assert "has no partition 1" in fragment.text
    assert "<html" not in fragment.text
    assert refused.status_code == 400
    assert "line 1: the header has no name" in refused.text
    assert 'id="produce-region"' in refused.text
