"""A seeded simulation: one consumer instance served through three proxies in random order —
polls, commits, appends, time passing, and a proxy crashing — checked against the contract.

- Without a crash, handoffs between live proxies are exact: every record exactly once, in
  order.
- With crashes, nothing is lost: every offset below the final position was delivered, and a
  takeover starts no earlier than what etcd held (re-delivery of at most what was polled since
  the last write behind).
- A committed offset is never beyond what was delivered.

The seed is in every failure message; re-run one with ``-k "seed-<n>"``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from tests.unit.rest_proxy.consume.bench import KS, Bench, ProxyStore, member, running_bench
from yak.metadata.models import CommittedOffset
from yak.types import TopicPartition
from yak_rest_proxy.consume.consumer import Consumers
from yak_rest_proxy.consume.holding.member_store import stored_positions

PARTITIONS = (TopicPartition("t", 0), TopicPartition("t", 1))
STEPS = 40
_T = TypeVar("_T")


async def finish(bench: Bench, work: Coroutine[Any, Any, _T]) -> _T:
    """Run ``work``, moving the fake time on while it waits (a handoff to a dead proxy)."""
    task = asyncio.ensure_future(work)
    for _ in range(100):
        await bench.settle()
        if task.done():
            return task.result()
        bench.clock.advance(0.5)
    raise AssertionError("a request never finished")


class Sim:
    def __init__(self, bench: Bench, seed: int) -> None:
        self.bench, self.seed, self.rng = bench, seed, random.Random(seed)
        self.proxies: list[tuple[Consumers, ProxyStore]] = []
        self.delivered: dict[TopicPartition, list[int]] = {tp: [] for tp in PARTITIONS}
        self.appended = 0
        #: Per crash: how many records each partition had delivered, and etcd's positions.
        self.crashes: list[tuple[dict[TopicPartition, int], dict[TopicPartition, int]]] = []

    def live(self) -> tuple[Consumers, ProxyStore]:
        return self.rng.choice([p for p in self.proxies if not p[1].cut])

    async def step(self) -> None:
        bench, rng = self.bench, self.rng
        roll = rng.random()
        proxy, _ = self.live()
        if roll < 0.45:
            polled = await finish(
                bench, proxy.poll("g", "m", timeout_ms=0, max_bytes=rng.choice((2, 6, 1 << 20)))
            )
            for topic, partition, record in polled.records:
                self.delivered[TopicPartition(topic, partition)].append(record.offset)
        elif roll < 0.6:
            await finish(bench, proxy.commit("g", "m", None))
        elif roll < 0.75:
            for topic, partition in PARTITIONS:
                bench.log.append(topic, partition, *(f"v{self.appended}" for _ in range(3)))
            self.appended += 1
        elif roll < 0.985:
            bench.clock.advance(rng.choice((0.3, 0.7, 1.2)))
            await bench.settle()
        elif sum(not p[1].cut for p in self.proxies) > 1:
            await self.crash()

    async def crash(self) -> None:
        _, store = self.live()
        store.cut = True
        kv = await self.bench.store.get(KS.group_positions("g", "m"))
        etcd = dict(stored_positions(kv).positions)
        self.crashes.append(({tp: len(self.delivered[tp]) for tp in PARTITIONS}, etcd))

    def where(self) -> str:
        return f"seed {self.seed}: delivered {self.delivered}"

    async def check(self) -> None:
        for tp in PARTITIONS:
            seen = self.delivered[tp]
            end = max(seen, default=-1) + 1
            assert set(range(end)) <= set(seen), f"a record was skipped; {self.where()}"
            if not self.crashes:
                assert seen == list(range(end)), f"handoffs are exact; {self.where()}"
            for counts, etcd in self.crashes:
                since = seen[counts[tp] :]
                floor = etcd.get(tp, 0)
                assert all(o >= floor for o in since), f"went back beyond etcd; {self.where()}"
            kv = await self.bench.store.get(KS.committed_offset("g", *tp))
            if kv is not None:
                assert CommittedOffset.decode(kv.value).offset <= end, self.where()


@pytest.mark.parametrize("seed", range(30), ids=lambda seed: f"seed-{seed}")
async def test_one_instance_through_three_proxies(seed: int) -> None:
    async with running_bench() as bench:
        await bench.topic("t", 2)
        sim = Sim(bench, seed)
        sim.proxies = [await bench.proxy() for _ in range(3)]
        first, _ = sim.proxies[0]
        await first.create("g", member("m", auto_commit=seed % 2 == 0), 300_000)
        await first.assign("g", "m", list(PARTITIONS))
        for _ in range(STEPS):
            await sim.step()
            await sim.check()
