"""The soak's fault rotation: the faults chosen by name, each injected with its own class's
count (targets rotate within a class), a failed fault logged rather than raised, every
fault healed and its times kept."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from loadtest.chaos.faults import FaultContext
from loadtest.soak_faults import FAULTS, FaultLog, SoakFault, choose_faults


def test_all_faults_by_default_and_the_named_ones_in_order() -> None:
    assert choose_faults(None) == FAULTS
    assert [f.name for f in choose_faults("kill-etcd,kill-broker")] == [
        "kill-etcd",
        "kill-broker",
    ]
    with pytest.raises(ValueError, match="unknown faults"):
        choose_faults("kill-etcd,unplug")


def test_the_rotation_covers_what_the_issue_asks_for() -> None:
    names = {f.name for f in FAULTS}
    assert {"kill-broker", "sigterm-broker", "pause-broker", "kill-proxy"} <= names
    assert {"kill-coordinator", "kill-etcd", "slow-disk"} <= names
    assert [f.name for f in FAULTS if f.shim] == ["slow-disk"]


class _Cluster:
    """What ``FaultLog.heal`` uses of a ``ChaosCluster``: revive and describe."""

    def __init__(self) -> None:
        self.revived = 0

    def revive(self) -> list[str]:
        self.revived += 1
        return ["broker-1 -9"] if self.revived == 2 else []

    async def describe(self, topic: str) -> Any:
        partition = SimpleNamespace(leader=1, isr=[2, 1], replicas=[1, 2])
        return SimpleNamespace(partitions=[partition])


def test_rotation_counts_per_class_logs_failures_and_heals() -> None:
    calls: list[tuple[str, int]] = []

    def fault(name: str, fails: bool = False) -> SoakFault:
        async def inject(ctx: FaultContext, number: int) -> str:
            calls.append((name, number))
            if fails:
                raise RuntimeError("no controller")
            return f"{name}#{number}"

        return SoakFault(name, name, inject)

    cluster = _Cluster()
    ctx = FaultContext(cast(Any, cluster), cast(Any, None), "soak", None)
    log = FaultLog(ctx, (fault("a"), fault("b", fails=True)), recover_s=1.0)
    clock = iter(float(t) for t in range(100))

    async def run() -> None:
        for _ in range(5):
            await log.inject_next(lambda: next(clock))

    asyncio.run(run())
    assert calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]
    assert [e.get("target") for e in log.entries] == ["a#0", None, "a#1", None, "a#2"]
    assert "no controller" in log.entries[1]["error"]
    assert log.entries[1]["crashed"] == ["broker-1 -9"]
    assert all(e["full_isr"] for e in log.entries)
    first = log.entries[0]
    assert (first["t_s"], first["injected_s"], first["healed_s"]) == (0.0, 1.0, 2.0)
