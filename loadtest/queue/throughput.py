"""Share-group acquire + acknowledge and group-poll consume rates through one rest-proxy.

- ``prefill``: ``count`` 1 KiB JSON records into every partition of a topic, produced straight
  to the partitions' leaders (``produce.LeaderWriter``: acks=all, idempotent, batches of
  ``BATCH`` records) so the proxy under test has done no work before the measurement.
- ``share_rate``: ``consumers`` tasks, each a share-group member with its own member id, loop
  over raw ``httpx`` requests like a worker pool: ``POST …/acquire`` (up to ``max_records``,
  long poll ``timeout_ms``), accepting everything acquired (contiguous offsets as ranges,
  ``calc.accept_entries``) — ``ack="piggyback"``: inside the next acquire (its
  ``acknowledgements``, as Kafka's share consumers and the SDK do), ``ack="separate"``: one
  ``POST …/acknowledgements`` after each acquire. Records count when their accept is answered
  inside the window; each request's time is kept for its p50/p99.
- ``group_rate``: ``members`` members of one consumer group (``auto_offset_reset`` earliest)
  long-poll ``GET …/records`` (``max_bytes`` 1 MiB, values as JSON like the acquire's) and
  commit their positions once a second, as the peers driver does; records count when their
  poll is answered inside the window.

Both measure after a warm-up, over a fixed window (``calc.Window``), closed early at the last
record if the data runs out. Every task in one event loop; failed requests are counted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from loadtest.queue.calc import Window, accept_entries, summary_ms
from loadtest.queue.produce import LeaderWriter
from yak.clients.admin import AdminClient
from yak.record import RecordInput

__all__ = ["SHARE_ACK_MODES", "Rate", "group_rate", "prefill", "record_value", "share_rate"]

VALUE_BYTES = 1024
BATCH = 500
PREFILL_TASKS = 8
POLL_MAX_BYTES = 1024 * 1024
COMMIT_INTERVAL_S = 1.0
IDLE_ACQUIRES = 3
#: How share members send their accepts: inside the next acquire, or a request of their own.
SHARE_ACK_MODES = ("piggyback", "separate")
_JSON = {"content-type": "application/json"}


def record_value(index: int) -> bytes:
    """A JSON document of exactly ``VALUE_BYTES`` bytes carrying ``index``."""
    stem = orjson.dumps({"id": index, "pad": ""})
    return orjson.dumps({"id": index, "pad": "x" * (VALUE_BYTES - len(stem))})


async def prefill(
    admin: AdminClient, broker_urls: dict[int, str], topic: str, per_partition: int
) -> tuple[int, float, int]:
    """``per_partition`` records (rounded up to whole batches) into each partition; (records
    written, seconds taken, retried sends)."""
    records = [RecordInput(value=record_value(i)) for i in range(BATCH)]
    writer = LeaderWriter(admin, broker_urls, topic)
    batches = -(-per_partition // BATCH)
    started = time.perf_counter()
    try:
        await writer.fill(batches, lambda _p, _n: records, PREFILL_TASKS)
        partitions = len(await writer.leaders())
    finally:
        await writer.aclose()
    return batches * BATCH * partitions, time.perf_counter() - started, writer.retries


@dataclass
class Rate:
    """A consume loop's outcome: the window, request times (s) by kind, failures."""

    window: Window
    requests: dict[str, list[float]] = field(default_factory=dict)
    failed_requests: int = 0
    refused_entries: int = 0
    total_records: int = 0
    first_record_s: float = -1.0

    def timed(self, kind: str, seconds: float) -> None:
        self.requests.setdefault(kind, []).append(seconds)

    def figures(self, prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            f"{prefix}_rps": round(self.window.rate(), 1),
            f"{prefix}_window_s": round(self.window.seconds(), 2),
            f"{prefix}_window_records": self.window.records,
            f"{prefix}_data_ran_out": self.window.exhausted_at is not None,
            f"{prefix}_total_records": self.total_records,
            f"{prefix}_first_record_s": round(self.first_record_s, 2),
            f"{prefix}_failed_requests": self.failed_requests,
        }
        for kind, samples in sorted(self.requests.items()):
            for name, value in summary_ms(samples).items():
                out[f"{prefix}_{kind}_{name}"] = value
        if prefix.startswith("share"):
            out[f"{prefix}_refused_entries"] = self.refused_entries
        return out


