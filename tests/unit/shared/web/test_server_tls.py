"""``ServerTls`` from the environment and the client certificate's CN in the scope."""

from __future__ import annotations

import ssl

import pytest

from yak.web.tls import PEER_CN_STATE_KEY, ClientAuth, PeerCertProtocol, ServerTls, tls_peer_cn


def test_no_certificate_means_plain_http() -> None:
    assert ServerTls.from_env({}) is None


def test_certificate_key_ca_and_client_auth_are_read() -> None:
    tls = ServerTls.from_env(
        {
            "YAK_TLS_CERT": "/c.pem",
            "YAK_TLS_KEY": "/k.pem",
            "YAK_TLS_CA": "/ca.pem",
            "YAK_TLS_CLIENT_AUTH": "Required",
        }
    )
    assert tls == ServerTls("/c.pem", "/k.pem", "/ca.pem", ClientAuth.REQUIRED)
    options = tls.uvicorn_options()
    assert options["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    assert options["ssl_ca_certs"] == "/ca.pem"
    assert options["http"] is PeerCertProtocol


def test_without_client_auth_uvicorn_keeps_its_own_protocol() -> None:
    tls = ServerTls.from_env({"YAK_TLS_CERT": "/c.pem", "YAK_TLS_KEY": "/k.pem"})
    assert tls is not None
    assert tls.uvicorn_options()["ssl_cert_reqs"] == ssl.CERT_NONE
    assert "http" not in tls.uvicorn_options()


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"YAK_TLS_CERT": "/c.pem"}, "YAK_TLS_KEY"),
        ({"YAK_TLS_CERT": "/c", "YAK_TLS_KEY": "/k", "YAK_TLS_CLIENT_AUTH": "x"}, "none, opt"),
        ({"YAK_TLS_CERT": "/c", "YAK_TLS_KEY": "/k", "YAK_TLS_CLIENT_AUTH": "optional"}, "CA"),
    ],
)
def test_incomplete_settings_are_refused(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ServerTls.from_env(env)


def test_the_peer_cn_is_read_from_the_request_state() -> None:
    assert tls_peer_cn({"type": "http", "state": {PEER_CN_STATE_KEY: "alice"}}) == "alice"
    assert tls_peer_cn({"type": "http", "state": {}}) is None
    assert tls_peer_cn({"type": "http"}) is None
