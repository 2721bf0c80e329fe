"""A member's poll with a record filter, through ``Consumers`` on the bench (in-memory etcd,
fake clock, the real group coordinator, a fake log that filters as the reader does): only the
matching records are handed out, the position moves past the dropped ones, commits (explicit
and automatic) cover them, and a filtered poll is never raw."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.unit.rest_proxy.consume.bench import Bench, granted, member, running_bench
from yak.errors import InvalidRequestError
from yak.filters import compile_filter
from yak.types import TopicPartition
from yak_rest_proxy.consume.consumer import Consumers

T0 = TopicPartition("t", 0)
EVEN = compile_filter('value in ["0", "2", "4", "6", "8"]')


@pytest.fixture
async def bench() -> AsyncIterator[Bench]:
    async with running_bench() as running:
        await running.topic("t", 1)
        yield running


async def owning(bench: Bench, proxy: Consumers, **fields: object) -> None:
    await proxy.create("g", member("m1", **fields), 30_000)
    await proxy.subscribe("g", "m1", ["t"], None)
    await bench.state_where("g", lambda s: granted(s, "m1") == {T0})


async def values(proxy: Consumers, **options: object) -> list[str]:
    poll = await proxy.poll("g", "m1", timeout_ms=0, max_bytes=1 << 20, **options)  # type: ignore[arg-type]
    return [record.value.decode() for _, _, record in poll.records if record.value is not None]


async def test_dropped_records_are_passed_and_committed(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await owning(bench, proxy, auto_commit=False)
    bench.log.append("t", 0, *"0123457")
    assert await values(proxy, record_filter=EVEN) == ["0", "2", "4"]
    assert bench.log.filters == [EVEN]
    state = await proxy.commit("g", "m1", None)
    assert state.positions[T0] == 7  # past 5 and 7, which the filter dropped
    assert (await proxy.committed("g", "m1", [T0]))[T0].offset == 7
    bench.log.append("t", 0, "8")
    assert await values(proxy) == ["8"]


async def test_a_poll_that_matched_nothing_moves_the_position(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await owning(bench, proxy, auto_commit=True)
    bench.log.append("t", 0, "1", "3", "5")
    assert await values(proxy, record_filter=EVEN) == []
    assert (await proxy.instance("g", "m1")).positions[T0] == 3
    assert await values(proxy) == []
    # What auto-commit writes behind: the position the previous poll reached.
    assert (await proxy.instance("g", "m1")).processed[T0] == 3


async def test_a_filtered_poll_cannot_be_raw(bench: Bench) -> None:
    proxy, _ = await bench.proxy()
    await owning(bench, proxy)
    with pytest.raises(InvalidRequestError, match="raw"):
        await values(proxy, raw=True, record_filter=EVEN)
