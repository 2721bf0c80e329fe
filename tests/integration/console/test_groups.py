"""The consumer-group pages in a real browser: lag appearing and falling live, a new group's lag
charted from the first load, members and their partitions, an offset reset's preview and its
refusal, deletion, an unknown group."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from playwright.sync_api import Dialog, Page, expect

from loadtest.local_cluster import LocalCluster
from tests.integration.console.charts import series_pixels, serve_history, wait_for_chart
from tests.integration.console.conftest import ARTIFACTS, unique
from yak.sdk import Admin, Consumer, Producer, TopicPartition

pytestmark = pytest.mark.integration

#: Live numbers follow samples taken every 500 ms; a loaded machine gets some slack.
LIVE_MS = 20_000


def _produce(url: str, topic: str, count: int) -> None:
    with Producer(url) as producer:
        for i in range(count):
            producer.send_and_wait(topic, f"value-{i}".encode(), key=f"k{i}".encode())
        producer.flush()


def _consume_all(consumer: Consumer, count: int) -> None:
    seen = 0
    deadline = time.monotonic() + 30
    while seen < count:
        assert time.monotonic() < deadline, f"consumed {seen} of {count} records"
        seen += len(consumer.poll(1_000))


def _topic_with_records(url: str, count: int = 100) -> str:
    topic = unique("lag")
    with Admin(url) as admin:
        admin.create_topic(topic, partitions=1)
    _produce(url, topic, count)
    return topic


def _committed(url: str, group: str) -> list[int | None]:
    with Admin(url) as admin:
        return [p.committed_offset for p in admin.describe_group(group).partitions]


def _accept(dialog: Dialog) -> None:
    dialog.accept()


def test_lag_appears_and_falls_to_zero_live(page: Page, console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic, group = _topic_with_records(url), unique("group")
    page.goto("/groups")
    expect(page.get_by_role("heading", name="Consumer groups")).to_be_visible()
    consumer = Consumer(url, group, [topic], auto_offset_reset="earliest")
    detail = page.context.new_page()
    errors: list[str] = []
    detail.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        _consume_all(consumer, 100)
        consumer.commit({TopicPartition(topic, 0): 40})
        # The open list page learns of the group and its lag without a reload.
        row = page.locator(f'tr[data-group="{group}"]')
        expect(row.get_by_test_id("group-lag")).to_have_text("60", timeout=LIVE_MS)
        expect(row.get_by_test_id("group-members")).to_have_text("1")

        detail.goto(f"/groups/{group}")
        expect(detail.get_by_test_id("total-lag")).to_have_text("60")
        member = detail.get_by_test_id("members").locator(f'tr[data-member="{consumer.member_id}"]')
        expect(member.get_by_test_id("member-assignment")).to_have_text(f"{topic}: 0")
        partition = detail.locator(f'[data-testid="partitions"] tr[data-partition="{topic}-0"]')
        expect(partition.get_by_test_id("committed")).to_have_text("40")
        expect(partition.get_by_test_id("partition-lag")).to_have_text("60")
        expect(partition).to_contain_text(consumer.member_id or "")
        expect(detail.locator('[data-chart="group-lag"] canvas')).to_have_count(1)

        consumer.commit()  # the rest: every record polled
        expect(detail.get_by_test_id("total-lag")).to_have_text("0", timeout=LIVE_MS)
        expect(partition.get_by_test_id("partition-lag")).to_have_text("0", timeout=LIVE_MS)
        expect(partition.get_by_test_id("committed")).to_have_text("100")
        expect(row.get_by_test_id("group-lag")).to_have_text("0", timeout=LIVE_MS)
    finally:
        consumer.close()
        detail.close()
    assert not errors, errors


def test_the_lag_chart_shows_a_new_group_from_the_first_load(
    page: Page, console_cluster: LocalCluster
) -> None:
    """A group in one sample of the history only (it just appeared): its lag is drawn at once,
    not after the next sample; a group in no sample yet: the lag the page shows is."""
    url = console_cluster.proxy_url(0)
    topic, group = _topic_with_records(url), unique("group")
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        _consume_all(consumer, 100)
        consumer.commit({TopicPartition(topic, 0): 40})
    now, chart = time.time(), '[data-chart="group-lag"]'
    quiet = [{"seq": 10**9 + i, "at": now - 15 + i, "groups": {}} for i in range(5)]
    appeared = [
        {"seq": 10**9 + 5, "at": now + 30, "groups": {group: 60}},
        {"seq": 10**9 + 6, "at": now + 30.5, "groups": {}},
    ]
    serve_history(page, quiet + appeared)
    page.goto(f"/groups/{group}")
    wait_for_chart(page, chart, len(quiet) + len(appeared))
    assert series_pixels(page, chart, now + 29.75, now + 30.25, at_least=30) > 0

    unseen = page.context.new_page()
    try:
        serve_history(unseen, quiet)
        unseen.goto(f"/groups/{group}")
        expect(unseen.get_by_test_id("total-lag")).to_have_text("60")
        wait_for_chart(unseen, chart, len(quiet) + 1)
        assert series_pixels(unseen, chart, now - 5, now + 60, at_least=30) > 0
    finally:
        unseen.close()


def test_reset_preview_changes_nothing_then_apply_and_delete(
    page: Page, console_cluster: LocalCluster
) -> None:
    url = console_cluster.proxy_url(0)
    topic, group = _topic_with_records(url), unique("group")
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        _consume_all(consumer, 100)
        consumer.commit()
    page.goto(f"/groups/{group}")
    expect(page.get_by_test_id("no-members")).to_be_visible(timeout=LIVE_MS)
    expect(page.get_by_test_id("total-lag")).to_have_text("0")

    page.get_by_label("Reset to").select_option("earliest")
    page.get_by_role("button", name="Preview").click()
    preview = page.get_by_test_id("reset-preview")
    change = preview.locator(f'tr[data-partition="{topic}-0"]')
    expect(change.get_by_test_id("reset-previous")).to_have_text("100")
    expect(change.get_by_test_id("reset-new")).to_have_text("0")
    expect(change.get_by_test_id("reset-lag-after")).to_have_text("100")
    assert _committed(url, group) == [100]
    expect(page.get_by_test_id("total-lag")).to_have_text("0")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "group_reset_preview.png"), full_page=True)

    page.once("dialog", _accept)
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_test_id("reset-applied")).to_contain_text("Offsets reset")
    expect(page.get_by_test_id("total-lag")).to_have_text("100", timeout=LIVE_MS)
    expect(page.get_by_test_id("committed")).to_have_text("0", timeout=LIVE_MS)
    assert _committed(url, group) == [0]

    page.once("dialog", _accept)
    page.get_by_role("button", name="Delete group").click()
    expect(page).to_have_url(re.compile(r"/groups\?deleted="))
    expect(page.get_by_test_id("group-deleted")).to_contain_text(group)
    expect(page.locator(f'tr[data-group="{group}"]')).to_have_count(0)


@pytest.mark.expects_http_errors
def test_reset_and_delete_of_an_active_group_are_refused(
    page: Page, console_cluster: LocalCluster
) -> None:
    url = console_cluster.proxy_url(0)
    topic, group = _topic_with_records(url), unique("group")
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        _consume_all(consumer, 100)
        consumer.commit()
        page.goto(f"/groups/{group}")
        page.get_by_label("Reset to").select_option("earliest")
        page.once("dialog", _accept)
        page.get_by_role("button", name="Apply").click()
        refusal = page.get_by_test_id("reset-error")
        expect(refusal).to_contain_text("NON_EMPTY_GROUP")
        expect(refusal).to_contain_text("active member")
        expect(refusal).to_contain_text("Nothing was changed")
        assert _committed(url, group) == [100]

        page.once("dialog", _accept)
        page.get_by_role("button", name="Delete group").click()
        expect(page.locator("#delete-result")).to_contain_text("NON_EMPTY_GROUP")
        expect(page).to_have_url(re.compile(rf"/groups/{group}$"))
    assert _committed(url, group) == [100]


@pytest.mark.expects_http_errors
def test_an_unknown_group_is_a_404_page(page: Page) -> None:
    group = unique("no-such-group")
    response = page.goto(f"/groups/{group}")
    assert response is not None
    assert response.status == 404
    expect(page.get_by_test_id("error")).to_contain_text("GROUP_ID_NOT_FOUND")


def _sideways_overflow(page: Page) -> int:
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert isinstance(overflow, int)
    return overflow


@pytest.mark.expects_http_errors
def test_group_pages_fit_a_phone(page: Page, console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic, group = _topic_with_records(url, 10), unique("a-rather-long-consumer-group-name")
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        _consume_all(consumer, 10)
        consumer.commit()
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"/groups/{group}")
        expect(page.get_by_test_id("members")).to_be_visible()
        page.get_by_role("button", name="Preview").click()
        expect(page.get_by_test_id("reset-error")).to_contain_text("NON_EMPTY_GROUP")
        page.get_by_label("Force").check()
        page.get_by_role("button", name="Preview").click()
        expect(page.get_by_test_id("reset-preview")).to_be_visible()
        assert _sideways_overflow(page) <= 0
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "group_page_phone.png"), full_page=True)
        page.goto("/groups")
        expect(page.locator(f'tr[data-group="{group}"]')).to_be_visible()
        assert _sideways_overflow(page) <= 0


def test_reset_and_delete_work_without_javascript(console_cluster: LocalCluster) -> None:
    url = console_cluster.proxy_url(0)
    topic, group = _topic_with_records(url, 10), unique("group")
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        _consume_all(consumer, 10)
        consumer.commit()
    with httpx.Client(base_url=console_cluster.console_url) as client:
        form = {"to": "offset", "offset": "3", "topic": topic, "action": "preview"}
        preview = client.post(f"/groups/{group}/reset", data=form)
        assert preview.status_code == 200
        assert 'data-testid="reset-preview"' in preview.text
        assert "<html" in preview.text
        bad = client.post(f"/groups/{group}/reset", data={"to": "offset", "offset": "x"})
        assert bad.status_code == 400
        assert "INVALID_REQUEST" in bad.text
        assert _committed(url, group) == [10]
        deleted = client.post(f"/groups/{group}/delete")
        assert (deleted.status_code, deleted.headers["location"]) == (
            303,
            f"/groups?deleted={group}",
        )
        assert client.get(f"/groups/{group}").status_code == 404
