"""Console login's pure parts: roles, signed session ids, the session store, CSRF checks and the
security settings."""

from __future__ import annotations

import pytest

from yak_console.auth.roles import ROLE_PERMITS, Permit, Role, parse_roles, role_of
from yak_console.auth.sessions import SessionSigner, SessionStore
from yak_console.pages.login import safe_next
from yak_console.settings import ConsoleSettings


class FakeClients:
    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_roles_grant_more_as_they_rise() -> None:
    assert ROLE_PERMITS[Role.VIEWER] == frozenset()
    assert ROLE_PERMITS[Role.OPERATOR] == {
        Permit.PRODUCE,
        Permit.RESET_OFFSETS,
        Permit.CREATE_TOPIC,
    }
    assert ROLE_PERMITS[Role.ADMIN] == frozenset(Permit)
    assert ROLE_PERMITS[Role.VIEWER] < ROLE_PERMITS[Role.OPERATOR] < ROLE_PERMITS[Role.ADMIN]


@pytest.mark.parametrize(
    ("principal", "super_user", "role"),
    [
        ("User:alice", False, Role.ADMIN),  # configured
        ("User:bob", True, Role.VIEWER),  # configured wins over super-user
        ("User:root", True, Role.ADMIN),  # a super-user not named
        ("User:carol", False, Role.OPERATOR),  # the default
    ],
)
def test_role_of(principal: str, super_user: bool, role: Role) -> None:
    roles = {"User:alice": Role.ADMIN, "User:bob": Role.VIEWER}
    assert role_of(principal, super_user=super_user, roles=roles, default=Role.OPERATOR) == role


def test_parse_roles() -> None:
    assert parse_roles(" User:alice=admin, User:bob = Operator ,") == {
        "User:alice": Role.ADMIN,
        "User:bob": Role.OPERATOR,
    }
    assert parse_roles("") == {}
    for bad, words in (("alice=admin", "User:<name>"), ("User:a=root", "unknown role")):
        with pytest.raises(ValueError, match=words):
            parse_roles(bad)


def test_a_signed_id_survives_and_a_forged_one_does_not() -> None:
    signer = SessionSigner(b"k" * 32)
    signed = signer.sign("abc")
    assert signer.unsign(signed) == "abc"
    assert signer.unsign(signed[:-1] + ("A" if signed[-1] != "A" else "B")) is None
    assert signer.unsign("abd" + signed[3:]) is None
    assert SessionSigner(b"j" * 32).unsign(signed) is None
    assert signer.unsign(None) is None
    assert signer.unsign("no-signature") is None
    with pytest.raises(ValueError, match="16 bytes"):
        SessionSigner(b"short")


async def test_sessions_expire_when_idle_or_old_and_close_their_clients() -> None:
    clock = Clock()
    store = SessionStore(SessionSigner(b"s" * 32), idle_s=10, max_s=25, clock=clock)
    clients = FakeClients()
    session = await store.open("User:alice", Role.VIEWER, clients)
    assert session.cookie != session.id
    assert session.id in session.cookie
    assert await store.find(session.cookie) is session
    assert await store.find(session.id) is None  # unsigned
    for _ in range(2):
        clock.now += 9
        assert await store.find(session.cookie) is session  # each request resets the idle timer
    clock.now += 9  # 27 s after login: past max_s
    assert await store.find(session.cookie) is None
    assert clients.closed
    assert len(store) == 0

    idle = FakeClients()
    session = await store.open("User:bob", Role.ADMIN, idle)
    clock.now += 11
    await store.open("User:carol", Role.ADMIN, FakeClients())  # a login sweeps expired ones
    assert idle.closed
    assert len(store) == 1
    assert await store.find(session.cookie) is None


async def test_logout_ends_the_session_and_csrf_tokens_are_per_session() -> None:
    store = SessionStore(SessionSigner(b"s" * 32), idle_s=10, max_s=20)
    a, b = (
        await store.open("User:a", Role.VIEWER, FakeClients()),
        await store.open("User:b", Role.VIEWER, FakeClients()),
    )
    assert a.csrf_token != b.csrf_token
    assert a.check_csrf(a.csrf_token)
    assert not a.check_csrf(b.csrf_token)
    assert not a.check_csrf(None)
    assert not a.check_csrf("")
    await store.end(a)
    assert await store.find(a.cookie) is None
    await store.aclose()
    assert len(store) == 0


def test_next_stays_on_the_console() -> None:
    assert safe_next("/topics?q=a") == "/topics?q=a"
    for outside in ("https://evil.example/", "//evil.example/", "/\\evil.example", "topics"):
        assert safe_next(outside) == "/"


def test_security_settings_from_the_environment() -> None:
    settings = ConsoleSettings.from_env(
        {
            "YAK_SECURITY": "on",
            "YAK_CONSOLE_ROLES": "User:alice=admin",
            "YAK_CONSOLE_DEFAULT_ROLE": "operator",
            "YAK_CONSOLE_SECURE_COOKIES": "true",
            "YAK_CONSOLE_SESSION_SECRET": "x" * 32,
            "YAK_CONSOLE_SESSION_IDLE_S": "60",
            "YAK_CONSOLE_API_KEY": "yak_k",
        }
    )
    assert settings.security
    assert settings.secure_cookies is True
    assert settings.roles == {"User:alice": Role.ADMIN}
    assert settings.default_role is Role.OPERATOR
    assert (settings.session_idle_s, settings.session_secret) == (60, b"x" * 32)
    assert settings.api_key == "yak_k"
    assert "yak_k" not in repr(settings)
    plain = ConsoleSettings.from_env({"YAK_CONSOLE_SECURE_COOKIES": "auto"})
    assert not plain.security
    assert plain.secure_cookies is None
    with pytest.raises(ValueError, match="session_idle_s"):
        ConsoleSettings.from_env({"YAK_CONSOLE_SESSION_IDLE_S": "0"})
