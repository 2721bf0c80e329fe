"""Delayed delivery under load: lateness at a steady schedule rate, and the brokers' memory with
a million delays pending.

- ``lateness_run``: a producer task sends ``per_tick`` records every ``tick_s`` through the
  proxy's native produce (``deliver_after_ms`` per record, 2-5 s, its intended due time also in
  the value), on a fixed schedule whatever the answers (at most ``MAX_IN_FLIGHT`` pending);
  ``consumers`` share-group members acquire and accept (the accepts inside the next acquire by
  default, as the SDK sends them; ``ack="separate"``: a request of their own). A record's
  lateness is the wall-clock time its acquire answer arrived minus its due time: the
  ``yak-deliver-at`` header the proxy wrote (the time the broker waits for), and, beside it,
  the producer's own stamp. A record acquired before its header's time is counted as early.
- ``pending_rss``: the brokers' total RSS (``psutil``, each broker process and its children)
  before anything, after ``count`` small records with a ``yak-deliver-at`` header went to a
  topic *without* delays (what the records cost as a log), and after the same records went to
  a topic *with* delays once every replica's index had caught up. Caught up means: the durable
  cursor in each replica's ``delays/delays.checkpoint`` (``storage.delay_checkpoint``; written
  at most 10 s after the index moved) reached the partition's end offset — the file is read
  from the brokers' data folders, nothing in the brokers is asked. Records are produced
  straight to the leaders (``produce.LeaderWriter``: acks=all, idempotent, retried across
  leader changes), due one to two days ahead.

Single event loop; the waits on other processes' files poll, there is no event to wait on.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

from loadtest.queue.calc import accept_entries, lateness
from loadtest.queue.produce import LeaderWriter
from yak.clients.admin import AdminClient
from yak.delays import DELIVER_AT_HEADER, delay_header
from yak.record import RecordInput
from yak.types import TopicPartition
from yak_broker.storage.delay_checkpoint import CHECKPOINT_NAME, read_checkpoint
from yak_broker.storage.delay_index import DELAYS_DIR

__all__ = ["DelayRun", "cpu_seconds", "lateness_run", "pending_rss", "rss_bytes"]

MAX_IN_FLIGHT = 32
DAY_MS = 86_400_000
PENDING_BATCH = 5_000
CATCH_UP_POLL_S = 0.5
_JSON = {"content-type": "application/json"}


def _now_ms() -> float:
    return time.time() * 1000


@dataclass
class DelayRun:
    """What a lateness run saw: (acquired_at, header due, value due) per record, failures."""

    seen: list[tuple[float, float, float]] = field(default_factory=list)
    produced: int = 0
    failed_produces: int = 0
    skipped_ticks: int = 0
    failed_requests: int = 0
    duplicates: int = 0
    sending: bool = True
    #: Set by the consumers once sending is over and every produced record was acquired.
    all_seen: asyncio.Event = field(default_factory=asyncio.Event)

    def note(self, at: float, record: dict[str, Any]) -> None:
        """One acquired record (``at``: epoch ms of the answer)."""
        header = next(h["value"] for h in record["headers"] if h["key"] == DELIVER_AT_HEADER)
        self.seen.append((at, float(header), float(record["value"]["due"])))
        if not self.sending and len(self.seen) >= self.produced:
            self.all_seen.set()

    def quarters(self) -> list[float]:
        """Lateness p50 of each quarter of the records in due order: a backlog grows."""
        ordered = sorted(self.seen, key=lambda seen: seen[1])
        size = -(-len(ordered) // 4)
        parts = [ordered[i : i + size] for i in range(0, len(ordered), size)] if size else []
        medians = (lateness((a, h) for a, h, _ in part).figures() for part in parts)
        return [float(m["delay_lateness_p50_ms"]) for m in medians]

    def figures(self) -> dict[str, Any]:
        by_header = lateness((a, h) for a, h, _ in self.seen).figures()
        by_value = lateness((a, v) for a, _, v in self.seen).figures()
        return {
            **by_header,
            "delay_lateness_p50_by_quarter_ms": self.quarters(),
            "delay_lateness_vs_producer_stamp_p99_ms": by_value["delay_lateness_p99_ms"],
            "delay_records_produced": self.produced,
            "delay_records_acquired": len(self.seen),
            "delay_records_missing": max(self.produced - len(self.seen), 0),
            "delay_duplicates": self.duplicates,
            "delay_failed_produces": self.failed_produces,
            "delay_skipped_ticks": self.skipped_ticks,
            "delay_failed_requests": self.failed_requests,
        }


async def _produce_tick(
    http: httpx.AsyncClient, topic: str, run: DelayRun, rng: random.Random, count: int
) -> None:
    now = _now_ms()
    records = []
    for _ in range(count):
        after = rng.randrange(2_000, 5_001)
        records.append({"value": {"due": now + after}, "deliver_after_ms": after})
    try:
        response = await http.post(
            f"/api/v1/topics/{topic}/records",
            content=orjson.dumps({"records": records}),
            headers=_JSON,
        )
        response.raise_for_status()
    except httpx.HTTPError:
        run.failed_produces += count
        return
    results = orjson.loads(response.content)["results"]
    run.produced += sum(1 for r in results if r.get("error") is None)


async def _consume(
    http: httpx.AsyncClient,
    group: str,
    topic: str,
    member: str,
    run: DelayRun,
    done: asyncio.Event,
    ack: str,
) -> None:
    """One member: acquire, note, accept — inside the next acquire (``ack="piggyback"``) or as
    a request of its own (``"separate"``), as the throughput phase's members do."""
    base = f"/api/v1/share-groups/{group}"
    acquire: dict[str, Any] = {
        "topics": [topic], "member_id": member, "max_records": 500, "timeout_ms": 500,
    }  # fmt: skip
    seen: set[tuple[int, int]] = set()
    while not done.is_set():
        try:
            response = await http.post(
                f"{base}/acquire", content=orjson.dumps(acquire), headers=_JSON
            )
            response.raise_for_status()
        except httpx.HTTPError:
            run.failed_requests += 1
            continue
        at = _now_ms()
        acquire.pop("acknowledgements", None)
        records = orjson.loads(response.content)["records"]
        if not records:
            continue
        for r in records:
            run.note(at, r)
            if (r["partition"], r["offset"]) in seen:
                run.duplicates += 1
            seen.add((r["partition"], r["offset"]))
        entries = accept_entries((topic, r["partition"], r["offset"]) for r in records)
        if ack == "piggyback":
            acquire["acknowledgements"] = entries
            continue
        body = {"member_id": member, "acknowledgements": entries}
        answer = await http.post(
            f"{base}/acknowledgements", content=orjson.dumps(body), headers=_JSON
        )
        if answer.status_code != 200:
            run.failed_requests += 1