async def _post(http: httpx.AsyncClient, rate: Rate, kind: str, path: str, body: Any) -> Any:
    started = time.perf_counter()
    try:
        response = await http.post(path, content=orjson.dumps(body), headers=_JSON)
        response.raise_for_status()
    except httpx.HTTPError:
        rate.failed_requests += 1
        return None
    rate.timed(kind, time.perf_counter() - started)
    return orjson.loads(response.content)


async def share_rate(
    http: httpx.AsyncClient,
    group: str,
    topic: str,
    *,
    consumers: int,
    warmup_s: float,
    window_s: float,
    max_records: int = 500,
    timeout_ms: int = 1_000,
    ack: str = "piggyback",
) -> Rate:
    """Acquire + accept loops of ``consumers`` members (see the module doc)."""
    started = time.perf_counter()
    rate = Rate(Window(started + warmup_s, started + warmup_s + window_s))
    base = f"/api/v1/share-groups/{group}"
    idle = 0

    def accepted(results: list[dict[str, Any]], count: int) -> None:
        refused = sum(1 for r in results if r["error"] is not None)
        rate.refused_entries += refused
        if refused == 0:
            now = time.perf_counter()
            if rate.first_record_s < 0:
                rate.first_record_s = now - started
            rate.total_records += count
            rate.window.count(count, now)

    async def member(index: int) -> None:
        nonlocal idle
        acquire: dict[str, Any] = {
            "topics": [topic],
            "member_id": f"bench-share-{index}",
            "max_records": max_records,
            "timeout_ms": timeout_ms,
        }
        riding = 0  # records whose accepts ride the next acquire
        while time.perf_counter() < rate.window.end and rate.window.exhausted_at is None:
            got = await _post(http, rate, "acquire", f"{base}/acquire", acquire)
            if riding and got is not None:
                accepted(got["acknowledgement_results"], riding)
            acquire.pop("acknowledgements", None)
            riding = 0
            records = [] if got is None else got["records"]
            if not records:
                idle += 1
                if rate.total_records and idle >= IDLE_ACQUIRES * consumers:
                    rate.window.exhausted_at = time.perf_counter()
                continue
            idle = 0
            entries = accept_entries((r["topic"], r["partition"], r["offset"]) for r in records)
            if ack == "piggyback":
                acquire["acknowledgements"], riding = entries, len(records)
                continue
            body = {"member_id": acquire["member_id"], "acknowledgements": entries}
            answer = await _post(http, rate, "acknowledge", f"{base}/acknowledgements", body)
            if answer is not None:
                accepted(answer["results"], len(records))

    await asyncio.gather(*(member(i) for i in range(consumers)))
    return rate


async def group_rate(
    http: httpx.AsyncClient,
    group: str,
    topic: str,
    expected: int,
    *,
    members: int,
    warmup_s: float,
    window_s: float,
) -> Rate:
    """Poll + commit loops of ``members`` group members until the window ends or ``expected``
    records were read (see the module doc)."""
    join = {"topics": [topic], "auto_offset_reset": "earliest", "auto_commit": False}
    paths = []
    for _ in range(members):
        response = await http.post(
            f"/api/v1/groups/{group}/members", content=orjson.dumps(join), headers=_JSON
        )
        response.raise_for_status()
        paths.append(f"/api/v1/groups/{group}/members/{response.json()['member_id']}")
    started = time.perf_counter()
    rate = Rate(Window(started + warmup_s, started + warmup_s + window_s))
    params = {"timeout_ms": 1_000, "max_bytes": POLL_MAX_BYTES}

    async def member(path: str) -> None:
        committed = time.perf_counter()
        while time.perf_counter() < rate.window.end and rate.window.exhausted_at is None:
            polled = time.perf_counter()
            try:
                response = await http.get(f"{path}/records", params=params)
                response.raise_for_status()
            except httpx.HTTPError:
                rate.failed_requests += 1
                continue
            now = time.perf_counter()
            rate.timed("poll", now - polled)
            count = len(orjson.loads(response.content)["records"])
            if count and rate.first_record_s < 0:
                rate.first_record_s = now - started
            rate.total_records += count
            rate.window.count(count, now)
            if rate.total_records >= expected:
                rate.window.exhausted_at = now
            if now - committed >= COMMIT_INTERVAL_S:
                committed = now
                if (await http.post(f"{path}/commit")).status_code != 200:
                    rate.failed_requests += 1

    try:
        await asyncio.gather(*(member(p) for p in paths))
    finally:
        for path in paths:
            await http.delete(path)
    return rate
