"""TLS on a service's listener, and the client certificate's subject in each request's scope.

``ServerTls`` is read from the environment by every service's ``main`` (``ServerTls.from_env``)
and handed to ``yak.web.serve.serve``, which passes it to uvicorn's ``ssl_*`` options:

======================  ==================================================================
environment             meaning
======================  ==================================================================
YAK_TLS_CERT            PEM certificate (chain) of the listener; TLS is on when it is set
YAK_TLS_KEY             PEM private key of that certificate
YAK_TLS_CA              PEM CA bundle that client certificates must chain to
YAK_TLS_CLIENT_AUTH     ``none`` (default), ``optional`` or ``required`` client certificate
======================  ==================================================================

uvicorn does not put the peer certificate into the ASGI scope. When client certificates are
asked for, ``serve`` runs ``PeerCertProtocol``: the HTTP protocol every service runs anyway
(``yak.web.header_timeout``), which on ``connection_made`` (called after the TLS handshake)
copies the *verified* peer certificate's subject common name into the connection's copy of
the lifespan state, which uvicorn copies into every request's ``scope["state"]``.
``tls_peer_cn(scope)`` reads it back. Only a certificate the CA bundle verified is ever seen:
``getpeercert()`` returns nothing for a connection without one.
"""

from __future__ import annotations

import asyncio
import enum
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import Scope

from yak.web.header_timeout import HeaderTimeoutProtocol

__all__ = ["ClientAuth", "PeerCertProtocol", "ServerTls", "peer_common_name", "tls_peer_cn"]

#: The key of ``scope["state"]`` holding the verified client certificate's common name.
PEER_CN_STATE_KEY = "yak.tls_peer_cn"


class ClientAuth(enum.StrEnum):
    """Whether the listener asks TLS clients for a certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRED = "required"

    @property
    def cert_reqs(self) -> ssl.VerifyMode:
        return {
            ClientAuth.NONE: ssl.CERT_NONE,
            ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
            ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
        }[self]


@dataclass(frozen=True, slots=True)
class ServerTls:
    """A listener's certificate, key, and client-certificate policy."""

    cert_file: str
    key_file: str
    ca_file: str | None = None
    client_auth: ClientAuth = ClientAuth.NONE

    def __post_init__(self) -> None:
        if self.client_auth is not ClientAuth.NONE and not self.ca_file:
            raise ValueError(
                f"YAK_TLS_CLIENT_AUTH={self.client_auth} needs YAK_TLS_CA "
                "(the CA that client certificates must chain to)"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerTls | None:
        """The listener's TLS from ``YAK_TLS_*``; None (plain HTTP) without ``YAK_TLS_CERT``."""
        env = os.environ if env is None else env
        cert = env.get("YAK_TLS_CERT")
        if not cert:
            return None
        key = env.get("YAK_TLS_KEY")
        if not key:
            raise ValueError("YAK_TLS_CERT is set but YAK_TLS_KEY is not")
        try:
            client_auth = ClientAuth(env.get("YAK_TLS_CLIENT_AUTH", "none").lower() or "none")
        except ValueError:
            raise ValueError(
                "YAK_TLS_CLIENT_AUTH must be none, optional or required, "
                f"got {env['YAK_TLS_CLIENT_AUTH']!r}"
            ) from None
        return cls(cert, key, env.get("YAK_TLS_CA") or None, client_auth)

    def ssl_context(self) -> ssl.SSLContext:
        """A server context with the same certificate and client policy, for listeners
        that are not uvicorn's (the broker's internal listener)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.ca_file:
            context.load_verify_locations(self.ca_file)
        context.verify_mode = self.client_auth.cert_reqs
        return context

    def uvicorn_options(self) -> dict[str, Any]:
        """Keyword arguments of ``uvicorn.Config``."""
        options: dict[str, Any] = {
            "ssl_certfile": self.cert_file,
            "ssl_keyfile": self.key_file,
            "ssl_cert_reqs": self.client_auth.cert_reqs,
        }
        if self.ca_file:
            options["ssl_ca_certs"] = self.ca_file
        if self.client_auth is not ClientAuth.NONE:
            options["http"] = PeerCertProtocol
        return options


def peer_common_name(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The subject common name of a connection's verified peer certificate, if any."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    subject: Any = cert.get("subject", ())
    for rdn in subject:
        for name, value in rdn:
            if name == "commonName" and isinstance(value, str):
                return value
    return None


class PeerCertProtocol(HeaderTimeoutProtocol):
    """The services' HTTP protocol, remembering the client certificate's common name."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        common_name = peer_common_name(transport.get_extra_info("ssl_object"))
        if common_name is not None:
            # A per-connection copy: the lifespan state itself is shared by every connection.
            self.app_state = {**self.app_state, PEER_CN_STATE_KEY: common_name}


def tls_peer_cn(scope: Scope) -> str | None:
    """The verified client certificate's common name of this request, if it came with one."""
    state = scope.get("state")
    if not isinstance(state, dict):
        return None
    value = state.get(PEER_CN_STATE_KEY)
    return value if isinstance(value, str) else None
