"""The under-replicated banner, live: kill -9 a broker holding replicas and the open page
shows the banner without a reload (SSE); restart it and the banner goes away again. Its own
module, so its own cluster: a killed broker must not disturb other tests."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.conftest import unique
from yak.sdk import Admin

pytestmark = pytest.mark.integration

#: The broker's lease (2 s) must lapse before its replicas leave the ISR, and a restarted
#: broker must catch up before it rejoins: generous on a loaded machine.
LIVE_MS = 60_000
VICTIM = 2


def _same_document(page: Page) -> bool:
    return bool(page.evaluate("window.__notReloaded === true"))


def test_banner_follows_a_killed_and_restarted_broker(
    page: Page, console_cluster: LocalCluster
) -> None:
    topic = unique("ui-urp")
    with Admin(console_cluster.proxy_url(0)) as admin:
        admin.create_topic(topic, partitions=3, replication_factor=3)
    banner = page.get_by_test_id("banner-under-replicated")
    page.goto("/topics")
    expect(page.locator(f'tr[data-topic="{topic}"]')).to_be_visible()
    expect(banner).to_have_count(0, timeout=LIVE_MS)
    page.evaluate("window.__notReloaded = true")

    console_cluster.kill(VICTIM)
    expect(banner).to_be_visible(timeout=LIVE_MS)
    expect(banner).to_contain_text("under-replicated")
    assert _same_document(page), "the banner came with a reload, not over the event stream"

    # The banner's link lists the topics concerned, asked afresh.
    banner.get_by_role("link", name="Show").click()
    expect(page).to_have_url(re.compile(r"/topics\?health=under-replicated$"))
    row = page.locator(f'tr[data-topic="{topic}"]')
    expect(row).to_contain_text("3 under-replicated")
    page.get_by_role("link", name=topic).click()
    out_of_sync = page.get_by_test_id("partitions-table").get_by_text(f"{VICTIM} out of sync")
    expect(out_of_sync).to_have_count(3)

    page.evaluate("window.__notReloaded = true")
    console_cluster.start_broker(VICTIM)
    expect(banner).to_have_count(0, timeout=LIVE_MS)
    assert _same_document(page), "the banner went with a reload, not over the event stream"
