"""The etcd endpoints a service is given, and which gRPC failures mean "try another member".

``YAK_ETCD`` (and every ``--etcd`` flag) names one etcd member or several, comma-separated::

    http://127.0.0.1:2379
    http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379
    https://user:pw@10.0.0.1:2379,https://10.0.0.2:2379

Every member of one list speaks the same scheme (``http`` or ``https``; none means ``http``)
and carries the same credentials, if any: they are one cluster reached through several doors.
``parse_etcd_urls`` refuses anything else with a message naming the faulty entry, so a typo
is a startup error rather than a member that is silently never used.

The store talks to one member at a time and moves to the next when the member stops
answering (``member_unreachable``); a failed call is tried again on the next member when that
cannot apply a write twice (``safe_to_retry``). Both are decisions on a gRPC status alone and
are kept here, apart from the adapter, so they can be read and tested on their own. Why not
gRPC's own multi-address channel (``ipv4:a,b,c`` with ``round_robin``): it takes IP
addresses only, not the DNS names compose gives its members, and it cannot tell a watch to
resume from its last revision on the member it switched to.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc

__all__ = [
    "EtcdEndpoint",
    "EtcdUrls",
    "member_unreachable",
    "parse_etcd_urls",
    "safe_to_retry",
    "token_expired",
]


@dataclass(frozen=True, slots=True)
class EtcdEndpoint:
    """One member's client address."""

    host: str
    port: int

    @property
    def target(self) -> str:
        """gRPC's target (``[v6]:port`` for an IPv6 literal)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class EtcdUrls:
    """A parsed ``YAK_ETCD``: the members, TLS or not, and the credentials in the URLs."""

    endpoints: tuple[EtcdEndpoint, ...]
    tls: bool = False
    username: str | None = None
    password: str | None = None


def _entry(text: str) -> tuple[str, EtcdEndpoint, str | None, str | None]:
    parts = urlsplit(text if "//" in text else f"//{text}")
    scheme = parts.scheme or "http"
    if scheme not in ("http", "https"):
        raise ValueError(f"etcd endpoint {text!r}: use http:// or https://, not {scheme}://")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"etcd endpoint {text!r}: give scheme://host:port only")
    try:
        port = parts.port or 2379
    except ValueError as exc:  # urlsplit's own message: "Port out of range 0-65535"
        raise ValueError(f"etcd endpoint {text!r}: {exc}") from exc
    if not parts.hostname:
        raise ValueError(f"etcd endpoint {text!r} has no host")
    return scheme, EtcdEndpoint(parts.hostname, port), parts.username, parts.password


def parse_etcd_urls(text: str) -> EtcdUrls:
    """``http://a:2379,http://b:2379`` as ``EtcdUrls``; ``ValueError`` says what is wrong."""
    entries = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in entries):
        raise ValueError(
            f"etcd endpoints {text!r}: give one URL or several separated by commas, "
            "e.g. http://etcd-0:2379,http://etcd-1:2379"
        )
    parsed = [_entry(item) for item in entries]
    schemes = {scheme for scheme, *_ in parsed}
    if len(schemes) > 1:
        raise ValueError(f"etcd endpoints {text!r} mix http and https: use one scheme for all")
    credentials = {(user, password) for _, _, user, password in parsed if user or password}
    if len(credentials) > 1:
        raise ValueError(f"etcd endpoints {text!r} carry different credentials: use one user")
    endpoints = tuple(endpoint for _, endpoint, *_ in parsed)
    if len(set(endpoints)) < len(endpoints):
        raise ValueError(f"etcd endpoints {text!r} name a member twice")
    user, password = credentials.pop() if credentials else (None, None)
    return EtcdUrls(endpoints, schemes.pop() == "https", user, password)


#: Codes that say the member did not serve the call: down, unreachable, without a leader
#: ("etcdserver: no leader", what a watch with ``hasleader`` gets on an isolated member), or
#: too slow to answer (a paused or partitioned member never answers at all).
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

#: gRPC's words for a call that never left the client: no connection could be made.
_NOT_SENT = ("failed to connect to all addresses", "connection refused", "dns resolution failed")


def member_unreachable(code: grpc.StatusCode | None) -> bool:
    """Whether a failure with ``code`` is a reason to move to the next member."""
    return code in _UNREACHABLE


def safe_to_retry(code: grpc.StatusCode | None, details: str, *, idempotent: bool) -> bool:
    """Whether a call that failed so may be sent again to another member.

    Reads, lease keep-alives and plain puts and deletes give the same end state when applied
    twice; a transaction that writes may not (its compares ran against the first outcome), so
    it is tried again only when gRPC says it was never sent — as etcd's own Go client decides.
    """
    if not member_unreachable(code):
        return False
    return idempotent or any(words in details.lower() for words in _NOT_SENT)


def token_expired(code: grpc.StatusCode | None, details: str) -> bool:
    """etcd forgot the auth token (simple tokens expire when idle): authenticate again."""
    return code == grpc.StatusCode.UNAUTHENTICATED and "invalid auth token" in details
