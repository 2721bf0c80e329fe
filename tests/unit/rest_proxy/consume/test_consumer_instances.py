"""Consumer instances through ``Consumers`` on the bench (in-memory etcd, fake clock, the real
group coordinator, a fake log): rebalances with auto-commit, fencing, expiry, and a second
proxy continuing from what etcd holds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.unit.rest_proxy.consume.bench import Bench, granted, member, running_bench
from yak.errors import FencedMemberEpochError, IllegalStateError, UnknownMemberIdError
from yak.types import TopicPartition
from yak_rest_proxy.consume.consumer import Consumers

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    async with running_bench() as running:
        await running.topic("t", 2)
        yield running


async def values(proxy: Consumers, member_id: str) -> list[str]:
    poll = await proxy.poll("g", member_id, timeout_ms=0, max_bytes=1 << 20)
    return [record.value.decode() for _, _, record in poll.records if record.value is not None]


async def joined(bench: Bench, proxy: Consumers, member_id: str, **fields: object) -> None:
    await proxy.create("g", member(member_id, **fields), 30_000)
    await proxy.subscribe("g", member_id, ["t"], None)


async def test_a_released_partition_is_committed_where_its_owner_stopped(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    bench.log.append("t", 0, "a0", "a1")
    bench.log.append("t", 1, "b0", "b1")
    await joined(bench, first, "m1")
    await bench.state_where("g", lambda s: granted(s, "m1") == {T0, T1})
    assert sorted(await values(first, "m1")) == ["a0", "a1", "b0", "b1"]

    await joined(bench, second, "m2")
    await bench.state_where("g", lambda s: "m2" in s.target_assignment)
    assert await values(first, "m1") == []  # releases what moves, committing its position
    state = await bench.state_where("g", lambda s: bool(granted(s, "m2")))
    assert granted(state, "m1").isdisjoint(granted(state, "m2"))
    (moved,) = granted(state, "m2")
    bench.log.append(*moved, "new")
    assert await values(second, "m2") == ["new"]  # from the committed offset: nothing twice


async def test_commits_are_fenced_by_ownership_and_epoch(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await joined(bench, first, "m1", auto_commit=False)
    await joined(bench, second, "m2", auto_commit=False)
    state = await bench.state_where(
        "g", lambda s: len(granted(s, "m1")) == 1 and len(granted(s, "m2")) == 1
    )
    await values(first, "m1")
    await values(second, "m2")
    (mine,), (theirs,) = granted(state, "m1"), granted(state, "m2")
    with pytest.raises(FencedMemberEpochError):
        await first.commit("g", "m1", {theirs: 0})
    epoch = (await first.instance("g", "m1")).epoch
    with pytest.raises(FencedMemberEpochError):
        await first.commit("g", "m1", {mine: 0}, member_epoch=epoch + 1)
    committed = await first.commit("g", "m1", {mine: 0}, member_epoch=epoch)
    assert committed.epoch == epoch
    assert (await first.committed("g", "m1", [mine]))[mine].offset == 1  # stored + 1


async def test_seek_needs_an_owned_partition(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await proxy.create("g", member("m1", auto_commit=False), 30_000)
    await proxy.assign("g", "m1", [T1])
    with pytest.raises(IllegalStateError):
        await proxy.seek("g", "m1", {T0: 0})
    bench.log.append("t", 1, "x", "y", "z")
    await proxy.seek("g", "m1", {T1: 2})
    assert await values(proxy, "m1") == ["z"]


async def test_an_idle_instance_expires(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await proxy.create("g", member("m1"), 1_000)
    await proxy.subscribe("g", "m1", ["t"], None)
    bench.clock.advance(5)
    with pytest.raises(UnknownMemberIdError):
        await proxy.instance("g", "m1")


async def test_another_proxy_continues_from_what_etcd_holds(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    bench.log.append("t", 0, "a0", "a1")
    await proxy_assigned(first, "m1")
    assert await values(first, "m1") == ["a0", "a1"]
    await first.commit("g", "m1", None)  # written through, positions with it
    bench.log.append("t", 0, "a2")
    assert await values(second, "m1") == ["a2"]


async def proxy_assigned(proxy: Consumers, member_id: str) -> None:
    await proxy.create("g", member(member_id, auto_commit=False), 30_000)
    await proxy.assign("g", member_id, [T0])
