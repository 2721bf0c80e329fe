"""One chaos run: per fault class a topic of its own, producers on it, the faults, then a
read and a verdict; at the end a full read of every topic again.

Every wait is bounded: a class stops injecting at its fault count or at its time budget,
producers are given ``drain_s`` to finish, recovery after a fault waits at most
``recover_s``, and the whole run at most ``deadline`` (monotonic seconds) — past it the
remaining classes are skipped and reported as such. A class's verdict is taken from a read
right after its phase (what its faults did); the final read checks every topic again after
all the later faults too (a later class may still damage an earlier topic: the empty-disk
class, which can, runs last).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from loadtest.chaos.cluster import ChaosCluster
from loadtest.chaos.faults import FaultClass, FaultContext
from loadtest.chaos.network import Network
from loadtest.chaos.shim import Shim
from loadtest.chaos.verdict import Ack, Verdict, judge
from loadtest.chaos.workload import RestProducer, SdkProducer, read_topic
from yak.errors import YakError

__all__ = ["ClassResult", "RunOptions", "run"]

PARTITIONS = 3


@dataclass(frozen=True)
class RunOptions:
    faults: int = 30
    class_budget_s: float = 180.0
    recover_s: float = 30.0
    drain_s: float = 75.0
    sdk_rate: float = 50.0
    deadline: float = float("inf")


@dataclass
class ClassResult:
    name: str
    description: str
    faults: int = 0
    seconds: float = 0.0
    verdict: Verdict = field(default_factory=Verdict)
    final: Verdict | None = None
    notes: list[str] = field(default_factory=list)
    targets: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    acks: list[Ack] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    skipped: str | None = None
    #: Why the topic could not be read back (then the verdict is unknown).
    unread: str | None = None
    #: The state when a recovery first timed out (``_diagnose``).
    diagnosis: str = ""
    #: etcd elections during the class: the rise of the highest raft term (None: unknown).
    etcd_elections: int | None = None

    def entry(self) -> dict[str, Any]:
        counts = self.verdict.counts()
        return {
            "description": self.description,
            "faults": self.faults,
            "acked": counts["acked"],
            "lost": counts["lost"],
            "duplicated": counts["duplicated"],
            "reordered": counts["reordered"],
            "moved": counts["moved"],
            "unacked_found": counts["unacked_found"],
            "final_read": None if self.final is None else self.final.counts(),
            "seconds": round(self.seconds, 1),
            "targets": self.targets,
            "client_errors": self.errors,
            "examples": self.verdict.examples,
            "notes": self.notes,
            "skipped": self.skipped,
            "unread": self.unread,
            "diagnosis": self.diagnosis,
            "etcd_elections": self.etcd_elections,
        }


async def wait_full_isr(cluster: ChaosCluster, topic: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeError):
            described = await cluster.describe(topic)
            if all(
                p.leader >= 0 and sorted(p.isr) == sorted(p.replicas) for p in described.partitions
            ):
                return True
        await asyncio.sleep(0.2)
    return False


async def _recover(
    cluster: ChaosCluster, network: Network, topic: str, result: ClassResult, timeout_s: float
) -> None:
    await asyncio.to_thread(network.heal_all)
    left = await asyncio.to_thread(network.leftovers)
    if left:  # a fault that did not heal (the suite's own failure): noted, healed again
        result.notes.append(f"after fault {result.faults}: not healed: {'; '.join(left)}"[:300])
        await asyncio.to_thread(network.heal_all)
    crashed = await asyncio.to_thread(cluster.revive)
    for text in crashed:
        result.notes.append(f"after fault {result.faults}: {text}")
    if not await wait_full_isr(cluster, topic, timeout_s):
        result.notes.append(f"after fault {result.faults}: no full ISR within {timeout_s:.0f} s")
        if not result.diagnosis:  # the first time only: what the state was
            result.diagnosis = await _diagnose(cluster, topic, result.faults)


async def _diagnose(cluster: ChaosCluster, topic: str, fault: int) -> str:
    """The topic's leaders and ISRs, and who is registered (``ChaosCluster.diagnose``)."""
    try:
        described = await cluster.describe(topic)
        isr = ", ".join(
            f"p{p.partition} leader {p.leader} isr {p.isr}" for p in described.partitions
        )
    except RuntimeError as exc:
        isr = repr(exc)[:200]
    return f"after fault {fault}: {isr}; {await cluster.diagnose()}"


def _merge(into: dict[str, int], more: dict[str, int]) -> None:
    for key, count in more.items():
        into[key] = into.get(key, 0) + count


