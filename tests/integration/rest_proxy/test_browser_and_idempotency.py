"""CORS and Idempotency-Key against real processes: one broker and two proxies allowing one page
origin, and two tiny static page servers on 127.0.0.1 (the allowed origin and another).

* Headless Chromium (the console tests' Playwright setup, Debian's chromium) loads the allowed
  page, which produces with ``fetch()`` (a preflighted request: JSON and an Idempotency-Key),
  retries it, and reads the record back, reading the exposed headers; the other origin's
  ``fetch()`` is blocked at the preflight and nothing is written.
* The same Idempotency-Key sent to both proxies writes one record; the second proxy replays
  the first one's answer from etcd.

One cluster for the module (its own ``cluster`` fixture: the proxies need the page origin),
with its topics made before the browser starts (Playwright's sync API runs an event loop).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from loadtest.local_cluster import LocalCluster, local_cluster
from tests.integration.console.conftest import CHROMIUM_ARGS, chromium_path
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.etcd_server import EmbeddedEtcd

#: The module's topics, one a test (made with the cluster).
TOPICS = BROWSER, BLOCKED, KEYED = unique("browser"), unique("blocked"), unique("keyed")
_PAGE = "<!doctype html><title>a page on another origin</title><p>yak cors test</p>"

_PRODUCE_AND_READ = """
async ([proxy, topic]) => {
  const url = `${proxy}/api/v1/topics/${topic}/records`;
  const init = {
    method: "POST",
    headers: {"Content-Type": "application/json", "Idempotency-Key": "browser-order-1"},
    body: JSON.stringify({records: [{value: {from: "browser"}}]}),
  };
  const first = await fetch(url, init);
  const retry = await fetch(url, init);
  const read = await fetch(
    `${proxy}/api/v1/topics/${topic}/partitions/0/records?offset=0&timeout_ms=5000`);
  return {
    status: first.status,
    produced: await first.json(),
    replayed: retry.headers.get("Idempotent-Replayed"),
    retried: await retry.json(),
    requestId: first.headers.get("X-Request-Id"),
    read: await read.json(),
  };
}
"""

_BLOCKED = """
async ([proxy, topic]) => {
  try {
    await fetch(`${proxy}/api/v1/topics/${topic}/records`, {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({records: [{value: "from evil"}]}),
    });
    return "sent";
  } catch (error) {
    return `blocked: ${error.name}`;
  }
}
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _page_server(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on a free 127.0.0.1 port; yields its origin."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the allowed origin, another origin), each serving ``index.html``."""
    folder = tmp_path_factory.mktemp("pages")
    (folder / "index.html").write_text(_PAGE)
    with _page_server(folder) as allowed, _page_server(folder) as other:
        yield allowed, other


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd, pages: tuple[str, str]
) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("cluster")
    with local_cluster(folder, etcd, f"cors-{uuid.uuid4().hex[:8]}", brokers=1) as running:
        for index in (0, 1):
            running.start_proxy(index, YAK_CORS_ORIGINS=pages[0])
        for topic in TOPICS:  # here, before Playwright's loop runs in this thread
            asyncio.run(create_topic(running, topic, partitions=1, replication_factor=1))
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _end_offset(cluster: LocalCluster, topic: str) -> int:
    answer = httpx.get(f"{cluster.proxy_url(0)}/topics/{topic}/partitions/0/offsets")
    return int(answer.json()["end_offset"])


def test_a_page_on_the_allowed_origin_produces_and_reads(
    cluster: LocalCluster, browser: Browser, pages: tuple[str, str]
) -> None:
    topic = BROWSER
    page = browser.new_page()
    try:
        page.goto(f"{pages[0]}/index.html")
        done = page.evaluate(_PRODUCE_AND_READ, [cluster.proxy_url(0), topic])
    finally:
        page.close()
    assert done["status"] == 200, done
    assert done["produced"]["results"][0]["offset"] == 0
    assert done["replayed"] == "true"  # an exposed header the page may read
    assert done["retried"] == done["produced"]
    assert done["requestId"]
    assert [r["value"] for r in done["read"]["records"]] == [{"from": "browser"}]
    assert _end_offset(cluster, topic) == 1


def test_a_page_on_another_origin_is_blocked(
    cluster: LocalCluster, browser: Browser, pages: tuple[str, str]
) -> None:
    topic = BLOCKED
    page = browser.new_page()
    try:
        page.goto(f"{pages[1]}/index.html")
        outcome = page.evaluate(_BLOCKED, [cluster.proxy_url(0), topic])
    finally:
        page.close()
    assert outcome == "blocked: TypeError"
    assert _end_offset(cluster, topic) == 0  # refused at the preflight: never sent


def test_preflights_on_the_real_proxy(cluster: LocalCluster, pages: tuple[str, str]) -> None:
    asking = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, idempotency-key",
    }
    with httpx.Client(base_url=cluster.proxy_url(1)) as client:
        ok = client.options("/topics/t", headers={**asking, "Origin": pages[0]})
        refused = client.options("/topics/t", headers={**asking, "Origin": pages[1]})
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == pages[0]
    assert "Idempotency-Key" in ok.headers["access-control-allow-headers"]
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers


def test_one_key_on_two_proxies_writes_one_record(cluster: LocalCluster) -> None:
    topic = KEYED
    body = {"records": [{"value": {"order": 17}}]}
    headers = {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}
    answers = []
    for index in (0, 1, 0):
        with httpx.Client(base_url=cluster.proxy_url(index)) as client:
            answers.append(client.post(f"/topics/{topic}", json=body, headers=headers))
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert answers[1].json() == answers[2].json() == answers[0].json()
    assert "idempotent-replayed" not in answers[0].headers
    assert answers[1].headers["idempotent-replayed"] == "true"
    assert _end_offset(cluster, topic) == 1
    with httpx.Client(base_url=cluster.proxy_url(1)) as client:
        reused = client.post(f"/topics/{topic}", json={"records": [{"value": 1}]}, headers=headers)
    assert reused.status_code == 422
    assert reused.json()["error_code"] == 42206
    assert _end_offset(cluster, topic) == 1
