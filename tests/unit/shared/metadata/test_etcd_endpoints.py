"""``YAK_ETCD`` as one or several members, and which gRPC failures move a store on."""

from __future__ import annotations

import grpc
import pytest

from yak.metadata.etcd_endpoints import (
    EtcdEndpoint,
    member_unreachable,
    parse_etcd_urls,
    safe_to_retry,
    token_expired,
)
from yak.metadata.etcd_store import EtcdMetadataStore


def test_one_or_several_members() -> None:
    assert parse_etcd_urls("http://127.0.0.1:2379").endpoints == (EtcdEndpoint("127.0.0.1", 2379),)
    urls = parse_etcd_urls("http://etcd-0:2379, http://etcd-1:2379,http://etcd-2")
    assert [e.target for e in urls.endpoints] == ["etcd-0:2379", "etcd-1:2379", "etcd-2:2379"]
    assert not urls.tls
    assert parse_etcd_urls("localhost:2379").endpoints == (EtcdEndpoint("localhost", 2379),)
    assert parse_etcd_urls("http://[::1]:2379").endpoints[0].target == "[::1]:2379"


def test_tls_and_credentials_apply_to_every_member() -> None:
    urls = parse_etcd_urls("https://u:pw@a:1,https://b:2")
    assert (urls.tls, urls.username, urls.password) == (True, "u", "pw")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "give one URL or several"),
        ("http://a:1,,http://b:2", "give one URL or several"),
        ("http://a:1,https://b:2", "mix http and https"),
        ("grpc://a:1", "use http:// or https://"),
        ("http://a:99999", "Port out of range"),
        ("http://a:1/v3", "scheme://host:port only"),
        ("http://:2379", "has no host"),
        ("http://a:1,http://a:1", "a member twice"),
        ("http://u:p@a:1,http://v:q@b:2", "different credentials"),
    ],
)
def test_malformed_lists_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_etcd_urls(text)


def test_the_store_takes_every_member_and_starts_with_the_first() -> None:
    store = EtcdMetadataStore.from_url("http://a:1,http://b:2,http://c:3")
    assert [e.target for e in store.endpoints] == ["a:1", "b:2", "c:3"]
    assert (store.host, store.port) == ("a", 1)


def test_which_failures_move_on_and_which_are_sent_again() -> None:
    unavailable, deadline = grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED
    assert member_unreachable(unavailable)
    assert member_unreachable(deadline)
    assert not member_unreachable(grpc.StatusCode.PERMISSION_DENIED)
    assert safe_to_retry(unavailable, "Socket closed", idempotent=True)
    assert not safe_to_retry(unavailable, "Socket closed", idempotent=False)  # may have applied
    refused = "failed to connect to all addresses; last error: Connection refused"
    assert safe_to_retry(unavailable, refused, idempotent=False)  # never sent
    assert not safe_to_retry(grpc.StatusCode.FAILED_PRECONDITION, refused, idempotent=True)
    assert token_expired(grpc.StatusCode.UNAUTHENTICATED, "etcdserver: invalid auth token")
    assert not token_expired(grpc.StatusCode.UNAUTHENTICATED, "authentication failed")
