"""The ``filter`` option of the ``yak`` source: checked when the query is defined (a bad one
names the option and where the parser stopped), sent with every read of a range, and the
range's offset follows the proxy's ``next_offset`` past pages the filter left empty."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from yak.spark import client as client_module
from yak.spark.offsets import OffsetRange
from yak.spark.options import OptionError, parse_read_options
from yak.spark.reader import read_range

URL = "http://127.0.0.1:9430"
TEXT = 'value.kind == "refund"'


def test_the_filter_is_kept_and_checked() -> None:
    options = parse_read_options({"url": URL, "subscribe": "t", "FILTER": TEXT}, streaming=True)
    assert options.filter == TEXT
    assert parse_read_options({"url": URL, "subscribe": "t"}, streaming=False).filter is None
    with pytest.raises(OptionError, match=r"'filter'.*line 1, column 11"):
        parse_read_options({"url": URL, "subscribe": "t", "filter": "value.a =="}, streaming=False)


class Proxy:
    """Partition t-0 holds offsets 0-11; a page scans 4 offsets and keeps only 6 and 7."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        self.asked.append(params)
        offset = int(params["offset"])
        scanned = range(offset, min(12, offset + 4))
        kept = [o for o in scanned if o in (6, 7)] if "filter" in params else list(scanned)
        records: list[dict[str, Any]] = [
            {"topic": "t", "partition": 0, "offset": o, "timestamp": 1, "key": None,
             "value": base64.b64encode(b"v%d" % o).decode(), "headers": []}
            for o in kept
        ]  # fmt: skip
        body = {"topic": "t", "partition": 0, "records": records,
                "next_offset": scanned.stop if scanned else offset,
                "high_watermark": 12, "log_start_offset": 0}  # fmt: skip
        return httpx.Response(200, json=body)


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Proxy:
    fake = Proxy()
    real = client_module.YakHttp

    def with_fake(urls: Any, **options: Any) -> Any:
        return real(urls, **options, transport=httpx.MockTransport(fake.handle))

    monkeypatch.setattr("yak.spark.reader.YakHttp", with_fake)
    return fake


def test_a_filtered_range_sends_the_filter_and_passes_empty_pages(proxy: Proxy) -> None:
    options = parse_read_options({"url": URL, "subscribe": "t", "filter": TEXT}, streaming=False)
    batches = list(read_range(OffsetRange("t", 0, 0, 12), options, 0))
    offsets = [o for batch in batches for o in batch.column("offset").to_pylist()]
    assert offsets == [6, 7]
    assert [a["offset"] for a in proxy.asked] == ["0", "4", "8"]  # every page, empty or not
    assert {a.get("filter") for a in proxy.asked} == {TEXT}
