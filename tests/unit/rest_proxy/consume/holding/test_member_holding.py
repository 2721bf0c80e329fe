"""A proxy holding consumer instances in memory (``members.Members``) on the bench: no etcd on
the poll path, positions written behind (on the interval, with a commit, on release), a live
holder handing an instance over exactly, a dead one taken over from what etcd holds (the
records polled since its last write come again), and the watch keeping memory in step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.unit.rest_proxy.consume.bench import KS, Bench, granted, member, running_bench
from yak.errors import UnknownMemberIdError
from yak.metadata.models import CommittedOffset
from yak.types import TopicPartition
from yak_rest_proxy.consume.consumer import Consumers
from yak_rest_proxy.consume.holding.member_store import stored_positions

T0 = TopicPartition("t", 0)


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    async with running_bench() as running:
        await running.topic("t", 1)
        running.log.append("t", 0, *(f"r{i}" for i in range(10)))
        yield running


async def poll(proxy: Consumers, member_id: str = "m", max_bytes: int = 1 << 20) -> list[int]:
    polled = await proxy.poll("g", member_id, timeout_ms=0, max_bytes=max_bytes)
    return [record.offset for _, _, record in polled.records]


async def assigned(proxy: Consumers, member_id: str = "m", **fields: object) -> None:
    await proxy.create("g", member(member_id, **fields), 30_000)
    await proxy.assign("g", member_id, [T0])


async def etcd_positions(
    bench: Bench, member_id: str = "m"
) -> tuple[dict[TopicPartition, int], str]:
    stored = stored_positions(await bench.store.get(KS.group_positions("g", member_id)))
    return dict(stored.positions), stored.holder


async def committed(bench: Bench, topic: str = "t", partition: int = 0) -> int | None:
    kv = await bench.store.get(KS.committed_offset("g", topic, partition))
    return None if kv is None else CommittedOffset.decode(kv.value).offset


async def test_a_steady_state_poll_makes_no_etcd_call(bench: Bench) -> None:
    proxy, store = await bench.proxy()
    await assigned(proxy)
    await bench.settle()  # the group's watch is live: until then, requests read etcd
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]  # positions: read once
    calls = store.calls
    assert await poll(proxy, max_bytes=6) == [3, 4, 5]
    assert await poll(proxy, max_bytes=6) == [6, 7, 8]
    assert store.calls == calls


async def test_positions_are_written_behind_on_the_interval(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, auto_commit=True)
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    assert await poll(proxy, max_bytes=6) == [3, 4, 5]
    assert (await etcd_positions(bench))[0] == {}
    bench.clock.advance(1.0)
    await bench.settle()
    assert await etcd_positions(bench) == ({T0: 6}, "proxy-0")
    assert await committed(bench) == 3  # the auto-commit of what the previous poll reached


async def test_a_commit_is_written_through_with_the_positions(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, auto_commit=False)
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    await proxy.commit("g", "m", {T0: 1})
    assert await committed(bench) == 2
    assert (await etcd_positions(bench))[0] == {T0: 3}


async def test_positions_a_commit_just_stored_wait_for_the_next_round(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, auto_commit=False)
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    bench.clock.advance(0.6)
    await bench.settle()
    await proxy.commit("g", "m", {T0: 3})  # stores the positions too: {T0: 3}
    assert await poll(proxy, max_bytes=6) == [3, 4, 5]
    bench.clock.advance(0.4)  # the round at 1.0 s, 0.4 s after the commit's write
    await bench.settle()
    assert (await etcd_positions(bench))[0] == {T0: 3}
    bench.clock.advance(1.0)  # the round at 2.0 s
    await bench.settle()
    assert (await etcd_positions(bench))[0] == {T0: 6}


async def test_write_behind_alone_writes_every_round(bench: Bench) -> None:
    proxy, store = await bench.proxy()
    await assigned(proxy, auto_commit=False)
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    store.txn_s = 0.25  # the round's write ends at 1.25 s
    bench.clock.advance(1.0)
    await bench.settle()
    assert (await etcd_positions(bench))[0] == {T0: 3}
    assert await poll(proxy, max_bytes=6) == [3, 4, 5]
    bench.clock.advance(0.75)  # the round at 2.0 s: its own write 0.75 s ago holds nothing back
    await bench.settle()
    assert (await etcd_positions(bench))[0] == {T0: 6}


async def test_a_live_holder_hands_the_instance_over_exactly(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await assigned(first)
    assert await poll(first, max_bytes=6) == [0, 1, 2]
    assert await poll(second, max_bytes=6) == [3, 4, 5]  # asked, handed over: no wait
    assert await poll(first, max_bytes=6) == [6, 7, 8]  # and back
    assert (await etcd_positions(bench))[1] == "proxy-0"


async def test_a_dead_holder_is_taken_over_from_what_etcd_holds(bench: Bench) -> None:
    (first, first_store), (second, _) = await bench.proxy(), await bench.proxy()
    await assigned(first, auto_commit=False)
    assert await poll(first, max_bytes=6) == [0, 1, 2]
    bench.clock.advance(1.0)  # written behind: 3
    await bench.settle()
    assert await poll(first, max_bytes=6) == [3, 4, 5]
    first_store.cut = True  # the first proxy crashes before its next write

    taking_over = asyncio.ensure_future(poll(second, max_bytes=6))
    await bench.settle()
    assert not taking_over.done()  # asked, waiting for an answer
    bench.clock.advance(2.0)  # the handoff timeout
    assert await taking_over == [3, 4, 5]  # again: what was polled since the last write
    assert await poll(second, max_bytes=6) == [6, 7, 8]


async def test_a_stopping_proxy_lets_its_instances_go(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await assigned(first)
    assert await poll(first, max_bytes=6) == [0, 1, 2]
    await first.stop()
    assert await etcd_positions(bench) == ({T0: 3}, "")
    assert await poll(second, max_bytes=6) == [3, 4, 5]  # claimed at once


async def test_an_instance_deleted_through_another_proxy_is_dropped(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await assigned(first)
    await poll(first)
    await second.delete("g", "m")
    await bench.settle()
    with pytest.raises(UnknownMemberIdError):
        await poll(first)


async def test_the_lease_is_kept_alive_while_used_and_expires_when_idle(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await proxy.create("g", member("m"), 2_000)
    await proxy.assign("g", "m", [T0])
    for _ in range(10):  # 5 s of use: refreshed in the background
        await poll(proxy)
        bench.clock.advance(0.5)
        await bench.settle()
    await proxy.instance("g", "m")
    bench.clock.advance(5.0)
    await bench.settle()
    with pytest.raises(UnknownMemberIdError):
        await proxy.instance("g", "m")


async def test_an_idle_instance_is_let_go_and_written(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await proxy.create("g", member("m"), 300_000)
    await proxy.assign("g", "m", [T0])
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    for _ in range(61):
        bench.clock.advance(1.0)
        await bench.settle()
    assert await etcd_positions(bench) == ({T0: 3}, "")
    assert await poll(proxy, max_bytes=6) == [3, 4, 5]  # held again from etcd


async def test_write_through_when_the_interval_is_zero(bench: Bench) -> None:
    proxy, _ = await bench.proxy(flush_interval_ms=0)
    await assigned(proxy)
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    assert (await etcd_positions(bench))[0] == {T0: 3}


async def test_a_rebalance_is_written_at_once(bench: Bench) -> None:
    await bench.topic("u", 2)
    bench.log.append("u", 0, "a0", "a1", "a2")
    bench.log.append("u", 1, "b0", "b1", "b2")
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await first.create("g", member("m1", auto_commit=True), 30_000)
    await first.subscribe("g", "m1", ["u"], None)
    await bench.state_where("g", lambda s: len(granted(s, "m1")) == 2)
    assert len(await poll(first, "m1")) == 6  # positions in memory only
    assert (await etcd_positions(bench, "m1"))[0] == {}

    await second.create("g", member("m2", auto_commit=True), 30_000)
    await second.subscribe("g", "m2", ["u"], None)
    await bench.state_where("g", lambda s: "m2" in s.target_assignment)
    assert await poll(first, "m1") == []  # releases one partition: written with its commit
    state = await bench.state_where("g", lambda s: bool(granted(s, "m2")))
    ((topic, moved),), (kept,) = granted(state, "m2"), granted(state, "m1")
    assert await committed(bench, topic, moved) == 3
    assert (await etcd_positions(bench, "m1"))[0] == {kept: 3}
    assert await poll(second, "m2") == []  # from the committed offset: nothing twice


async def test_an_expired_instance_is_created_again_under_its_name(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await proxy.create("g", member("m", auto_commit=False), 1_000)
    await proxy.assign("g", "m", [T0])
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]
    bench.clock.advance(5.0)  # expired; the watch has not told the proxy yet
    await proxy.create("g", member("m", auto_commit=False), 30_000)  # as the SDK re-joins
    await proxy.assign("g", "m", [T0])
    await bench.settle()  # the old record's deletion arrives: it is not the new one's
    assert await poll(proxy, max_bytes=6) == [0, 1, 2]  # nothing was committed: from the start
