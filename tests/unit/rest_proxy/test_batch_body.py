"""The binary form of ``POST …/partitions/{p}/batches``: the checks of ``native.batch_body`` on
their own, then the route in process (proxy app and a real broker app) — served by the fast
lane or by FastAPI, a refused batch writes nothing and is answered with its documented code."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.unit.rest_proxy.inprocess import proxy_and_broker
from yak.api.records import RECORD_BATCH_MEDIA_TYPE
from yak.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    TooManyRecordsError,
    UnsupportedCompressionTypeError,
    UnsupportedMediaTypeError,
    YakError,
)
from yak.metadata.memory_store import MemoryMetadataStore
from yak.record import BatchHeader, CompressionType, RecordInput, encode_batch
from yak.record.batch_header import ATTRIBUTES_OFFSET, CRC_OFFSET, compute_crc
from yak_rest_proxy.api.native.batch_body import check_batch, is_record_batch
from yak_rest_proxy.api.native.fast_lane import FastLane
from yak_rest_proxy.app import create_app
from yak_rest_proxy.settings import ProxySettings

URL = "/api/v1/topics/t/partitions/0/batches"
BINARY = {"content-type": RECORD_BATCH_MEDIA_TYPE}


def batch(
    values: list[bytes],
    *,
    producer_id: int = 7,
    base_sequence: int = 0,
    compression: CompressionType = CompressionType.NONE,
) -> bytes:
    records = [RecordInput(key=b"k", value=v, headers=(("h", b"x"),), timestamp=5) for v in values]
    return encode_batch(
        records,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence if producer_id >= 0 else -1,
        compression=compression,
    )


def check(body: bytes) -> BatchHeader:
    return check_batch(body, topic="t", max_message_bytes=1024 * 1024, max_records=10)


def with_crc(data: bytearray) -> bytes:
    """The batch with its CRC made right again after an edit."""
    struct.pack_into(">I", data, CRC_OFFSET, compute_crc(data, 0, len(data)))
    return bytes(data)


def _id(value: object) -> str | None:
    """Test ids without the bytes of the bodies."""
    return "body" if isinstance(value, bytes) else None


def patched(data: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    edited = bytearray(data)
    struct.pack_into(fmt, edited, offset, value)
    return with_crc(edited) if fix_crc else bytes(edited)


GOOD = batch([b"a", b"b", b"c"])


def test_a_good_batch_passes_with_its_header() -> None:
    header = check(GOOD)
    assert (header.record_count, header.producer_id, header.base_sequence) == (3, 7, 0)
    zstd = batch([b"v" * 100] * 4, compression=CompressionType.ZSTD)
    assert check(zstd).record_count == 4


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        (GOOD[:60], CorruptRecordError, "60 bytes; a record batch header alone takes 61"),
        (GOOD[:-1], CorruptRecordError, "but the body holds"),
        (GOOD + GOOD, CorruptRecordError, "send exactly one record batch"),
        (patched(GOOD, 16, ">b", 1), CorruptRecordError, "magic 1"),
        (patched(GOOD, 8, ">i", 1), CorruptRecordError, "batchLength 1"),
        (patched(GOOD, 17, ">I", 12345, fix_crc=False), CorruptRecordError, "CRC-32C mismatch"),
        (GOOD[:-1] + b"\xff", CorruptRecordError, "CRC-32C mismatch"),  # a flipped byte
        (batch([b"x"] * 11), TooManyRecordsError, "11 records"),
        (batch([b"x" * 600_000] * 2), MessageTooLargeError, "max.message.bytes"),
        (batch([b"a"], producer_id=-1), InvalidRecordError, "not idempotent"),
        (patched(GOOD, 57, ">i", 0), InvalidRecordError, "holds 0 records"),
        (patched(GOOD, 23, ">i", 5), InvalidRecordError, "lastOffsetDelta is 5"),
        (patched(GOOD, ATTRIBUTES_OFFSET, ">h", 0x10), InvalidRecordError, "attributes 0x0010"),
        (patched(GOOD, ATTRIBUTES_OFFSET, ">h", 0x08), InvalidRecordError, "CreateTime"),
        (patched(GOOD, ATTRIBUTES_OFFSET, ">h", 5), UnsupportedCompressionTypeError, "codec 5"),
        (patched(GOOD, 53, ">i", -1), InvalidRecordError, "base sequence -1"),
        # Framing and CRC right, the records not: the first record's length overruns.
        (patched(GOOD, 61, ">b", 0x7E), CorruptRecordError, "overruns the batch"),
    ],
    ids=_id,
)  # fmt: skip
def test_bad_batches_are_refused_with_a_precise_error(
    body: bytes, error: type[YakError], words: str
) -> None:
    with pytest.raises(error, match=words):
        check(body)


@pytest.mark.parametrize(
    ("content_type", "binary"),
    [
        (RECORD_BATCH_MEDIA_TYPE, True),
        ("Application/VND.yak.recordbatch.v2; charset=binary", True),
        ("application/json", False),
        (None, False),
        ("text/plain", False),  # as before the binary form: parsed as JSON
    ],
)
def test_the_content_type_chooses_the_form(content_type: str | None, binary: bool) -> None:
    assert is_record_batch(content_type) is binary


@pytest.mark.parametrize(
    "content_type", ["application/vnd.yak.recordbatch.v3", "application/octet-stream"]
)
def test_other_binary_types_are_unsupported(content_type: str) -> None:
    with pytest.raises(UnsupportedMediaTypeError, match=RECORD_BATCH_MEDIA_TYPE):
        is_record_batch(content_type)


# --- the route, in process -----------------------------------------------------------------


@dataclass
class Proxy:
    client: httpx.AsyncClient
    app: FastAPI

    def lane(self) -> FastLane:
        node = getattr(self.app, "front", None)  # ProxyApp: the fast lane is in front
        while node is not None and not isinstance(node, FastLane):
            node = getattr(node, "app", None) or getattr(node, "_app", None)
        assert isinstance(node, FastLane)
        return node

    async def values(self) -> list[str]:
        read = await self.client.get(
            "/api/v1/topics/t/partitions/0/records",
            params={"offset": 0, "value_encoding": "string"},
        )
        assert read.status_code == 200, read.text
        return [r["value"] for r in read.json()["records"]]


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    async with proxy_and_broker(tmp_path, ProxySettings(max_records_per_request=10)) as (c, app):
        yield Proxy(c, app)


async def test_a_binary_batch_is_written_once_and_read_back(proxy: Proxy) -> None:
    first = await proxy.client.post(URL, content=GOOD, headers=BINARY)
    assert first.status_code == 200, first.text
    assert first.json() == {"partition": 0, "base_offset": 0, "offsets": [0, 1, 2]}
    again = await proxy.client.post(URL, content=GOOD, headers=BINARY, params={"acks": "all"})
    assert again.json()["offsets"] == [0, 1, 2]  # the broker knew the batch: no copy
    following = batch([b"d"], base_sequence=3)
    after = await proxy.client.post(URL, content=following, headers=BINARY)
    assert after.json()["offsets"] == [3]
    assert proxy.lane().served == 3
    read = await proxy.client.get(
        "/api/v1/topics/t/partitions/0/records",
        params={"offset": 0, "value_encoding": "string", "header_encoding": "string"},
    )
    records = read.json()["records"]
    assert [r["value"] for r in records] == ["a", "b", "c", "d"]
    assert records[0]["key"] == "k"
    assert records[0]["headers"] == [{"key": "h", "value": "x"}]
    assert records[0]["timestamp"] == 5


async def test_a_sequence_gap_is_the_brokers_conflict(proxy: Proxy) -> None:
    assert (await proxy.client.post(URL, content=GOOD, headers=BINARY)).status_code == 200
    gap = await proxy.client.post(URL, content=batch([b"z"], base_sequence=9), headers=BINARY)
    assert (gap.status_code, gap.json()["code"]) == (409, "OUT_OF_ORDER_SEQUENCE_NUMBER")


@pytest.mark.parametrize(
    ("url", "params", "body", "headers", "status", "code", "lane"),
    [
        (URL, {}, patched(GOOD, 17, ">I", 1, fix_crc=False), BINARY, 400, "CORRUPT_MESSAGE", True),
        (URL, {}, patched(GOOD, 16, ">b", 0), BINARY, 400, "CORRUPT_MESSAGE", True),
        (URL, {}, GOOD[:40], BINARY, 400, "CORRUPT_MESSAGE", True),
        (URL, {}, GOOD + b"\0", BINARY, 400, "CORRUPT_MESSAGE", True),
        (URL, {}, batch([b"x"] * 11), BINARY, 413, "TOO_MANY_RECORDS", True),
        (URL, {}, batch([b"x" * 600_000] * 2), BINARY, 413, "MESSAGE_TOO_LARGE", True),
        (URL, {}, batch([b"x"], producer_id=-1), BINARY, 400, "INVALID_RECORD", True),
        ("/api/v1/topics/nope/partitions/0/batches", {}, GOOD, BINARY, 404,
         "UNKNOWN_TOPIC_OR_PARTITION", True),
        ("/api/v1/topics/t/partitions/1/batches", {}, GOOD, BINARY, 404,
         "UNKNOWN_TOPIC_OR_PARTITION", True),
        # Not the lane's: FastAPI answers as the documented route does.
        (URL, {"acks": "0"}, GOOD, BINARY, 400, "INVALID_REQUEST", False),
        (URL, {}, GOOD, {"content-type": "application/octet-stream"}, 415,
         "UNSUPPORTED_MEDIA_TYPE", False),
        (URL, {}, GOOD, {"content-type": "application/vnd.yak.recordbatch.v1"}, 415,
         "UNSUPPORTED_MEDIA_TYPE", False),
        (URL, {}, GOOD, {"content-type": "application/json"}, 400, "INVALID_REQUEST", False),
    ],
    ids=_id,
)  # fmt: skip
async def test_a_refused_batch_writes_nothing(
    proxy: Proxy,
    url: str,
    params: dict[str, str],
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
    lane: bool,
) -> None:
    answer = await proxy.client.post(url, params=params, content=body, headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (status, code), answer.text
    assert answer.json()["message"]
    assert proxy.lane().served == (1 if lane else 0)
    assert await proxy.values() == []


async def test_the_json_form_is_unchanged(proxy: Proxy) -> None:
    body = {
        "producer_id": 7,
        "producer_epoch": 0,
        "base_sequence": 0,
        "records": [{"value": "a"}, {"value": "b"}],
        "value_encoding": "string",
    }
    answer = await proxy.client.post(URL, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["offsets"] == [0, 1]
    assert proxy.lane().served == 0  # JSON batches take the FastAPI route
    # The next batch of the same producer may come in the binary form.
    binary = await proxy.client.post(URL, content=batch([b"c"], base_sequence=2), headers=BINARY)
    assert binary.json()["offsets"] == [2]
    assert await proxy.values() == ["a", "b", "c"]


def test_the_openapi_document_names_both_forms() -> None:
    app = create_app(ProxySettings(), store=MemoryMetadataStore())
    operation = app.openapi()["paths"]["/api/v1/topics/{topic}/partitions/{partition}/batches"]
    content = operation["post"]["requestBody"]["content"]
    assert set(content) == {"application/json", RECORD_BATCH_MEDIA_TYPE}
    assert content[RECORD_BATCH_MEDIA_TYPE]["schema"]["format"] == "binary"
