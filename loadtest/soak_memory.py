"""What the soak reads about each process's memory: resident, anonymous and file-backed MB and
open descriptors from ``/proc``, and (``--tracemalloc``) the brokers' and proxies'
``/debug/memory`` (``yak.observability.memory``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from loadtest.chaos.cluster import BROKERS, PROXIES, ChaosCluster
from yak.observability.memory import resident_kib

__all__ = ["memory_profiles", "profiled_urls", "read_process"]


def read_process(pid: int) -> tuple[float, int, float | None, float | None] | None:
    """(resident MB, open fds, anonymous MB, file-backed MB) of a live process from ``/proc``;
    None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    kib = resident_kib(status)
    if "VmRSS" not in kib:
        return None
    anon, file = kib.get("RssAnon"), kib.get("RssFile")
    return (
        kib["VmRSS"] / 1024,
        fds,
        None if anon is None else anon / 1024,
        None if file is None else file / 1024,
    )


async def memory_profiles(
    client: httpx.AsyncClient, urls: dict[str, str], top: int
) -> dict[str, Any]:
    """``/debug/memory`` of each service that serves it (``YAK_TRACEMALLOC`` set): traced
    totals, and the allocation sites that grew most since the previous call."""
    out: dict[str, Any] = {}
    for name, url in urls.items():
        try:
            answer = await client.get(f"{url}/debug/memory", params={"top": top}, timeout=30.0)
        except httpx.HTTPError as exc:
            out[name] = {"error": repr(exc)}
            continue
        if answer.status_code != 200:
            out[name] = {"error": f"HTTP {answer.status_code}"}
            continue
        body = answer.json()
        out[name] = {
            "traced_mb": round(body["traced_bytes"] / 1e6, 2),
            "resident_kib": body["resident_kib"],
            "grown": [
                {
                    "where": g["where"],
                    "size_diff_kb": round(g["size_diff"] / 1e3, 1),
                    "count_diff": g["count_diff"],
                    "stack": g["stack"],
                }
                for g in body.get("grown_since_last_call", [])
            ],
        }
    return out


def profiled_urls(cluster: ChaosCluster) -> dict[str, str]:
    return {name: cluster.url(name) for name in (*BROKERS, *PROXIES)}
