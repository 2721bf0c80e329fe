"""The broker pages: every broker the cluster knows with its status, partitions led and
followed, disk usage and its latest load sample — CPU, memory, disk, records appended per
second and the sample's age, stale ones marked (``/brokers``); one broker's replicas with
their role, ISR membership, size and offsets (``/brokers/{id}``).

Both render from the sampler's latest sample (the cluster's brokers, registered or recorded,
and every live broker's log dirs summed per topic); a broker's page asks that broker's replicas
when it is looked at, and ISR membership comes from a ``TopicDirectory`` (kept topic
descriptions). A broker that left is shown ``down`` with when it was last seen (its record in
etcd, listed by the admin API), from the same sample: it costs no request of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException

from yak.api.admin import BrokerInfo, BrokerLoadInfo, BrokerStatus, BrokerTopicLogs, ReplicaLog
from yak_console.pages.common import Pages
from yak_console.sampler import Sample

__all__ = ["BrokerRow", "ReplicaRow", "broker_rows", "router"]


@dataclass(frozen=True, slots=True)
class BrokerRow:
    """One broker as the brokers page shows it."""

    broker_id: int
    address: str
    rack: str | None
    #: ``up``, ``shutting down``, ``down`` (its registration is gone: the cluster knows it from
    #: its record) or ``unreachable`` (registered, but its log dirs did not answer).
    status: str
    led: int
    followed: int
    log_bytes: int
    disk_total_bytes: int
    disk_free_bytes: int
    error: str | None
    #: When it was last seen registered: now for a registered broker, when it left for a down
    #: one (ms; None when unknown).
    last_seen_ms: int | None = None
    #: Its latest load sample (None: down, or none published yet); ``stale`` as the API
    #: judged it when the console sampled.
    load: BrokerLoadInfo | None = None

    @property
    def disk_used_bytes(self) -> int:
        return max(0, self.disk_total_bytes - self.disk_free_bytes)

    @property
    def disk_used_percent(self) -> float:
        if not self.disk_total_bytes:
            return 0.0
        return 100.0 * self.disk_used_bytes / self.disk_total_bytes


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One replica on a broker; ``in_sync`` is None while the topic's ISR is unknown."""

    log: ReplicaLog
    in_sync: bool | None


def _status(info: BrokerInfo | None, log_dir: BrokerTopicLogs | None) -> str:
    if info is not None and info.status is BrokerStatus.DOWN:
        return "down"
    if log_dir is not None and log_dir.error:
        return "unreachable"
    if info is not None and info.shutting_down:
        return "shutting down"
    return "up" if info is not None else "unreachable"


def broker_rows(sample: Sample) -> list[BrokerRow]:
    """Known brokers joined with their log dirs, by id (pure)."""
    infos = {b.broker_id: b for b in sample.cluster.brokers} if sample.cluster else {}
    dirs = {d.broker_id: d for d in sample.log_dirs.brokers} if sample.log_dirs else {}
    rows = []
    for broker_id in sorted({*infos, *dirs}):
        info, log_dir = infos.get(broker_id), dirs.get(broker_id)
        led = log_dir.leaders if log_dir else 0
        rows.append(
            BrokerRow(
                broker_id=broker_id,
                address=f"{info.host}:{info.port}" if info else "-",
                rack=info.rack if info else None,
                status=_status(info, log_dir),
                led=led,
                followed=(log_dir.replicas if log_dir else 0) - led,
                log_bytes=log_dir.size_bytes if log_dir else 0,
                disk_total_bytes=log_dir.disk_total_bytes if log_dir else 0,
                disk_free_bytes=log_dir.disk_free_bytes if log_dir else 0,
                error=log_dir.error if log_dir else None,
                last_seen_ms=info.last_seen_ms if info else None,
                load=info.load if info else None,
            )
        )
    return rows


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()
    sampler = pages.runtime.sampler
    directory = pages.runtime.topics

    @routes.get("/brokers", response_class=HTMLResponse, include_in_schema=False)
    async def brokers(request: Request) -> HTMLResponse:
        sample = await sampler.current()
        return pages.render(
            request,
            "brokers.html",
            nav="brokers",
            title="Brokers",
            rows=broker_rows(sample),
            sample=sample,
        )

    @routes.get("/brokers/{broker_id}", response_class=HTMLResponse, include_in_schema=False)
    async def broker(request: Request, broker_id: int) -> HTMLResponse:
        sample = await sampler.current()
        row = next((r for r in broker_rows(sample) if r.broker_id == broker_id), None)
        if row is None:
            raise HTTPException(404, f"broker {broker_id} is not registered")
        log_dir = await sampler.broker_log_dir(broker_id) if row.status != "down" else None
        replicas = sorted(log_dir.replicas if log_dir else [], key=lambda r: (r.topic, r.partition))
        described = await directory.describe_all(r.topic for r in replicas)
        isr = {
            (name, p.partition): p.isr
            for name, topic in described.items()
            for p in topic.partitions
        }
        rows = [
            ReplicaRow(r, broker_id in isr[(r.topic, r.partition)])
            if (r.topic, r.partition) in isr
            else ReplicaRow(r, None)
            for r in replicas
        ]
        return pages.render(
            request,
            "broker_detail.html",
            nav="brokers",
            title=f"Broker {broker_id}",
            broker=row,
            replicas=rows,
            sample=sample,
        )

    return routes
