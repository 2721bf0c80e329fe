"""The broker pages in a real browser: every broker with its status, partitions led and
followed, disk usage and its load sample; one broker's replicas; an unknown broker."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.conftest import ARTIFACTS, unique
from yak.sdk import Admin

pytestmark = pytest.mark.integration


def _counts(page: Page) -> list[tuple[int, int]]:
    rows = page.get_by_test_id("brokers-table").locator("tbody tr")
    return [
        (
            int(row.get_by_test_id("led").inner_text()),
            int(row.get_by_test_id("followed").inner_text()),
        )
        for row in rows.all()
    ]


def test_brokers_show_led_and_followed_partitions_and_disk(
    page: Page, console_cluster: LocalCluster
) -> None:
    topic = unique("ui-brokers")
    with Admin(console_cluster.proxy_url(0)) as admin:
        admin.create_topic(topic, partitions=3, replication_factor=3)
    page.goto("/brokers")
    rows = page.get_by_test_id("brokers-table").locator("tbody tr")
    expect(rows).to_have_count(3)
    # The page shows the sampler's picture (every 500 ms): wait for the new topic in it.
    deadline = time.monotonic() + 20
    while sum(led for led, _ in _counts(page)) < 3 or any(f < 2 for _, f in _counts(page)):
        assert time.monotonic() < deadline, f"led/followed never showed the topic: {_counts(page)}"
        page.wait_for_timeout(250)  # the sampler's next look; the page has no event for it
        page.reload()
    for index in range(3):
        row = rows.nth(index)
        expect(row.get_by_test_id("status")).to_have_text("up")
        expect(row.get_by_test_id("disk")).to_contain_text(re.compile(r"free of .* used"))
        expect(row.locator("meter")).to_have_attribute("aria-label", re.compile("Disk used"))
    # Each broker publishes its load every 5 s (its first sample one interval after it started).
    while rows.locator('[data-testid="load-cpu"]').count() < 3:
        assert time.monotonic() < deadline + 15, "a broker's load sample never showed"
        page.wait_for_timeout(500)  # the next sample; the page has no event for it
        page.reload()
    for index in range(3):
        row = rows.nth(index)
        expect(row.get_by_test_id("load-cpu")).to_have_text(re.compile(r"^\d+\.\d\d$"))
        expect(row.get_by_test_id("load-memory")).to_contain_text("MiB")
        expect(row.get_by_test_id("load-disk")).to_have_text(re.compile(r"^\d+%$"))
        expect(row.get_by_test_id("load-rate")).to_have_text(re.compile(r"^[\d,]+$"))
        expect(row.get_by_test_id("load-age")).to_contain_text(re.compile(r"ago|now"))

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "brokers_list.png"), full_page=True)

    page.get_by_role("link", name="0", exact=True).click()
    expect(page).to_have_url(re.compile(r"/brokers/0$"))
    replicas = page.locator(f'[data-testid="replicas-table"] tr[data-replica^="{topic}-"]')
    expect(replicas).to_have_count(3)  # replication factor 3 on 3 brokers: every partition
    expect(replicas.filter(has_text="in sync")).to_have_count(3)
    roles = replicas.locator(".badge").filter(has_text=re.compile(r"^(leader|follower)$"))
    expect(roles).to_have_count(3)


def test_an_unknown_broker_is_a_404(console_cluster: LocalCluster) -> None:
    with httpx.Client(base_url=console_cluster.console_url) as client:
        answer = client.get("/brokers/99")
    assert answer.status_code == 404
    assert "broker 99 is not registered" in answer.text
