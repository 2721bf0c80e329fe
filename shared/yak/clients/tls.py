"""How Yak's clients reach ``https://`` services: the CA bundle and an optional client cert.

==========================  ===============================================================
environment                 meaning
==========================  ===============================================================
YAK_TLS_CA                  PEM CA bundle that servers' certificates must chain to (else
                            the system's and certifi's trusted roots)
YAK_TLS_CLIENT_CERT         PEM client certificate to present (mutual TLS), optional
YAK_TLS_CLIENT_KEY          its private key (default: in the certificate file)
==========================  ===============================================================

Services and the CLI build their clients from the environment (``ClientTls.from_env``); the
SDK takes ``verify=`` (a CA bundle path, an ``ssl.SSLContext``, or False) and ``cert=``.
Plain ``http://`` URLs ignore all of this. Without a CA of its own a client verifies with
``default_context()``: one context per process, built once — building one loads the whole
trust store (20 to 40 ms of CPU), which every new ``httpx.AsyncClient`` paid otherwise, on the
event loop, even to talk plain HTTP.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

import certifi

__all__ = ["ClientTls", "default_context", "ssl_context"]


@dataclass(frozen=True, slots=True)
class ClientTls:
    """A CA bundle to verify servers with and an optional client certificate."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClientTls:
        """``YAK_TLS_CA``, ``YAK_TLS_CLIENT_CERT`` and ``YAK_TLS_CLIENT_KEY``."""
        env = os.environ if env is None else env
        return cls(
            env.get("YAK_TLS_CA") or None,
            env.get("YAK_TLS_CLIENT_CERT") or None,
            env.get("YAK_TLS_CLIENT_KEY") or None,
        )

    @property
    def configured(self) -> bool:
        return self.ca_file is not None or self.cert_file is not None

    def ssl_context(self) -> ssl.SSLContext:
        """A client context: verifies the server (name and chain), presents the client cert."""
        return ssl_context(self.ca_file, self.cert_file, self.key_file)


def ssl_context(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext:
    """A verifying client context trusting ``ca_file`` (else the default roots)."""
    if ca_file is not None:
        context = ssl.create_default_context(cafile=ca_file)
    else:
        context = ssl.create_default_context(cafile=certifi.where())
    if cert_file is not None:
        context.load_cert_chain(cert_file, key_file)
    return context


@functools.cache
def default_context() -> ssl.SSLContext:
    """The process's verifying context with the default roots (certifi's), built on first use
    and shared by every client that has no CA of its own (an ``SSLContext`` may be shared)."""
    return ssl_context()
