"""``MemberConnections``: which member a store uses, when it moves on, which calls go again.

Fake members and gRPC errors, no etcd: the decisions alone."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from yak.errors import MetadataStoreError
from yak.metadata.etcd_endpoints import EtcdEndpoint
from yak.metadata.etcd_members import MemberConnections


class FakeMember:
    def __init__(self, endpoint: EtcdEndpoint) -> None:
        self.endpoint = endpoint
        self.ready = False
        self.closed = False
        self.logins = 0

    async def authenticate(self, username: str, password: str, timeout_s: float) -> None:
        self.logins += 1

    async def close(self) -> None:
        self.closed = True


def _error(code: grpc.StatusCode, details: str = "") -> AioRpcError:
    return AioRpcError(code, Metadata(), Metadata(), details=details)


def _members(count: int = 3, user: str | None = None) -> MemberConnections[FakeMember]:
    endpoints = [EtcdEndpoint("127.0.0.1", 2379 + i) for i in range(count)]
    password = "pw" if user else None
    return MemberConnections(endpoints, FakeMember, username=user, password=password, timeout_s=1)


async def test_a_read_moves_on_and_is_sent_again_to_the_next_member() -> None:
    members = _members()
    seen: list[int] = []

    async def send(member: FakeMember) -> str:
        seen.append(member.endpoint.port)
        if member.endpoint.port == 2379:
            raise _error(grpc.StatusCode.UNAVAILABLE, "Socket closed")
        return "ok"

    assert await members.call(send, idempotent=True) == "ok"
    assert seen == [2379, 2380]
    assert members.endpoint.port == 2380
    await members.aclose()


async def test_a_write_that_may_have_landed_is_not_sent_again_but_the_next_call_moves() -> None:
    members = _members()
    calls = 0

    async def send(member: FakeMember) -> None:
        nonlocal calls
        calls += 1
        raise _error(grpc.StatusCode.UNAVAILABLE, "Socket closed")

    with pytest.raises(AioRpcError):
        await members.call(send, idempotent=False)
    assert calls == 1
    assert members.endpoint.port == 2380  # the caller's retry goes to the next member
    await members.aclose()


async def test_a_write_never_sent_is_sent_again() -> None:
    members = _members()
    refused = "failed to connect to all addresses; last error: Connection refused"
    ports: list[int] = []

    async def send(member: FakeMember) -> str:
        ports.append(member.endpoint.port)
        if len(ports) == 1:
            raise _error(grpc.StatusCode.UNAVAILABLE, refused)
        return "written"

    assert await members.call(send, idempotent=False) == "written"
    assert ports == [2379, 2380]
    await members.aclose()


async def test_many_calls_failing_together_move_on_once() -> None:
    members = _members()
    first = members.current()
    for _ in range(5):
        members.retry_after(first, _error(grpc.StatusCode.UNAVAILABLE), idempotent=True)
    assert members.endpoint.port == 2380
    await asyncio.sleep(0)  # the retired channel closes in the background
    assert first.closed
    await members.aclose()


async def test_each_member_is_tried_once_then_the_error_is_raised() -> None:
    members = _members()
    ports: list[int] = []

    async def send(member: FakeMember) -> None:
        ports.append(member.endpoint.port)
        raise _error(grpc.StatusCode.UNAVAILABLE, "Connection refused")

    with pytest.raises(AioRpcError):
        await members.call(send, idempotent=True)
    assert sorted(set(ports)) == [2379, 2380, 2381]
    assert len(ports) <= 4
    await members.aclose()


async def test_other_failures_neither_move_nor_repeat() -> None:
    members = _members()

    async def send(member: FakeMember) -> None:
        raise _error(grpc.StatusCode.PERMISSION_DENIED, "etcdserver: permission denied")

    with pytest.raises(AioRpcError):
        await members.call(send, idempotent=True)
    assert members.endpoint.port == 2379
    await members.aclose()


async def test_one_member_is_never_left() -> None:
    members = _members(count=1)
    first = members.current()
    assert not members.retry_after(first, _error(grpc.StatusCode.UNAVAILABLE), idempotent=True)
    assert members.current() is first
    await members.aclose()


async def test_an_expired_token_logs_in_again_on_the_same_member() -> None:
    members = _members(count=1, user="yak-broker")
    tokens: list[int] = []

    async def send(member: FakeMember) -> str:
        tokens.append(member.logins)
        if len(tokens) == 1:
            raise _error(grpc.StatusCode.UNAUTHENTICATED, "etcdserver: invalid auth token")
        return "ok"

    assert await members.call(send, idempotent=True) == "ok"
    assert tokens == [1, 2]
    await members.aclose()


async def test_a_call_cut_short_by_a_move_goes_again_if_it_may() -> None:
    members = _members()
    ports: list[int] = []

    async def send(member: FakeMember) -> str:
        ports.append(member.endpoint.port)
        if len(ports) == 1:
            members.move_on(member)  # another call found the member dead meanwhile
            raise asyncio.CancelledError  # what gRPC raises for a call on a closed channel
        return "ok"

    assert await members.call(send, idempotent=True) == "ok"
    assert ports == [2379, 2380]
    ports.clear()
    with pytest.raises(MetadataStoreError, match="cut short"):
        await members.call(send, idempotent=False)
    await members.aclose()


async def test_a_closed_store_refuses_calls() -> None:
    members = _members()
    await members.aclose()
    with pytest.raises(MetadataStoreError, match="closed"):
        members.current()
