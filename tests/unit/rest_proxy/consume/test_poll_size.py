"""A poll answers at least one record, then up to ``max_bytes`` of keys and values, whether
the reads count their bytes (the reader's do: whole partitions are taken without a count per
record) or not (each record is counted)."""

from __future__ import annotations

import pytest

from tests.unit.rest_proxy.consume.bench import member, running_bench
from yak.types import TopicPartition

VALUES = {0: ["aa", "", "bbb", "c"], 1: ["", ""], 2: ["dddd", "e", "ff"]}


def by_the_rule(max_bytes: int) -> list[list[tuple[int, int]]]:
    """Every poll until the log is drained, by the rule: counted record by record."""
    positions = dict.fromkeys(VALUES, 0)
    polls = []
    while any(positions[p] < len(v) for p, v in VALUES.items()):
        answer: list[tuple[int, int]] = []
        size = 0
        for partition, values in VALUES.items():
            for offset in range(positions[partition], len(values)):
                size += len(values[offset])
                if answer and size > max_bytes:
                    break
                answer.append((partition, offset))
                positions[partition] = offset + 1
        polls.append(answer)
    return polls


@pytest.mark.parametrize("max_bytes", [1, 2, 3, 4, 5, 6, 9, 100])
@pytest.mark.parametrize("count_sizes", [False, True])
async def test_a_poll_takes_up_to_max_bytes(max_bytes: int, count_sizes: bool) -> None:
    async with running_bench() as bench:
        await bench.topic("t", len(VALUES))
        for partition, values in VALUES.items():
            bench.log.append("t", partition, *values)
        bench.log.count_sizes = count_sizes
        proxy, _ = await bench.proxy()
        await proxy.create("g", member("m"), 30_000)
        await proxy.assign("g", "m", [TopicPartition("t", p) for p in VALUES])
        polls = []
        for _ in range(20):
            polled = await proxy.poll("g", "m", timeout_ms=0, max_bytes=max_bytes)
            if not polled.partitions:
                break
            polls.append([(p, r.offset) for _, p, r in polled.records])
        assert polls == by_the_rule(max_bytes)