async def run_class(
    cluster: ChaosCluster,
    network: Network,
    shim: Shim | None,
    fault: FaultClass,
    options: RunOptions,
) -> ClassResult:
    result = ClassResult(fault.name, fault.description)
    topic = f"chaos-{fault.name}"
    started = time.monotonic()
    term_before = await cluster.etcd_term()
    await cluster.create_topic(topic, PARTITIONS, dict(fault.topic_configs))
    if not await wait_full_isr(cluster, topic, options.recover_s):
        result.notes.append("topic not fully replicated before the faults")
    proxies = cluster.proxy_urls()
    rest = [
        RestProducer(f"rest{p}", proxies[p % 2 :] + proxies[: p % 2], topic, p)
        for p in range(PARTITIONS)
    ]
    sdk = [SdkProducer(f"sdk{i}", url, topic, PARTITIONS) for i, url in enumerate(proxies)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(p.run(stop)) for p in rest]
    tasks += [asyncio.create_task(p.run(stop, options.sdk_rate)) for p in sdk]
    context = FaultContext(cluster, network, topic, shim)
    budget_end = min(started + options.class_budget_s, options.deadline)
    try:
        await asyncio.sleep(1.0)
        while result.faults < options.faults and time.monotonic() < budget_end:
            try:
                target = await asyncio.wait_for(fault.inject(context, result.faults), 120.0)
                result.targets[target] = result.targets.get(target, 0) + 1
            except (TimeoutError, RuntimeError, OSError, YakError, httpx.HTTPError) as exc:
                result.notes.append(f"fault {result.faults} failed: {exc!r}"[:300])
            result.faults += 1
            await _recover(cluster, network, topic, result, options.recover_s)
            await asyncio.sleep(0.3)
        if result.faults < options.faults:
            result.notes.append(f"time budget reached after {result.faults} faults")
        await asyncio.sleep(1.0)
    finally:
        stop.set()
        done, pending = await asyncio.wait(tasks, timeout=options.drain_s)
        for task in pending:
            task.cancel()
        if pending:
            result.notes.append(f"{len(pending)} producers did not finish within the drain")
        for task in done:
            if task.exception() is not None:
                result.notes.append(f"producer failed: {task.exception()!r}"[:300])
        for producer in rest:
            await producer.aclose()
    for one in (*rest, *sdk):
        result.acks += one.acks
        result.sent += one.sent
        _merge(result.errors, one.errors)
    abandoned = sum(p.abandoned for p in rest)
    if abandoned:
        result.notes.append(f"{abandoned} REST batches abandoned after 60 s of retries")
    await _recover(cluster, network, topic, result, options.recover_s)
    result.seconds = time.monotonic() - started
    term_after = await cluster.etcd_term()
    if term_before is not None and term_after is not None:
        result.etcd_elections = term_after - term_before
    try:
        stored = await read_topic(cluster, topic)
    except (RuntimeError, OSError, YakError, httpx.HTTPError) as exc:
        # a partition nobody serves (a finding): no verdict, but the faults and acks stand
        result.unread = f"the read after the phase failed: {exc!r}"[:300]
        result.verdict = Verdict(acked=len(result.acks))
        return result
    result.verdict = judge(result.acks, stored, result.sent)
    return result


async def run(
    cluster: ChaosCluster,
    network: Network,
    shim: Shim | None,
    classes: list[FaultClass],
    options: RunOptions,
    report: Any = None,
) -> list[ClassResult]:
    """Every class in order, then the final read; ``report(result)`` after each class."""
    results: list[ClassResult] = []
    for fault in classes:
        if time.monotonic() >= options.deadline:
            skipped = ClassResult(fault.name, fault.description, skipped="run deadline reached")
            results.append(skipped)
            continue
        try:
            result = await run_class(cluster, network, shim, fault, options)
        except (RuntimeError, OSError, YakError, httpx.HTTPError) as exc:
            # e.g. the topic cannot be created because a broker is not back: a finding of
            # the classes before, reported; the remaining classes still run
            result = ClassResult(fault.name, fault.description, skipped=f"could not run: {exc}")
            network.heal_all()
            result.notes += await asyncio.to_thread(cluster.revive)
        results.append(result)
        if report is not None:
            report(result)
    for result in results:
        if result.skipped is None:
            try:
                stored = await read_topic(cluster, f"chaos-{result.name}")
                result.final = judge(result.acks, stored, result.sent)
            except (RuntimeError, OSError, YakError, httpx.HTTPError) as exc:
                result.notes.append(f"final read failed: {exc!r}"[:300])
    return results
