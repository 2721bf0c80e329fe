"""The layout every page shares: overview (its throughput chart drawn as sampled), dark mode,
phone width, keyboard, favicon; the Schemas page reached from the navigation (subjects,
versions, a diff between two) against the schema registry beside the cluster."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.charts import series_pixels, serve_history, wait_for_chart
from tests.integration.console.conftest import schema_registry_url, unique

pytestmark = pytest.mark.integration


def test_overview_shows_the_cluster(page: Page, console_cluster: LocalCluster) -> None:
    page.goto("/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_test_id("broker-count")).to_have_text("3")
    expect(page.get_by_test_id("controller")).to_contain_text("epoch")
    # The live chart is drawn by uPlot from the history and the event stream.
    expect(page.locator('[data-chart="cluster-rates"] canvas')).to_have_count(1)


def test_the_throughput_chart_leaves_missing_samples_out(page: Page) -> None:
    """Samples every 0.5 s (the console's interval here), then none for 50 s, then a burst
    of one sample and quiet again: nothing is drawn across the 50 s (no ramp up to the
    burst), and the burst is a spike."""
    start = time.time() - 70
    rows = [(start + i * 0.5, 0.0) for i in range(10)]
    burst = rows[-1][0] + 50
    rows += [(burst, 1000.0)] + [(burst + (i + 1) * 0.5, 0.0) for i in range(10)]
    serve_history(
        page,
        [
            {"seq": 10**9 + i, "at": at, "produce_rate": rate, "consume_rate": 0.0}
            for i, (at, rate) in enumerate(rows)
        ],
    )
    page.goto("/")
    chart = '[data-chart="cluster-rates"]'
    wait_for_chart(page, chart, len(rows))
    assert series_pixels(page, chart, rows[9][0] + 1, burst - 1) == 0  # the gap: no ramp
    assert series_pixels(page, chart, burst - 0.25, burst + 0.25, at_least=800) > 0
    assert series_pixels(page, chart, burst + 0.75, burst + 5, at_least=100) == 0  # back down


def test_samples_become_chart_columns_with_gaps_and_lone_points(page: Page) -> None:
    """``YakCharts``' pure parts: a null row where samples are more than the gap apart, a
    sample not later than the last dropped, values with no neighbour listed for dots."""
    page.goto("/")
    columns = page.evaluate(
        """() => {
          const data = [[], [], []];
          const added = [[10, [1, 5]], [11, [2, null]], [11, [9, 9]], [20, [3, 7]], [20.5, [4, 8]]]
            .map(([at, values]) => YakCharts.appendSample(data, at, values, 2.5));
          return { data, added, lone: data.slice(1).map(YakCharts.isolated) };
        }"""
    )
    assert columns["added"] == [1, 1, 0, 2, 1]
    assert columns["data"] == [
        [10, 11, 15.5, 20, 20.5],
        [1, 2, None, 3, 4],
        [5, None, None, 7, 8],
    ]
    assert columns["lone"] == [[], [0]]


def test_dark_mode_toggle_is_remembered(page: Page) -> None:
    page.goto("/")
    html = page.locator("html")
    page.emulate_media(color_scheme="light")
    page.reload()
    expect(html).to_have_attribute("data-theme", "light")
    page.get_by_role("button", name="Dark mode", exact=True).click()
    expect(html).to_have_attribute("data-theme", "dark")
    says_light_mode(page)  # what pressing it does now
    page.goto("/topics")
    expect(html).to_have_attribute("data-theme", "dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 28)"
    page.get_by_role("button", name="Light mode", exact=True).click()
    expect(html).to_have_attribute("data-theme", "light")
    expect(page.locator("#theme-toggle")).to_have_accessible_name("Dark mode")


def says_light_mode(page: Page) -> None:
    """The theme button offers light mode, to the eye and to a screen reader."""
    toggle = page.locator("#theme-toggle")
    expect(toggle).to_have_accessible_name("Light mode")
    expect(toggle).to_have_text(re.compile(r"^\W*Light mode$"), use_inner_text=True)


def test_the_theme_button_names_the_other_theme_on_a_dark_system(page: Page) -> None:
    """First visit, the system prefers dark: the page is dark and the button offers light."""
    page.emulate_media(color_scheme="dark")
    page.goto("/")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    says_light_mode(page)


def test_keyboard_reaches_navigation_and_content(page: Page) -> None:
    page.goto("/")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Overview")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Topics")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/topics$"))


def test_phone_width_has_no_horizontal_scroll(page: Page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/", "/topics", "/groups", "/brokers"):
        page.goto(path)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} scrolls sideways by {overflow} px at 390 px"


def test_favicon_and_vendored_assets_are_served(console_cluster: LocalCluster) -> None:
    with httpx.Client(base_url=console_cluster.console_url) as client:
        icon = client.get("/favicon.ico")
        assert (icon.status_code, icon.headers["content-type"]) == (200, "image/svg+xml")
        for asset in ("vendor/htmx.min.js", "vendor/uPlot.iife.min.js", "app.js", "app.css"):
            assert client.get(f"/static/{asset}").status_code == 200, asset


V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}


def _register(url: str, subject: str) -> list[int]:
    """Both versions, by Confluent's API (Playwright's loop runs in this thread: no asyncio)."""
    ids = []
    for version in (V1, V2):
        answer = httpx.post(
            f"{url}/subjects/{subject}/versions", json={"schema": json.dumps(version)}
        )
        answer.raise_for_status()
        ids.append(int(answer.json()["id"]))
    return ids


def test_subjects_versions_and_the_diff_between_two(
    page: Page, console_cluster: LocalCluster
) -> None:
    subject = unique("orders") + "-value"
    first, second = _register(schema_registry_url(console_cluster), subject)

    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Schemas").click()
    expect(page).to_have_url("/schemas")
    page.get_by_test_id("subjects-table").get_by_role("link", name=subject).click()

    expect(page.get_by_role("heading", level=1)).to_have_text(subject)
    expect(page.get_by_test_id("versions").get_by_role("link")).to_have_text(["v1", "v2"])
    expect(page.get_by_test_id("schema-version")).to_have_text("2")
    expect(page.get_by_test_id("schema-type")).to_have_text("AVRO")
    expect(page.get_by_test_id("schema-text")).to_contain_text('"name": "note"')

    page.get_by_test_id("versions").get_by_role("link", name="v1").click()
    expect(page.get_by_test_id("schema-version")).to_have_text("1")
    expect(page.get_by_test_id("schema-text")).not_to_contain_text("note")

    # The form defaults to the last two versions.
    expect(page.get_by_test_id("diff-old")).to_have_value("1")
    expect(page.get_by_test_id("diff-new")).to_have_value("2")
    page.get_by_test_id("diff-submit").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{subject}: v1 → v2")
    diff = page.get_by_test_id("diff")
    added = diff.locator('[data-kind="add"]')
    expect(added.filter(has_text='"name": "note"')).to_have_count(1)
    expect(added.filter(has_text='"name": "id"')).to_have_count(0)
    expect(diff.locator('[data-kind="del"]')).to_have_count(0)  # a field added: nothing removed
    expect(diff.locator('[data-kind="file"]')).to_have_text(
        [f"--- {subject} v1 (id {first})", f"+++ {subject} v2 (id {second})"]
    )
