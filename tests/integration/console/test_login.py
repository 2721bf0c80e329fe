"""Console login in a real browser, with security on in the proxy and the console.

Its own cluster (the conftest's ``console_cluster`` is overridden in this module): one broker,
a proxy with ``YAK_SECURITY=on`` and the super-user ``admin`` (bootstrapped straight into
etcd), a console with ``YAK_SECURITY=on`` and a key of its own for the sampler. A viewer sees
the pages but no controls and is refused a change; the admin creates and deletes a topic;
logout ends the session; a POST without the CSRF token is 403; a wrong password is said so;
a revoked key ends the session's API access.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from playwright.sync_api import Page, expect

from loadtest.local_cluster import LocalCluster, local_cluster
from tests.integration.console.conftest import SAMPLE_INTERVAL_MS, unique
from yak.etcd_server import EmbeddedEtcd

pytestmark = pytest.mark.integration

VIEWER, VIEWER_PASSWORD = "vera", "vera-password"


class Secured(NamedTuple):
    cluster: LocalCluster
    admin_key: str

    def api(self, key: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {key or self.admin_key}"}
        return httpx.Client(base_url=self.cluster.proxy_url(0), headers=headers, timeout=30)

    def user(self, name: str, acls: list[dict[str, Any]], password: str | None = None) -> str:
        """A user with ``acls`` (and a password); its API key."""
        with self.api() as api:
            made = api.post("/api/v1/security/users", json={"name": name, "password": password})
            assert made.status_code == 201, made.text
            if acls:
                added = api.post("/api/v1/security/acls", json={"acls": acls})
                assert added.status_code == 201, added.text
        key: str = made.json()["api_key"]["api_key"]
        return key


def _describe_all(principal: str) -> list[dict[str, Any]]:
    acls = [("CLUSTER", "yak-cluster"), ("TOPIC", "*"), ("GROUP", "*")]
    return [
        {"principal": principal, "resource_type": t, "resource_name": n, "operation": "DESCRIBE"}
        for t, n in acls
    ]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[Secured]:
    folder: Path = tmp_path_factory.mktemp("console-login")
    cluster_id = f"uisec-{uuid.uuid4().hex[:8]}"
    # A process of its own: Playwright's sync API already runs an event loop in this thread.
    yak = str(Path(sys.executable).with_name("yak"))
    bootstrap = subprocess.run(
        [
            yak,
            "users",
            "create",
            "admin",
            "--bootstrap",
            "--etcd",
            etcd.endpoint,
            "--cluster-id",
            cluster_id,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    admin_key = bootstrap.stdout.strip().splitlines()[-1]
    with local_cluster(folder, etcd, cluster_id, brokers=1) as running:
        running.start_proxy(0, YAK_SECURITY="on", YAK_SUPER_USERS="User:admin")
        made = Secured(running, admin_key)
        console_key = made.user("console", _describe_all("User:console"))
        made.user(VIEWER, _describe_all(f"User:{VIEWER}"), password=VIEWER_PASSWORD)
        running.start_console(
            0,
            YAK_SECURITY="on",
            YAK_CONSOLE_API_KEY=console_key,
            YAK_CONSOLE_SAMPLE_INTERVAL_MS=SAMPLE_INTERVAL_MS,
        )
        yield made


@pytest.fixture(scope="module")
def console_cluster(secured: Secured) -> LocalCluster:
    """Overrides the conftest's (unsecured) cluster for this module's ``page``."""
    return secured.cluster


def _log_in(page: Page, *, username: str = "", password: str = "", api_key: str = "") -> None:
    page.goto("/topics")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Ftopics$"))
    if api_key:
        page.get_by_label("API key").fill(api_key)
    else:
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


@pytest.mark.expects_http_errors
def test_a_viewer_sees_the_pages_but_cannot_change_anything(page: Page, secured: Secured) -> None:
    _log_in(page, username=VIEWER, password=VIEWER_PASSWORD)
    expect(page).to_have_url(re.compile(r"/topics$"))
    expect(page.get_by_test_id("user")).to_have_text(f"{VIEWER} · viewer")
    expect(page.get_by_test_id("topics-table")).to_be_visible()
    expect(page.get_by_role("link", name="New topic")).to_have_count(0)
    for path in ("/", "/brokers", "/groups"):
        page.goto(path)
        expect(page.get_by_test_id("user")).to_be_visible()
    answer = page.goto("/topics/new")
    assert answer is not None
    assert answer.status == 403
    expect(page.get_by_text("CONSOLE_ROLE_FORBIDDEN")).to_be_visible()


@pytest.mark.expects_http_errors
def test_a_wrong_password_is_said_so(page: Page, secured: Secured) -> None:
    _log_in(page, username=VIEWER, password="not-it")
    expect(page.get_by_test_id("login-error")).to_have_text("Wrong username, password or API key.")
    page.goto("/brokers")
    expect(page).to_have_url(re.compile(r"/login\?next="))


def test_the_admin_creates_and_deletes_a_topic_then_logs_out(page: Page, secured: Secured) -> None:
    name = unique("ui-sec")
    _log_in(page, api_key=secured.admin_key)
    expect(page.get_by_test_id("user")).to_have_text("admin · admin")
    page.get_by_role("link", name="New topic").click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Partitions").fill("1")
    page.get_by_label("Replication factor").fill("1")
    page.get_by_role("button", name="Create topic").click()
    expect(page).to_have_url(re.compile(rf"/topics/{name}$"))
    page.get_by_role("link", name="Delete", exact=True).click()
    page.get_by_label(re.compile("to confirm")).fill(name)
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_test_id("deleted-notice")).to_contain_text(name)
    page.get_by_test_id("logout").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/topics")
    expect(page).to_have_url(re.compile(r"/login\?next="))


@pytest.mark.expects_http_errors
def test_a_post_without_the_csrf_token_is_refused(page: Page, secured: Secured) -> None:
    _log_in(page, api_key=secured.admin_key)
    expect(page.get_by_test_id("user")).to_be_visible()
    name = unique("ui-csrf")
    form: dict[str, str | float | bool] = {"name": name, "partitions": 1, "replication_factor": 1}
    refused = page.request.post("/topics", form=form, max_redirects=0)
    assert refused.status == 403
    assert "CSRF_TOKEN_INVALID" in refused.text()
    with secured.api() as api:
        assert api.get(f"/api/v1/topics/{name}").status_code == 404


@pytest.mark.expects_http_errors
def test_a_revoked_key_ends_the_session(page: Page, secured: Secured) -> None:
    user = unique("rita")
    key = secured.user(user, _describe_all(f"User:{user}"))
    _log_in(page, api_key=key)
    expect(page.get_by_test_id("user")).to_have_text(f"{user} · viewer")
    with secured.api() as api:
        revoked = api.delete(f"/api/v1/security/users/{user}/keys/{key.split('_')[1]}")
        assert revoked.status_code == 204, revoked.text
    page.goto("/topics")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Ftopics&expired=1$"))
    expect(page.get_by_test_id("login-expired")).to_be_visible()
