"""The topic pages in a real browser: create through the form (and a refused name), search,
edit retention.ms, delete with a typed confirmation, and the list at phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.conftest import ARTIFACTS, unique
from yak.sdk import Admin

pytestmark = pytest.mark.integration


def _topics(console_cluster: LocalCluster) -> set[str]:
    with Admin(console_cluster.proxy_url(0)) as admin:
        return {t.name for t in admin.list_topics().topics}


def _create(console_cluster: LocalCluster, *names: str, partitions: int = 1) -> None:
    with Admin(console_cluster.proxy_url(0)) as admin:
        for name in names:
            admin.create_topic(name, partitions=partitions, replication_factor=1)


def test_create_a_topic_through_the_form(page: Page, console_cluster: LocalCluster) -> None:
    name = unique("ui-created")
    page.goto("/topics")
    page.get_by_role("link", name="New topic").click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Partitions").fill("3")
    page.get_by_label("Replication factor").fill("3")
    page.get_by_label("retention.ms (optional)").fill("3600000")
    page.get_by_role("button", name="Create topic").click()

    expect(page).to_have_url(re.compile(rf"/topics/{name}$"))
    expect(page.get_by_test_id("topic-name")).to_have_text(name)
    expect(page.get_by_test_id("partition-count")).to_have_text("3")
    expect(page.get_by_test_id("retention")).to_have_text("1 h")
    partitions = page.get_by_test_id("partitions-table").locator("tbody tr")
    expect(partitions).to_have_count(3)
    for index in range(3):
        expect(partitions.nth(index).get_by_test_id("leader")).to_have_text(re.compile(r"^\d+$"))
    expect(page.locator('[data-chart="topic-rates"] canvas')).to_have_count(1)
    expect(page.get_by_role("link", name="Browse messages")).to_have_attribute(
        "href", f"/topics/{name}/messages"
    )

    page.get_by_role("link", name="Topics", exact=True).first.click()
    row = page.locator(f'tr[data-topic="{name}"]')
    expect(row).to_contain_text("1 h")
    assert name in _topics(console_cluster)


@pytest.mark.expects_http_errors
def test_a_bad_name_is_refused_on_its_field(page: Page, console_cluster: LocalCluster) -> None:
    before = _topics(console_cluster)
    page.goto("/topics/new")
    page.get_by_label("Name", exact=True).fill("no spaces allowed!")
    page.get_by_label("Partitions").fill("0")
    page.get_by_role("button", name="Create topic").click()

    name_field = page.get_by_label("Name", exact=True)
    expect(page.get_by_test_id("error-name")).to_contain_text("illegal characters")
    expect(name_field).to_have_attribute("aria-invalid", "true")
    expect(name_field).to_have_value("no spaces allowed!")  # what was typed stays
    expect(page.get_by_test_id("error-partitions")).to_contain_text("between 1 and")
    assert _topics(console_cluster) == before


@pytest.mark.expects_http_errors
def test_an_existing_name_is_refused(page: Page, console_cluster: LocalCluster) -> None:
    name = unique("ui-taken")
    _create(console_cluster, name)
    page.goto("/topics/new")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Partitions").fill("1")
    page.get_by_label("Replication factor").fill("1")
    page.get_by_role("button", name="Create topic").click()
    expect(page.get_by_test_id("error-name")).to_contain_text("already exists")


def test_search_filters_the_list(page: Page, console_cluster: LocalCluster) -> None:
    prefix = unique("ui-search")
    alpha, beta = f"{prefix}-alpha", f"{prefix}-beta"
    _create(console_cluster, alpha, beta)
    page.goto("/topics")
    expect(page.locator(f'tr[data-topic="{alpha}"]')).to_be_visible()
    expect(page.locator(f'tr[data-topic="{beta}"]')).to_be_visible()

    page.get_by_label("Search by name").fill(f"{prefix}-ALP")  # htmx, while typing
    expect(page.locator(f'tr[data-topic="{beta}"]')).to_have_count(0)
    expect(page.locator(f'tr[data-topic="{alpha}"]')).to_be_visible()
    expect(page.get_by_test_id("topic-summary")).to_contain_text("1 of")
    expect(page).to_have_url(re.compile(r"[?&]q="))

    page.goto(f"/topics?q={prefix}-bet")  # the same filter without JavaScript
    expect(page.get_by_label("Search by name")).to_have_value(f"{prefix}-bet")
    expect(page.locator("tbody tr[data-topic]")).to_have_count(1)
    expect(page.locator(f'tr[data-topic="{beta}"]')).to_be_visible()


@pytest.mark.expects_http_errors
def test_edit_retention(page: Page, console_cluster: LocalCluster) -> None:
    name = unique("ui-retention")
    _create(console_cluster, name)
    page.goto(f"/topics/{name}")
    page.get_by_role("link", name="Edit configs").click()
    retention = page.get_by_label("retention.ms", exact=True)
    retention.fill("soon")
    page.get_by_role("button", name="Save configs").click()
    expect(page.get_by_test_id("error-retention.ms")).to_contain_text("not an integer")
    expect(page.get_by_label("retention.ms", exact=True)).to_have_attribute("aria-invalid", "true")

    page.get_by_label("retention.ms", exact=True).fill("7200000")
    page.get_by_role("button", name="Save configs").click()
    expect(page).to_have_url(re.compile(rf"/topics/{name}\?saved=true$"))
    expect(page.get_by_test_id("saved-notice")).to_be_visible()
    expect(page.get_by_test_id("retention")).to_have_text("2 h")
    with Admin(console_cluster.proxy_url(0)) as admin:
        assert admin.describe_topic(name).configs.get("retention.ms") == "7200000"

    # Emptying the field returns the config to its default.
    page.get_by_role("link", name="Edit configs").click()
    expect(page.get_by_label("retention.ms", exact=True)).to_have_value("7200000")
    page.get_by_label("retention.ms", exact=True).fill("")
    page.get_by_role("button", name="Save configs").click()
    expect(page.get_by_test_id("retention")).to_have_text("7 d")


@pytest.mark.expects_http_errors
def test_delete_with_confirmation(page: Page, console_cluster: LocalCluster) -> None:
    name = unique("ui-doomed")
    _create(console_cluster, name)
    page.goto(f"/topics/{name}")
    page.get_by_role("link", name="Delete", exact=True).click()
    confirm = page.get_by_label(re.compile("to confirm"))
    confirm.fill(name[:-1])  # not quite its name
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_test_id("error-confirm")).to_be_visible()
    assert name in _topics(console_cluster)

    page.get_by_label(re.compile("to confirm")).fill(name)
    page.get_by_role("button", name="Delete topic").click()
    expect(page).to_have_url(re.compile(r"/topics\?deleted="))
    expect(page.get_by_test_id("deleted-notice")).to_contain_text(name)
    expect(page.locator(f'tr[data-topic="{name}"]')).to_have_count(0)
    assert name not in _topics(console_cluster)


def test_topic_list_at_phone_width(page: Page, console_cluster: LocalCluster) -> None:
    _create(console_cluster, unique("ui-phone"), partitions=2)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/topics")
    expect(page.get_by_test_id("topics-table")).to_be_visible()
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"/topics scrolls sideways by {overflow} px at 390 px"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "topics_list_phone_390.png"), full_page=True)
