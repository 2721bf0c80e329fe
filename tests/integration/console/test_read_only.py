"""A console configured read-only (``YAK_CONSOLE_READ_ONLY``): no form that changes anything
is shown, and every route that changes something answers 403 and changes nothing — checked
for every POST route the app has, so a new one cannot slip through."""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute
from playwright.sync_api import Browser, expect

from loadtest.local_cluster import HOST, LocalCluster
from tests.integration.console.conftest import unique
from yak.etcd_server import free_ports
from yak.sdk import Admin, Consumer, Producer
from yak.supervisor import ProcessSpec
from yak_console.app import page_routers
from yak_console.pages.common import Pages
from yak_console.runtime import ConsoleRuntime
from yak_console.settings import ConsoleSettings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def read_only_url(console_cluster: LocalCluster) -> Iterator[str]:
    (port,) = free_ports(1)
    process = console_cluster.supervisor.start(
        ProcessSpec(
            name="console-read-only",
            argv=(
                str(Path(sys.executable).with_name("yak-console")),
                "--host",
                HOST,
                "--port",
                str(port),
            ),
            log_path=console_cluster.folder / "logs" / "console-read-only.log",
            health_url=f"http://{HOST}:{port}/healthz",
            url=f"http://{HOST}:{port}",
            env={"YAK_API_URL": console_cluster.proxy_url(0), "YAK_CONSOLE_READ_ONLY": "true"},
        )
    )
    try:
        yield f"http://{HOST}:{port}"
    finally:
        process.popen.send_signal(signal.SIGTERM)
        process.popen.wait(timeout=15)


@pytest.fixture(scope="module")
def populated(console_cluster: LocalCluster) -> tuple[str, str]:
    """A topic with a record and a group (left empty) with a committed offset."""
    url = console_cluster.proxy_url(0)
    topic, group = unique("ro"), unique("ro-group")
    with Admin(url) as admin:
        admin.create_topic(topic, partitions=1, replication_factor=1)
    with Producer(url) as producer:
        producer.send_and_wait(topic, b"kept", key=b"k")
    with Consumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        while not consumer.poll(1_000):
            pass
        consumer.commit()
    return topic, group


def _post_routes() -> list[str]:
    pages = Pages(ConsoleRuntime(ConsoleSettings()))
    return sorted(
        route.path
        for router in page_routers(pages)
        for route in router.routes
        if isinstance(route, APIRoute) and "POST" in (route.methods or ())
    )


def test_every_change_is_refused(read_only_url: str, populated: tuple[str, str]) -> None:
    topic, group = populated
    routes = _post_routes()
    assert len(routes) >= 6, routes  # create, configs, delete, produce, reset, group delete
    form = {
        "name": unique("never"),
        "partitions": "1",
        "replication_factor": "1",
        "confirm": topic,
        "value": "never",
        "to": "earliest",
        "force": "on",
        "retention.ms": "1000",
    }
    with httpx.Client(base_url=read_only_url) as client:
        for route in routes:
            path = route.replace("{topic}", topic).replace("{group}", group)
            answer = client.post(path, data=form)
            assert answer.status_code == 403, (route, answer.status_code)
            assert "CONSOLE_READ_ONLY" in answer.text, route


def test_nothing_changed(
    read_only_url: str, populated: tuple[str, str], console_cluster: LocalCluster
) -> None:
    topic, group = populated
    with httpx.Client(base_url=read_only_url) as client:
        client.post(f"/topics/{topic}/delete", data={"confirm": topic})
        client.post(f"/groups/{group}/reset", data={"to": "earliest", "force": "on"})
        client.post(f"/topics/{topic}/produce", data={"value": "never"})
    with Admin(console_cluster.proxy_url(0)) as admin:
        described = admin.describe_topic(topic)
        assert described.partition_count == 1
        assert [p.committed_offset for p in admin.describe_group(group).partitions] == [1]
        assert admin.partition_offset(topic, 0, "latest").offset == 1


def test_no_form_is_shown(browser: Browser, read_only_url: str, populated: tuple[str, str]) -> None:
    topic, group = populated
    context = browser.new_context(base_url=read_only_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto("/topics")
        expect(page.get_by_text("read-only", exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="New topic")).to_have_count(0)
        page.goto(f"/topics/{topic}")
        expect(page.get_by_role("heading", name=re.compile(topic))).to_be_visible()
        expect(page.get_by_role("link", name=re.compile("Delete"))).to_have_count(0)
        expect(page.get_by_role("link", name=re.compile("Edit configs"))).to_have_count(0)
        page.goto(f"/topics/{topic}/produce")
        expect(page.locator("form textarea")).to_have_count(0)
        page.goto(f"/groups/{group}")
        expect(page.get_by_role("button", name="Apply")).to_have_count(0)
        expect(page.get_by_role("button", name="Delete group")).to_have_count(0)
    finally:
        context.close()
    assert errors == []
