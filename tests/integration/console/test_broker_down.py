"""A broker that has left, in a real browser: killed with SIGKILL, it stays on the brokers page,
its own page and the overview as down, with when it was last seen. (This module kills a broker
of its own cluster; the other modules' clusters keep theirs.)"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.conftest import ARTIFACTS

pytestmark = pytest.mark.integration


def test_a_killed_broker_is_shown_down_with_when_it_was_last_seen(
    page: Page, console_cluster: LocalCluster
) -> None:
    page.goto("/brokers")
    rows = page.get_by_test_id("brokers-table").locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.get_by_test_id("status").filter(has_text="up")).to_have_count(3)

    console_cluster.kill(2)
    down = page.locator('tr[data-broker="2"]')
    last_seen = down.get_by_test_id("last-seen")
    recent = re.compile(r"^last seen (just now|\d+ s ago)$")
    # The lease (2 s) expires, the controller records when, the sampler (500 ms) shows it: the
    # page has no event for it, so look again until it does.
    for _ in range(60):
        page.reload()
        if last_seen.count() and recent.match(last_seen.inner_text()):
            break
        page.wait_for_timeout(250)
    expect(down.get_by_test_id("status")).to_contain_text("down")
    expect(last_seen).to_have_text(recent)
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    expect(last_seen.locator("time")).to_have_attribute("title", stamp)
    expect(page.get_by_test_id("broker-summary")).to_have_text("3 brokers, 1 down")
    for live in ("0", "1"):
        row = page.locator(f'tr[data-broker="{live}"]')
        expect(row.get_by_test_id("status")).to_have_text("up")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "brokers_one_down.png"), full_page=True)

    down.get_by_role("link", name="2", exact=True).click()
    expect(page).to_have_url(re.compile(r"/brokers/2$"))
    expect(page.get_by_test_id("status")).to_have_text("down")
    expect(page.get_by_test_id("last-seen")).to_contain_text("last seen")

    page.goto("/")
    expect(page.get_by_test_id("broker-count")).to_have_text("2")
    expect(page.get_by_test_id("brokers-down")).to_have_text("1 down")
