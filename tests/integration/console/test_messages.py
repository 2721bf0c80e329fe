"""The message browser and the produce page in a real browser: produce a record in the UI and
find it by key, value filters, starts from an offset and a timestamp, paging, JSON export,
hex, bad input, phone width."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.conftest import unique
from yak.sdk import Admin, Producer

pytestmark = pytest.mark.integration


def _topic(url: str, partitions: int = 3) -> str:
    name = unique("msgs")
    with Admin(url) as admin:
        admin.create_topic(name, partitions=partitions, replication_factor=3)
    return name


def _rows(page: Page) -> Locator:
    return page.locator('[data-testid="messages"] tbody tr')


def _positions(page: Page) -> list[tuple[int, int]]:
    pairs: list[list[str]] = _rows(page).evaluate_all(
        "rows => rows.map(r => [r.dataset.partition, r.dataset.offset])"
    )
    return [(int(p), int(o)) for p, o in pairs]


def _browse(page: Page) -> None:
    """Submit the form (htmx) and wait for the answer to replace the results."""
    marker = page.locator("#browse-results > *").first.element_handle()
    page.get_by_role("button", name="Browse").click()
    page.wait_for_function("el => !el.isConnected", arg=marker)


def test_produce_in_the_ui_then_find_it_by_key(page: Page, console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic = _topic(url)
    with Producer(url) as producer:  # other records around it, two of them on partition 2
        for i in range(6):
            producer.send_and_wait(topic, b"{}", key=f"other-{i}".encode(), partition=i % 3)

    page.goto(f"/topics/{topic}/produce")
    page.get_by_label("Key").fill("order-7")
    page.get_by_label("Value", exact=True).fill('{"id": 7, "total": 12.5, "items": ["a"]}')
    page.get_by_label("Headers").fill("trace-id: abc123")
    page.get_by_label("Partition").select_option("2")
    page.get_by_role("button", name="Produce").click()
    expect(page.get_by_test_id("produced-partition")).to_have_text("2")
    expect(page.get_by_test_id("produced-offset")).to_have_text("2")
    page.get_by_role("link", name="See it in the message browser").click()
    expect(_rows(page)).to_have_count(1)  # the link starts at the record itself

    page.goto(f"/topics/{topic}/messages")
    expect(_rows(page)).to_have_count(7)  # newest, all partitions
    page.get_by_label("Key contains").fill("order-7")
    _browse(page)
    expect(_rows(page)).to_have_count(1)
    assert _positions(page) == [(2, 2)]
    row = _rows(page).first
    expect(row.locator(".browse-headers")).to_contain_text("trace-id: abc123")
    expect(page.get_by_test_id("browse-summary")).to_contain_text("Scanned 7 records, 1 match")
    row.locator(".browse-value summary").click()
    pretty = json.dumps({"id": 7, "total": 12.5, "items": ["a"]}, indent=2)
    expect(row.locator(".browse-value pre.browse-json")).to_be_visible()
    assert row.locator(".browse-value pre.browse-json").text_content() == pretty


def _produce_timed(url: str, topic: str, count: int, first_ms: int) -> None:
    with Producer(url) as producer:
        for i in range(count):
            colour = "red" if i % 3 == 0 else "blue"
            value = f"payload {i:02d} {colour}".encode()
            producer.send(
                topic, value, key=f"k{i}".encode(), partition=0, timestamp=first_ms + i * 1000
            )
        producer.flush()


def test_value_filter_and_starts_from_offset_and_timestamp(
    page: Page, console_cluster: LocalCluster
) -> None:
    url = console_cluster.proxy_url(0)
    topic = _topic(url, partitions=1)
    first_ms = (int(time.time()) - 3600) * 1000
    _produce_timed(url, topic, 30, first_ms)

    page.goto(f"/topics/{topic}/messages")
    page.get_by_label("Value contains").fill("red")
    _browse(page)
    assert [o for _, o in _positions(page)] == list(range(0, 30, 3))

    # Without JavaScript the same form is a full-page GET.
    page.goto(f"/topics/{topic}/messages?partition=0&start=offset&offset=25")
    expect(page.get_by_label("Start from")).to_have_value("offset")
    assert [o for _, o in _positions(page)] == [25, 26, 27, 28, 29]

    start = dt.datetime.fromtimestamp(first_ms / 1000 + 20, tz=dt.UTC)
    page.get_by_label("Start from").select_option("timestamp")
    page.get_by_label("Timestamp (UTC)").fill(start.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_label("Value contains").fill("")
    _browse(page)
    assert [o for _, o in _positions(page)] == list(range(20, 30))
    first_time = _rows(page).first.locator(".browse-time")
    expect(first_time).to_have_text(start.isoformat(timespec="milliseconds").replace("+00:00", "Z"))


def test_paging_repeats_and_skips_nothing(page: Page, console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic = _topic(url)
    with Producer(url) as producer:
        for i in range(120):
            producer.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 3)
        producer.flush()

    page.goto(f"/topics/{topic}/messages")
    page.get_by_label("Start from").select_option("offset")
    page.get_by_label("Offset").fill("0")
    _browse(page)
    seen = _positions(page)
    assert len(seen) == 50
    for expected in (50, 20):
        marker = _rows(page).first.element_handle()
        page.get_by_role("link", name="Next page").click()
        page.wait_for_function("el => !el.isConnected", arg=marker)
        page_positions = _positions(page)
        assert len(page_positions) == expected
        seen += page_positions
    expect(page.get_by_test_id("browse-summary")).to_contain_text("Reached the end")
    assert sorted(seen) == sorted((p, o) for p in range(3) for o in range(40))


def test_json_export_of_the_visible_page(
    page: Page, console_cluster: LocalCluster, tmp_path: Path
) -> None:
    url = console_cluster.proxy_url(0)
    topic = _topic(url, partitions=1)
    with Producer(url) as producer:
        for i in range(12):
            headers = [("n", str(i).encode())]
            producer.send(topic, f'{{"n": {i}}}'.encode(), key=f"k{i}".encode(), headers=headers)
        producer.flush()

    page.goto(f"/topics/{topic}/messages?start=offset&offset=2&limit=5")
    assert [o for _, o in _positions(page)] == [2, 3, 4, 5, 6]
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export JSON").click()
    download = download_info.value
    assert download.suggested_filename.endswith(".json")
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    rows = json.loads(target.read_text(encoding="utf-8"))
    assert [r["offset"] for r in rows] == [2, 3, 4, 5, 6]
    assert rows[0]["key"] == "k2"
    assert rows[0]["value"] == '{"n": 2}'
    assert rows[0]["headers"] == [{"name": "n", "value": "2", "encoding": "utf-8"}]
    assert rows[0]["timestamp"].endswith("Z")
    assert isinstance(rows[0]["timestamp_ms"], int)


def test_hex_format_shows_hex(page: Page, console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic = _topic(url, partitions=1)
    with Producer(url) as producer:
        producer.send_and_wait(topic, b"\x00\x01hi", key=b"bin")

    page.goto(f"/topics/{topic}/messages")
    expect(_rows(page)).to_have_count(1)
    page.get_by_label("Show as").select_option("hex")
    _browse(page)
    value = _rows(page).first.locator(".browse-value pre.browse-hex")
    expect(value).to_have_text("00000000  00 01 68 69  |..hi|")
    expect(_rows(page).first.locator(".browse-key pre.browse-hex")).to_contain_text("62 69 6e")


def test_bad_input_is_400_and_an_unknown_topic_404(console_cluster: LocalCluster) -> None:
    topic = _topic(console_cluster.proxy_url(0))
    base = f"/topics/{topic}/messages"
    with httpx.Client(base_url=console_cluster.console_url, timeout=30) as client:
        for query, message in (
            ("partition=9", "has no partition 9"),
            ("start=offset&offset=-1", "offset must be a whole number at least 0"),
            ("start=timestamp&timestamp=soon", "timestamp must be a UTC date"),
            ("limit=501", "page size must be a whole number between 1 and 500"),
        ):
            for path in (base, f"{base}/results", f"{base}/export.csv"):
                answer = client.get(f"{path}?{query}")
                assert answer.status_code == 400, (path, query)
                assert message in answer.text, (path, query)
        assert client.get(f"/topics/{unique('absent')}/messages").status_code == 404
        assert client.get(f"/topics/{unique('absent')}/produce").status_code == 404
        refused = client.post(f"/topics/{topic}/produce", data={"partition": "7", "value": "x"})
        assert refused.status_code == 400
        assert "choose automatic or a partition from 0 to 2" in refused.text
        bad_header = client.post(f"/topics/{topic}/produce", data={"headers": "no colon"})
        assert bad_header.status_code == 400
        assert "line 1: write the header as name: value" in bad_header.text
        csv_export = client.get(f"{base}/export.csv")
        assert csv_export.status_code == 200
        assert csv_export.headers["content-disposition"].startswith("attachment;")
        assert csv_export.text.startswith("topic,partition,offset,timestamp,timestamp_ms,key")


def test_pages_fit_a_phone(page: Page, console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic = _topic(url, partitions=1)
    with Producer(url) as producer:
        producer.send_and_wait(topic, json.dumps({"text": "long " * 200}).encode(), key=b"k")
    page.set_viewport_size({"width": 390, "height": 844})
    for path in (f"/topics/{topic}/produce", f"/topics/{topic}/messages"):
        page.goto(path)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} scrolls sideways by {overflow} px at 390 px"
