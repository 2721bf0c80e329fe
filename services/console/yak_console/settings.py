"""The console's settings: one frozen value, from CLI flags and ``YAK_*`` environment.

The console is a client of the public API like any user: it needs only a rest-proxy's URL
(``yak up`` passes its own proxy's).

=====================  ============================  ==========================================
setting                environment                   default
=====================  ============================  ==========================================
host / port            YAK_HOST / YAK_PORT           127.0.0.1 / 8080
api_url                YAK_API_URL                   http://127.0.0.1:8082 (a rest-proxy)
schema_registry_url    YAK_SCHEMA_REGISTRY_URL       none: the schema registry the Schemas
                                                     page reads (no page without one)
read_only              YAK_CONSOLE_READ_ONLY         false: no create, delete, edit, produce
                                                     or offset reset (forms hidden, 403)
allow_export           YAK_CONSOLE_EXPORT            true: the message browser's JSON/CSV export
sample_interval_ms     YAK_CONSOLE_SAMPLE_           2000: how often the cluster is sampled
                       INTERVAL_MS                   for rates, lag history and the banner
                                                     while a page or event stream looks
sample_idle_           YAK_CONSOLE_SAMPLE_IDLE_      30000: how often when nobody has looked
interval_ms            INTERVAL_MS                   for a minute (never more often than the
                                                     interval; ``sampler.py``)
history                YAK_CONSOLE_HISTORY           300 samples kept (10 min at 2 s)
browse_max_scan        YAK_CONSOLE_BROWSE_MAX_SCAN   10000: records one browser page may scan
                                                     looking for matches
request_timeout_ms     —                             10000: one call to the public API
security               YAK_SECURITY                  off: on = login required (``auth/``)
api_key                YAK_CONSOLE_API_KEY           none: the console's own key, for the
                                                     sampler's cluster-wide picture
roles                  YAK_CONSOLE_ROLES             none: ``User:alice=admin,User:bob=operator``
default_role           YAK_CONSOLE_DEFAULT_ROLE      viewer: any other authenticated user
session_idle_s         YAK_CONSOLE_SESSION_IDLE_S    1800: a session ends after this idle time
session_max_s          YAK_CONSOLE_SESSION_MAX_S     43200: and this long after login at most
secure_cookies         YAK_CONSOLE_SECURE_COOKIES    auto: ``Secure`` when served over https
session_secret         YAK_CONSOLE_SESSION_SECRET    random per process: signs session cookies
login_max_failures     YAK_CONSOLE_LOGIN_MAX_        5 failed logins for one user name or from
                       FAILURES                      one address (0: no limit) within
login_window_s         YAK_CONSOLE_LOGIN_WINDOW_S    300 s: then 429 until the window passes
=====================  ============================  ==========================================
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from yak_console.auth.roles import Role, parse_roles

__all__ = ["ConsoleSettings"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _flag(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{name} must be true or false, got {text!r}")


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """Everything a console process needs to know at start."""

    host: str = "127.0.0.1"
    port: int = 8080
    api_url: str = "http://127.0.0.1:8082"
    schema_registry_url: str | None = None
    read_only: bool = False
    allow_export: bool = True
    sample_interval_ms: int = 2_000
    sample_idle_interval_ms: int = 30_000
    history: int = 300
    browse_max_scan: int = 10_000
    request_timeout_ms: int = 10_000
    security: bool = False
    api_key: str | None = field(default=None, repr=False)
    roles: Mapping[str, Role] = field(default_factory=dict)
    default_role: Role = Role.VIEWER
    session_idle_s: int = 1_800
    session_max_s: int = 43_200
    secure_cookies: bool | None = None
    session_secret: bytes = field(
        default_factory=lambda: secrets.token_bytes(32), repr=False, compare=False
    )
    login_max_failures: int = 5
    login_window_s: int = 300

    def __post_init__(self) -> None:
        if not self.api_url.startswith(("http://", "https://")):
            raise ValueError(f"api_url must be an http(s) URL, got {self.api_url!r}")
        registry = self.schema_registry_url
        if registry is not None and not registry.startswith(("http://", "https://")):
            raise ValueError(f"schema_registry_url must be an http(s) URL, got {registry!r}")
        if self.sample_interval_ms < 100:
            raise ValueError("sample_interval_ms must be at least 100")
        if self.sample_idle_interval_ms < 100:
            raise ValueError("sample_idle_interval_ms must be at least 100")
        if self.history < 2:
            raise ValueError("history must keep at least 2 samples")
        if self.browse_max_scan < 1:
            raise ValueError("browse_max_scan must be positive")
        if not 0 < self.session_idle_s <= self.session_max_s:
            raise ValueError("need 0 < session_idle_s <= session_max_s")
        if self.login_max_failures < 0 or self.login_window_s < 1:
            raise ValueError("need login_max_failures >= 0 and login_window_s >= 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ConsoleSettings:
        """Defaults, then ``YAK_*`` variables, then ``overrides`` (CLI flags)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        if "YAK_API_URL" in env:
            values["api_url"] = env["YAK_API_URL"].rstrip("/")
        if env.get("YAK_SCHEMA_REGISTRY_URL"):
            values["schema_registry_url"] = env["YAK_SCHEMA_REGISTRY_URL"].rstrip("/")
        if "YAK_CONSOLE_READ_ONLY" in env:
            values["read_only"] = _flag("YAK_CONSOLE_READ_ONLY", env["YAK_CONSOLE_READ_ONLY"])
        if "YAK_CONSOLE_EXPORT" in env:
            values["allow_export"] = _flag("YAK_CONSOLE_EXPORT", env["YAK_CONSOLE_EXPORT"])
        for name, var in (
            ("sample_interval_ms", "YAK_CONSOLE_SAMPLE_INTERVAL_MS"),
            ("sample_idle_interval_ms", "YAK_CONSOLE_SAMPLE_IDLE_INTERVAL_MS"),
            ("history", "YAK_CONSOLE_HISTORY"),
            ("browse_max_scan", "YAK_CONSOLE_BROWSE_MAX_SCAN"),
            ("session_idle_s", "YAK_CONSOLE_SESSION_IDLE_S"),
            ("session_max_s", "YAK_CONSOLE_SESSION_MAX_S"),
            ("login_max_failures", "YAK_CONSOLE_LOGIN_MAX_FAILURES"),
            ("login_window_s", "YAK_CONSOLE_LOGIN_WINDOW_S"),
        ):
            if var in env:
                values[name] = int(env[var])
        values.update(_security(env))
        return replace(cls(**values), **overrides)


def _security(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if "YAK_SECURITY" in env:
        values["security"] = _flag("YAK_SECURITY", env["YAK_SECURITY"])
    if env.get("YAK_CONSOLE_API_KEY"):
        values["api_key"] = env["YAK_CONSOLE_API_KEY"]
    if "YAK_CONSOLE_ROLES" in env:
        values["roles"] = parse_roles(env["YAK_CONSOLE_ROLES"])
    if "YAK_CONSOLE_DEFAULT_ROLE" in env:
        values["default_role"] = Role(env["YAK_CONSOLE_DEFAULT_ROLE"].strip().lower())
    if env.get("YAK_CONSOLE_SECURE_COOKIES", "auto").strip().lower() != "auto":
        secure = env["YAK_CONSOLE_SECURE_COOKIES"]
        values["secure_cookies"] = _flag("YAK_CONSOLE_SECURE_COOKIES", secure)
    if env.get("YAK_CONSOLE_SESSION_SECRET"):
        values["session_secret"] = env["YAK_CONSOLE_SESSION_SECRET"].encode()
    return values
