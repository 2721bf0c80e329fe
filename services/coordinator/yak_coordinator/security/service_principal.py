"""Who an admin request acts for: a user's own credential, or a cluster service acting for one.

The admin guard's ``authenticate`` step (``yak.web.route_guard``), with these rules:

- no ``Yak-On-Behalf-Of`` header: the request's ``Authorization`` credential, as before
  (``Bearer`` API key or ``Basic``; a request with neither is 401 ``UNAUTHENTICATED``). The
  cluster secret alone is no principal: it proves a process of the cluster (or an operator's
  ``yak`` holding the secret file), not who is asking.
- ``Yak-On-Behalf-Of: User:<name>`` with the cluster secret (``is_cluster_peer``: checked by
  ``ClusterSecretMiddleware``) and no ``Authorization``: the request acts as that principal. A
  broker's Kafka listener sends it for the SASL principal it authenticated (SCRAM never
  reveals a password to forward); the route's ACLs are then checked for that principal and
  the audit lines name it, exactly as for a REST call — the broker checked the same ACLs
  first, so a Kafka admin request is authorized twice, never zero times.
- the header with a user credential, or without the secret (or on a coordinator that has no
  secret configured): 401 — a user cannot impersonate another, and nothing but the secret
  makes a caller a service. A malformed principal (not ``User:<name>``): 401.

``User:ANONYMOUS`` is a principal like any other here (a broker's listener without SASL
acts as it, as Kafka's authorizer sees a PLAINTEXT listener): only ACLs granting it (or
``User:*``) let it through. Pure checks of the request's headers; no state.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from yak.errors import AuthenticationError
from yak.security.acl import user_name
from yak.security.cache import SecurityCache
from yak.security.cluster_secret import ON_BEHALF_OF_HEADER
from yak.web.cluster_secret import is_cluster_peer
from yak.web.route_guard import header_principal

__all__ = ["ON_BEHALF_OF_HEADER", "admin_principal"]


async def admin_principal(cache: SecurityCache, conn: HTTPConnection) -> str:
    """The principal ``conn`` acts as (``AuthenticationError``: 401); see the module."""
    on_behalf_of = conn.headers.get(ON_BEHALF_OF_HEADER)
    if on_behalf_of is None:
        return await header_principal(cache, conn)
    if "authorization" in conn.headers:
        raise AuthenticationError(
            f"{ON_BEHALF_OF_HEADER} is for cluster services: a user credential acts only as "
            "its own user"
        )
    if not is_cluster_peer(conn.scope):
        raise AuthenticationError(
            f"{ON_BEHALF_OF_HEADER} needs the cluster secret (X-Yak-Cluster-Secret): only a "
            "cluster service may act for a principal"
        )
    try:
        user_name(on_behalf_of)
    except ValueError as exc:
        raise AuthenticationError(f"{ON_BEHALF_OF_HEADER}: {exc}") from None
    return on_behalf_of