async def lateness_run(
    http: httpx.AsyncClient,
    group: str,
    topic: str,
    *,
    per_tick: int,
    tick_s: float,
    duration_s: float,
    consumers: int,
    grace_s: float,
    ack: str = "piggyback",
) -> DelayRun:
    """Schedule ``per_tick / tick_s`` records/s for ``duration_s``; acquire them all (at most
    ``grace_s`` past the last due time); ``ack``: how the members accept (``_consume``)."""
    run, rng, done = DelayRun(), random.Random(30), asyncio.Event()
    members = [
        asyncio.create_task(_consume(http, group, topic, f"bench-delay-{i}", run, done, ack))
        for i in range(consumers)
    ]
    sends: set[asyncio.Task[None]] = set()
    started = time.perf_counter()
    for tick in range(round(duration_s / tick_s)):
        await asyncio.sleep(max(0.0, started + tick * tick_s - time.perf_counter()))
        if len(sends) >= MAX_IN_FLIGHT:
            run.skipped_ticks += 1
            continue
        task = asyncio.create_task(_produce_tick(http, topic, run, rng, per_tick))
        sends.add(task)
        task.add_done_callback(sends.discard)
    await asyncio.gather(*sends)
    run.sending = False
    if len(run.seen) >= run.produced:
        run.all_seen.set()
    with contextlib.suppress(TimeoutError):  # the last due time is at most 5 s away
        await asyncio.wait_for(run.all_seen.wait(), 5.0 + grace_s)
    done.set()
    await asyncio.gather(*members)
    return run


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user + system) ``pids`` and all their children have used so far."""
    total = 0.0
    for pid in pids:
        process = psutil.Process(pid)
        for each in (process, *process.children(recursive=True)):
            times = each.cpu_times()
            total += times.user + times.system
    return total


def rss_bytes(pids: list[int]) -> int:
    """The resident memory of ``pids`` and all their children."""
    total = 0
    for pid in pids:
        process = psutil.Process(pid)
        for each in (process, *process.children(recursive=True)):
            total += each.memory_info().rss
    return total


async def _produce_pending(
    admin: AdminClient, broker_urls: dict[int, str], topic: str, count: int, now_ms: int
) -> tuple[dict[int, int], int]:
    """``count`` 16-byte records due 1-2 days after ``now_ms``, spread evenly over the
    partitions in batches of ``PENDING_BATCH``; (each partition's end offset, retried sends)."""
    rng = random.Random(30)
    writer = LeaderWriter(admin, broker_urls, topic)
    try:
        partitions = sorted(await writer.leaders())
        per_partition = count // len(partitions)
        batches = -(-per_partition // PENDING_BATCH)

        def make(partition: int, n: int) -> list[RecordInput]:
            first = n * PENDING_BATCH
            return [
                RecordInput(
                    value=b"%016d" % (partition * per_partition + first + i),
                    headers=(delay_header(now_ms + DAY_MS + rng.randrange(DAY_MS)),),
                )
                for i in range(min(PENDING_BATCH, per_partition - first))
            ]

        await writer.fill(batches, make, len(partitions))
    finally:
        await writer.aclose()
    return dict.fromkeys(partitions, per_partition), writer.retries


def _cursors(data_dirs: list[Path], topic: str, ends: dict[int, int]) -> list[int]:
    """Each replica's durable delay-index cursor minus its partition's end (≥ 0: caught up)."""
    lags = []
    for partition, end in ends.items():
        name = TopicPartition(topic, partition).dir_name
        for data_dir in data_dirs:
            if not (data_dir / name).is_dir():
                continue
            checkpoint = read_checkpoint(data_dir / name / DELAYS_DIR / CHECKPOINT_NAME)
            lags.append((checkpoint.cursor if checkpoint else 0) - end)
    return lags


async def pending_rss(
    admin: AdminClient,
    broker_urls: dict[int, str],
    pids: list[int],
    data_dirs: list[Path],
    topics: tuple[str, str],
    count: int,
    catch_up_s: float,
) -> dict[str, Any]:
    """RSS before, after ``count`` records to ``topics[0]`` (no delays) and after the same to
    ``topics[1]`` (delays) once indexed; see the module doc."""
    plain, delayed = topics
    now_ms = int(_now_ms())
    before = rss_bytes(pids)
    _, plain_retries = await _produce_pending(admin, broker_urls, plain, count, now_ms)
    after_plain = rss_bytes(pids)
    started = time.perf_counter()
    ends, retries = await _produce_pending(admin, broker_urls, delayed, count, now_ms)
    produced_s = time.perf_counter() - started
    lags = _cursors(data_dirs, delayed, ends)
    while min(lags) < 0 and time.perf_counter() - started < catch_up_s:
        await asyncio.sleep(CATCH_UP_POLL_S)  # other processes' files: nothing to wait on
        lags = _cursors(data_dirs, delayed, ends)
    caught_up_s = time.perf_counter() - started
    after_delayed = rss_bytes(pids)
    mb = 1_000_000
    log_cost = after_plain - before
    delayed_cost = after_delayed - after_plain
    return {
        "delay_pending_1m_rss_mb": round((delayed_cost - log_cost) / mb, 1),
        "delay_pending_records": count,
        "delay_pending_rss_before_mb": round(before / mb, 1),
        "delay_pending_rss_after_plain_mb": round(after_plain / mb, 1),
        "delay_pending_rss_after_delayed_mb": round(after_delayed / mb, 1),
        "delay_pending_plain_topic_growth_mb": round(log_cost / mb, 1),
        "delay_pending_delayed_topic_growth_mb": round(delayed_cost / mb, 1),
        "delay_pending_replicas_caught_up": sum(1 for lag in lags if lag >= 0),
        "delay_pending_replicas": len(lags),
        "delay_pending_produce_s": round(produced_s, 1),
        "delay_pending_caught_up_s": round(caught_up_s, 1),
        "delay_pending_produce_retries": plain_retries + retries,
    }
