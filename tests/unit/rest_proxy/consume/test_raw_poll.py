"""The binary poll's work (``Consumers.poll(raw=True)``) on the bench: whole batches out, the
same records as the JSON poll once the client skips what lies below its fetch offset,
positions at the end of the last whole batch, a batch cut short left for the next poll,
``max_bytes`` at batch granularity, paused partitions, a rebalance and another proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.unit.rest_proxy.consume.bench import Bench, granted, member, running_bench
from yak.sdk.records import ConsumerRecord, fetched_records
from yak.types import TopicPartition
from yak_rest_proxy.consume.consumer import Consumers, Poll

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
BATCHES = {0: [["a0", "a1", "a2"], ["a3"], ["a4", "a5"]], 1: [["b0", "b1"], ["b2", "b3", "b4"]]}


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    async with running_bench() as running:
        await running.topic("t", 2)
        for partition, batches in BATCHES.items():
            for values in batches:
                running.log.append("t", partition, *values)
        yield running


async def assigned(proxy: Consumers, group: str, member_id: str) -> None:
    await proxy.create(group, member(member_id, auto_commit=False), 30_000)
    await proxy.assign(group, member_id, [T0, T1])


async def raw(
    proxy: Consumers,
    member_id: str,
    max_bytes: int = 1 << 20,
    paused: frozenset[TopicPartition] = frozenset(),
) -> Poll:
    return await proxy.poll(
        "g", member_id, timeout_ms=0, max_bytes=max_bytes, raw=True, paused=paused
    )


def decoded(poll: Poll) -> list[ConsumerRecord]:
    return fetched_records(poll.batches)


async def drain(
    proxy: Consumers, group: str, *, use_raw: bool, max_bytes: int
) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    for _ in range(50):
        poll = await proxy.poll(group, "m", timeout_ms=0, max_bytes=max_bytes, raw=use_raw)
        if use_raw:
            got += decoded(poll)
            if not poll.batches:
                return got
        else:
            got += [ConsumerRecord(t, p, *r) for t, p, r in poll.records]
            if not poll.partitions:
                return got
    raise AssertionError("never drained")


@pytest.mark.parametrize("max_bytes", [1, 100, 200, 1 << 20])
async def test_the_raw_poll_hands_out_the_json_polls_records(bench: Bench, max_bytes: int) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, "json", "m")
    await assigned(proxy, "binary", "m")
    await proxy.seek("json", "m", {T0: 1})  # inside the first batch
    await proxy.seek("binary", "m", {T0: 1})
    as_json = await drain(proxy, "json", use_raw=False, max_bytes=1 << 20)
    as_batches = await drain(proxy, "binary", use_raw=True, max_bytes=max_bytes)
    assert sorted(as_batches) == sorted(as_json)
    assert len(as_json) == 10  # 11 records, the one below the seek skipped
    assert ("t", 0, 0) not in {(r.topic, r.partition, r.offset) for r in as_batches}
    assert as_batches[0].headers == (("n", b"1"),)


async def test_positions_move_to_the_end_of_the_last_whole_batch(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, "g", "m")
    await proxy.seek("g", "m", {T0: 1})
    poll = await raw(proxy, "m")
    (zero,) = [b for b in poll.batches if b.partition == 0]
    assert zero.fetch_offset == 1  # the first batch starts at 0: the client skips offset 0
    assert [r.offset for r in decoded(poll) if r.partition == 0] == [1, 2, 3, 4, 5]
    member_now = await proxy.instance("g", "m")
    assert (member_now.positions[T0], member_now.positions[T1]) == (6, 5)
    await proxy.commit("g", "m", None)
    committed = await proxy.committed("g", "m", [T0, T1])
    assert (committed[T0].offset, committed[T1].offset) == (6, 5)
    assert (await raw(proxy, "m")).batches == []  # drained


async def test_a_batch_cut_short_is_read_whole_next_time(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, "g", "m")
    bench.log.cut = 10  # the last batch of each partition's answer is cut short
    poll = await raw(proxy, "m")
    assert {(r.partition, r.offset) for r in decoded(poll)} == {
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)
    }  # fmt: skip
    positions = (await proxy.instance("g", "m")).positions
    assert (positions[T0], positions[T1]) == (4, 2)
    bench.log.cut = 0
    poll = await raw(proxy, "m")
    assert [(r.partition, r.offset) for r in decoded(poll)] == [
        (0, 4),
        (0, 5),
        (1, 2),
        (1, 3),
        (1, 4),
    ]


@pytest.mark.parametrize("max_bytes", [1, 150, 400])
async def test_max_bytes_counts_whole_batches_and_at_least_one(
    bench: Bench, max_bytes: int
) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, "g", "m")
    everything: list[ConsumerRecord] = []
    while (poll := await raw(proxy, "m", max_bytes=max_bytes)).batches:
        size = sum(len(b.batches) for b in poll.batches)
        assert size <= max_bytes or len(poll.batches) == 1, size
        if max_bytes == 1:  # one batch a poll, though larger than max_bytes
            assert len(decoded(poll)) in (1, 2, 3)
        everything += decoded(poll)
    assert sorted((r.partition, r.offset) for r in everything) == [
        *((0, o) for o in range(6)),
        *((1, o) for o in range(5)),
    ]


async def test_paused_partitions_are_not_read_and_keep_their_position(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await assigned(proxy, "g", "m")
    poll = await raw(proxy, "m", paused=frozenset({T1}))
    assert {b.partition for b in poll.batches} == {0}
    positions = (await proxy.instance("g", "m")).positions
    assert positions[T0] == 6
    assert T1 not in positions or positions[T1] == 0
    poll = await raw(proxy, "m")
    assert [r.offset for r in decoded(poll)] == [0, 1, 2, 3, 4]  # partition 1, from its start


async def test_a_rebalance_commits_the_raw_positions_and_another_member_goes_on(
    bench: Bench,
) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await first.create("g", member("m1"), 30_000)  # auto-commit
    await first.subscribe("g", "m1", ["t"], None)
    await bench.state_where("g", lambda s: granted(s, "m1") == {T0, T1})
    assert len(decoded(await raw(first, "m1"))) == 11
    await second.create("g", member("m2"), 30_000)
    await second.subscribe("g", "m2", ["t"], None)
    await bench.state_where("g", lambda s: "m2" in s.target_assignment)
    assert decoded(await raw(first, "m1")) == []  # releases what moves, committing it
    state = await bench.state_where("g", lambda s: bool(granted(s, "m2")))
    (moved,) = granted(state, "m2")
    bench.log.append(*moved, "new")
    assert [r.value for r in decoded(await raw(second, "m2"))] == [b"new"]  # nothing twice


async def test_another_proxy_continues_from_the_committed_raw_position(bench: Bench) -> None:
    (first, _), (second, _) = await bench.proxy(), await bench.proxy()
    await first.create("g", member("m1", auto_commit=False), 30_000)
    await first.assign("g", "m1", [T0])
    assert len(decoded(await raw(first, "m1"))) == 6
    await first.commit("g", "m1", None)
    bench.log.append("t", 0, "later")
    assert [r.value for r in decoded(await raw(second, "m1"))] == [b"later"]
