"""Browser tests of the console: a real cluster (etcd, a coordinator, 3 brokers, a rest-proxy,
a schema registry and the console, as processes) driven through Debian's chromium with
Playwright.

The browser is the system's ``chromium`` (``make test`` installs it with apt-get); Playwright
never downloads one. Every test gets a fresh browser context; its page fails the test on any
error in the browser console or an uncaught page error, and leaves a full-page screenshot in
``.artifacts/console/`` (``YAK_TEST_ARTIFACTS`` overrides the folder) — pass or fail.

Chromium itself logs every 4xx answer ("Failed to load resource: the server responded with a
status of 400") as a console error, for a page load and for an htmx request alike. A test
that provokes refusals on purpose marks itself ``@pytest.mark.expects_http_errors``: those
messages, and only those, are then let through.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, sync_playwright

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.supervisor import ManagedProcess, ProcessSpec

#: Flags for a headless chromium on a machine with no outside network (without the
#: background-networking ones it keeps trying to reach Google and logs each refusal).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
ARTIFACTS = Path(os.environ.get("YAK_TEST_ARTIFACTS", ".artifacts")) / "console"
#: Fast sampling so live numbers and banners change within a test's patience.
SAMPLE_INTERVAL_MS = "500"


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("Debian's chromium is not installed (make test installs it with apt-get)")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def console_cluster(
    tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd
) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("console-cluster")
    with local_cluster(folder, etcd, f"ui-{uuid.uuid4().hex[:8]}", brokers=3) as running:
        running.start_proxy(0)
        registry = _start_schema_registry(running)
        running.start_console(
            0,
            YAK_CONSOLE_SAMPLE_INTERVAL_MS=SAMPLE_INTERVAL_MS,
            YAK_SCHEMA_REGISTRY_URL=registry.spec.url or "",
        )
        yield running


def _start_schema_registry(cluster: LocalCluster) -> ManagedProcess:
    """A schema registry on the cluster's etcd (stopped with the cluster's supervisor)."""
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    script = str(Path(sys.executable).with_name("yak-schema-registry"))
    return cluster.supervisor.start(
        ProcessSpec(
            name="schema-registry",
            argv=(script, "--host", "127.0.0.1", "--port", str(port)),
            log_path=cluster.folder / "logs" / "schema-registry.log",
            health_url=f"{url}/readyz",
            url=url,
            env={"YAK_ETCD": cluster.etcd.endpoint, "YAK_CLUSTER_ID": cluster.cluster_id},
        )
    )


def schema_registry_url(cluster: LocalCluster) -> str:
    """The URL of the registry the console of ``cluster`` reads."""
    assert cluster.console is not None
    return cluster.console.spec.env["YAK_SCHEMA_REGISTRY_URL"]


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


_HTTP_4XX = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")


class PageProblems:
    """Errors the browser reported while a test ran."""

    def __init__(self, allow_4xx: bool) -> None:
        self.messages: list[str] = []
        self._allow_4xx = allow_4xx

    def on_console(self, message: ConsoleMessage) -> None:
        if self._allow_4xx and _HTTP_4XX.match(message.text):
            return
        if message.type == "error":
            self.messages.append(f"console error: {message.text} ({message.location})")

    def on_page_error(self, error: Exception) -> None:
        self.messages.append(f"page error: {error}")


def _artifact_name(node: pytest.Item) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", node.name)[:120]


@pytest.fixture
def page(
    browser: Browser, console_cluster: LocalCluster, request: pytest.FixtureRequest
) -> Iterator[Page]:
    """A fresh page at 1280 x 800 whose base URL is the console."""
    context = browser.new_context(
        base_url=console_cluster.console_url, viewport={"width": 1280, "height": 800}
    )
    context.set_default_timeout(15_000)
    opened = context.new_page()
    problems = PageProblems(request.node.get_closest_marker("expects_http_errors") is not None)
    opened.on("console", problems.on_console)
    opened.on("pageerror", problems.on_page_error)
    try:
        yield opened
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        if not opened.is_closed():
            opened.screenshot(
                path=str(ARTIFACTS / f"{_artifact_name(request.node)}.png"), full_page=True
            )
        context.close()
    assert not problems.messages, "\n".join(problems.messages)
