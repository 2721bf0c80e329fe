"""Client TLS: the default verifying context is built once per process and shared; a client
without a CA of its own verifies with it (and still checks names and chains)."""

from __future__ import annotations

import ssl

from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.clients.tls import ClientTls, default_context


def test_the_default_context_is_built_once_and_verifies() -> None:
    context = default_context()
    assert context is default_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


async def test_clients_without_a_ca_share_the_default_context() -> None:
    empty = ClientTls()
    broker = BrokerClient("http://127.0.0.1:1", tls=empty, data_port=2)
    admin = AdminClient("http://127.0.0.1:1", tls=empty)
    try:
        for client in (broker._http, admin._http):
            pool = client._transport._pool  # type: ignore[attr-defined]
            assert pool._ssl_context is default_context()
    finally:
        await broker.aclose()
        await admin.aclose()
