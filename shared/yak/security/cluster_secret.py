"""The cluster secret: what services show each other on the internal plane.

Brokers' data plane and JSON API and the coordinators' service-to-service endpoints refuse a
caller that does not send the secret in the ``X-Yak-Cluster-Secret`` header, when one is
configured. Every process of a cluster reads the same secret from its environment:
``YAK_CLUSTER_SECRET`` (the value) or ``YAK_CLUSTER_SECRET_FILE`` (a file holding it; the
surrounding whitespace is dropped). Neither set: no secret, the internal plane is open (the
default, for local development). The comparison is constant-time (``hmac.compare_digest``).

A service that acts for an end user (a broker's Kafka listener asking the coordinator's admin
API for a SASL principal) sends the secret with ``Yak-On-Behalf-Of: User:<name>``
(``ON_BEHALF_OF_HEADER``); the coordinator honours that header only with the secret and without
a user credential (docs/security.md).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "CLUSTER_SECRET_HEADER",
    "MIN_SECRET_LENGTH",
    "ON_BEHALF_OF_HEADER",
    "load_cluster_secret",
    "new_cluster_secret",
    "secret_matches",
]

#: The request header carrying the secret (lower case, as ASGI scopes hold header names).
CLUSTER_SECRET_HEADER = "x-yak-cluster-secret"
#: The principal a cluster service acts for (``User:<name>``; only with the secret).
ON_BEHALF_OF_HEADER = "yak-on-behalf-of"
#: A shorter secret is refused: it would be guessable.
MIN_SECRET_LENGTH = 16


def load_cluster_secret(env: Mapping[str, str] | None = None) -> str | None:
    """The configured secret (``os.environ`` by default), or None when none is configured.

    Raises ValueError for a secret shorter than ``MIN_SECRET_LENGTH``, one that cannot go in
    an HTTP header, both variables set, or an unreadable file.
    """
    env = os.environ if env is None else env
    value = env.get("YAK_CLUSTER_SECRET") or None
    path = env.get("YAK_CLUSTER_SECRET_FILE") or None
    if value is not None and path is not None:
        raise ValueError("set YAK_CLUSTER_SECRET or YAK_CLUSTER_SECRET_FILE, not both")
    if path is not None:
        try:
            value = Path(path).read_text().strip()
        except OSError as exc:
            raise ValueError(f"cannot read YAK_CLUSTER_SECRET_FILE {path}: {exc}") from exc
    if value is None:
        return None
    if len(value) < MIN_SECRET_LENGTH:
        raise ValueError(f"the cluster secret must be at least {MIN_SECRET_LENGTH} characters")
    if not value.isascii() or not value.isprintable() or value != value.strip():
        raise ValueError("the cluster secret must be printable ASCII without outer spaces")
    return value


def new_cluster_secret() -> str:
    """A fresh random secret (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def secret_matches(expected: bytes, given: bytes | None) -> bool:
    """Whether ``given`` is the secret, in time independent of where they differ."""
    return given is not None and hmac.compare_digest(expected, given)
