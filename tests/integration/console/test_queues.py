"""The queue pages in a real browser: a share group's page shows its acquired and acknowledged
counts after a member acquired records and acknowledged some of them, live, and the list
links to it; the leader's ``/metrics`` has the group's gauges and counters."""

from __future__ import annotations

import time

import httpx
import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.conftest import unique
from yak.sdk import Admin, Producer, ShareConsumer, ShareRecord

pytestmark = pytest.mark.integration

#: The live part follows the sampler's events (every 500 ms here); a loaded machine gets slack.
LIVE_MS = 20_000


def _acquire(consumer: ShareConsumer, count: int) -> list[ShareRecord]:
    held: list[ShareRecord] = []
    deadline = time.monotonic() + 30
    while len(held) < count:
        assert time.monotonic() < deadline, f"acquired {len(held)} of {count} records"
        held += consumer.acquire(timeout_ms=1_000, max_records=count - len(held))
    return held


def test_a_queue_shows_acquired_and_acknowledged_records(
    page: Page, console_cluster: LocalCluster
) -> None:
    url = console_cluster.proxy_url(0)
    topic, group = unique("jobs"), unique("workers")
    with Admin(url) as admin:
        admin.create_topic(topic, partitions=1)
        admin.create_share_group(group, offset_reset="earliest")
    with Producer(url) as producer:
        for i in range(5):
            producer.send_and_wait(topic, f"job-{i}".encode())
    page.goto("/queues")
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()
    page.locator(f'tr[data-queue="{group}"] a').click()
    expect(page.get_by_role("heading", name=f"Queue {group}")).to_be_visible()
    consumer = ShareConsumer(url, group, topic)
    try:
        held = _acquire(consumer, 5)
        for record in held[:3]:
            record.ack()
        assert consumer.flush() == []
        # The open page follows without a reload.
        expect(page.get_by_test_id("queue-acquired")).to_have_text("2", timeout=LIVE_MS)
        expect(page.get_by_test_id("queue-acknowledged")).to_have_text("3")
        row = page.locator(f'[data-testid="queue-partitions"] tr[data-partition="{topic}-0"]')
        expect(row.get_by_test_id("partition-acquired")).to_have_text("2")
        expect(row.get_by_test_id("start-offset")).to_have_text("3")
        expect(row).to_contain_text(consumer.member_id or "")
        expect(page.get_by_test_id("queue-oldest").locator("time")).to_have_count(1)
        # The leader's /metrics has the same figures as the group's gauges and counters.
        leader = int(row.locator("td").nth(1).inner_text())
        metrics = httpx.get(f"{console_cluster.broker_url(leader)}/metrics", timeout=10).text
        assert f'yak_share_records_held{{group="{group}"}} 2.0' in metrics
        assert f'yak_share_records_in_flight{{group="{group}"}} 2.0' in metrics
        assert f'yak_share_oldest_unacked_age_seconds{{group="{group}"}}' in metrics
        labels = f'group="{group}",topic="{topic}"'
        assert f'yak_share_records_acknowledged_total{{{labels},type="accept"}} 3.0' in metrics
    finally:
        consumer.close()
