"""Console login end to end in process: a console whose API is an in-process rest-proxy with
security on (on the in-memory store). Sessions, the login form, CSRF, roles, logout, and a
revoked key ending the session."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import NamedTuple

import httpx
import pytest

from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.security import SecurityStore
from yak_console.app import create_app as create_console
from yak_console.auth.roles import Role
from yak_console.settings import ConsoleSettings
from yak_rest_proxy.app import create_app as create_proxy
from yak_rest_proxy.runtime import ProxyRuntime
from yak_rest_proxy.settings import ProxySettings

CLUSTER = "console-login"
_FORM = "application/x-www-form-urlencoded"


class Setup(NamedTuple):
    browser: httpx.AsyncClient
    store: SecurityStore
    proxy: ProxyRuntime

    async def user(self, name: str, password: str) -> str:
        """A user with a password and an API key (returned)."""
        _, key, revision = await self.store.create_user(name, password=password, with_key=True)
        assert key is not None
        await self.proxy.wait_for_security(revision)
        return key.token


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    etcd = MemoryMetadataStore()
    proxy = create_proxy(
        ProxySettings(cluster_id=CLUSTER, security=True, super_users=("User:admin",)), store=etcd
    )
    settings = ConsoleSettings(
        security=True, roles={"User:olga": Role.OPERATOR}, sample_interval_ms=60_000
    )
    console = create_console(settings, transport=httpx.ASGITransport(app=proxy))
    async with proxy.router.lifespan_context(proxy), console.router.lifespan_context(console):
        transport = httpx.ASGITransport(app=console)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as browser:
            yield Setup(browser, SecurityStore(etcd, Keyspace(CLUSTER)), proxy.state.runtime)
    await etcd.aclose()


async def login(browser: httpx.AsyncClient, **form: str) -> httpx.Response:
    page = await browser.get("/login", params={"next": "/topics"})
    found = re.search(r'name="login_token" value="([^"]+)"', page.text)
    assert found is not None
    return await browser.post("/login", data={"login_token": found[1], "next": "/topics", **form})


def csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found[1]


async def test_pages_need_a_session_and_public_paths_do_not(setup: Setup) -> None:
    browser = setup.browser
    answer = await browser.get("/topics?q=a")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=%2Ftopics%3Fq%3Da"
    fragment = await browser.get("/topics", headers={"hx-request": "true"})
    assert (fragment.status_code, fragment.headers["hx-redirect"]) == (401, "/login")
    assert fragment.headers["www-authenticate"].startswith('Cookie realm="yak-console"')
    for public in ("/healthz", "/login", "/static/app.css", "/favicon.ico"):
        assert (await browser.get(public)).status_code == 200, public
    assert (await browser.post("/topics", data={"name": "t"})).status_code == 303


@pytest.mark.parametrize(
    ("form", "status", "words"),
    [
        ({"username": "vera", "password": "wrong"}, 401, "Wrong username, password or API key"),
        ({"api_key": "yak_0000000000000000_nope"}, 401, "Wrong username"),
        ({"username": "vera"}, 400, "Enter a username and password"),
    ],
)
async def test_a_bad_login_says_so(
    setup: Setup, form: dict[str, str], status: int, words: str
) -> None:
    await setup.user("vera", "pw")
    answer = await login(setup.browser, **form)
    assert answer.status_code == status
    assert words in answer.text
    assert "yak_console_session" not in answer.headers.get("set-cookie", "")


async def test_the_login_form_has_its_own_csrf_token(setup: Setup) -> None:
    await setup.user("vera", "pw")
    forged = await setup.browser.post(
        "/login", data={"username": "vera", "password": "pw", "login_token": "guess"}
    )
    assert forged.status_code == 403


async def test_a_viewer_reads_but_changes_nothing(setup: Setup) -> None:
    await setup.user("vera", "pw")
    browser = setup.browser
    answer = await login(browser, username="vera", password="pw")
    assert (answer.status_code, answer.headers["location"]) == (303, "/topics")
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Secure" not in cookie
    topics = await browser.get("/brokers")  # (without a controller /topics answers 503)
    assert topics.status_code == 200
    assert "vera · viewer" in topics.text
    assert 'hx-headers=\'{"X-CSRF-Token": "' in topics.text
    token = csrf(topics)  # the logout form's
    assert (await browser.get("/topics/new")).status_code == 403
    no_token = await browser.post("/topics", data={"name": "t"})
    assert no_token.status_code == 403
    assert "CSRF_TOKEN_INVALID" in no_token.text
    wrong = await browser.post("/topics", data={"name": "t"}, headers={"x-csrf-token": "x"})
    assert wrong.status_code == 403
    assert "CSRF_TOKEN_INVALID" in wrong.text
    refused = await browser.post("/topics", data={"name": "t", "csrf_token": token})
    assert refused.status_code == 403
    assert "CONSOLE_ROLE_FORBIDDEN" in refused.text
    refused = await browser.post("/groups/g/delete", headers={"x-csrf-token": token})
    assert refused.status_code == 403
    assert "CONSOLE_ROLE_FORBIDDEN" in refused.text
    out = await browser.post("/logout", data={"csrf_token": token})
    assert (out.status_code, out.headers["location"]) == (303, "/login")
    assert (await browser.get("/brokers")).status_code == 303


async def test_an_operator_sees_the_create_form_and_an_admin_everything(setup: Setup) -> None:
    await setup.user("olga", "pw")
    browser = setup.browser
    await login(browser, username="olga", password="pw")
    topics = await browser.get("/topics/new")
    assert topics.status_code == 200
    assert "olga · operator" in topics.text
    assert (await browser.get("/topics/t/delete")).status_code == 403
    await browser.post("/logout", data={"csrf_token": csrf(topics)})
    admin_key = await setup.user("admin", "pw")
    await login(browser, api_key=admin_key)
    assert "admin · admin" in (await browser.get("/topics/t/configs")).text  # 404: no topic


async def test_a_revoked_key_ends_the_session(setup: Setup) -> None:
    key = await setup.user("vera", "pw")
    browser = setup.browser
    assert (await login(browser, api_key=key)).status_code == 303
    assert (await browser.get("/topics/nope")).status_code == 403  # the proxy: no DESCRIBE
    key_id = key.split("_")[1]
    await setup.proxy.wait_for_security(await setup.store.revoke_key("vera", key_id))
    ended = await browser.get("/topics/nope")
    assert ended.status_code == 303
    assert ended.headers["location"] == "/login?next=%2Ftopics%2Fnope&expired=1"
    assert (await browser.get("/brokers")).status_code == 303  # the session is gone
    assert "no longer accepts" in (await browser.get(ended.headers["location"])).text


async def test_failed_logins_are_limited_per_user_name(setup: Setup) -> None:
    await setup.user("fay", "right")
    browser = setup.browser
    for _ in range(5):  # YAK_CONSOLE_LOGIN_MAX_FAILURES's default
        wrong = await login(browser, username="fay", password="wrong")
        assert wrong.status_code == 401
    refused = await login(browser, username="fay", password="right")
    assert refused.status_code == 429
    assert 290 <= int(refused.headers["retry-after"]) <= 300
    assert "Too many failed logins" in refused.text
    assert "yak_console_session" not in refused.cookies


async def test_failed_logins_are_limited_per_address() -> None:
    etcd = MemoryMetadataStore()
    proxy = create_proxy(ProxySettings(cluster_id=CLUSTER, security=True), store=etcd)
    settings = ConsoleSettings(security=True, sample_interval_ms=60_000, login_max_failures=2)
    console = create_console(settings, transport=httpx.ASGITransport(app=proxy))
    async with proxy.router.lifespan_context(proxy), console.router.lifespan_context(console):
        transport = httpx.ASGITransport(app=console)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as browser:
            for name in ("a", "b"):
                assert (await login(browser, username=name, password="x")).status_code == 401
            refused = await login(browser, api_key="yak_0123456789abcdef_x")
            assert refused.status_code == 429
    await etcd.aclose()


async def test_an_oversized_login_body_is_refused(setup: Setup) -> None:
    page = await setup.browser.get("/login")
    assert page.status_code == 200
    huge = await setup.browser.post(
        "/login", content=b"username=" + b"x" * 100_000, headers={"content-type": _FORM}
    )
    assert huge.status_code == 413
