"""Idle one-record produce latency straight to a broker's data plane, with ``BrokerClient``.

Runs as its own process, ``python -m loadtest.latency.probe SPEC`` (``SPEC``: JSON), so that
the client is the *measured build's* ``BrokerClient`` — the benchmark puts a baseline
worktree's ``shared`` first on ``PYTHONPATH`` — whatever transport that build's data plane
speaks. Only ``BrokerClient``'s public API is used. The spec::

    {"samples": 300, "warmup": 50, "interval_s": 0.002, "value_bytes": 1024,
     "targets": [{"rf": 3, "acks": -1, "topic": "lat-rf3", "partition": 0,
                  "url": "http://127.0.0.1:40001"}, ...]}

``url`` is the partition's leader (found by the caller from the coordinator); ``data_port``,
when the build's brokers register one, its internal listener, which the client then uses. Each
target gets ``warmup`` unmeasured produces, then ``samples`` measured ones, one at a time on one
client (one connection), ``interval_s`` apart; every produce is a fresh one-record batch
(encoded before its clock starts) whose value is the peers' 1 KiB JSON payload.
Prints one JSON line:
``{"code": <yak's __file__>, "rows": [{"rf", "acks", "ms": [...], "errors"}]}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import yak
from loadtest.peers.drivers.base import make_payload
from yak.clients.broker import BrokerClient
from yak.errors import YakError
from yak.record import RecordInput, encode_batch

__all__ = ["probe"]

REQUEST_TIMEOUT_S = 10.0


async def _target(client: BrokerClient, spec: dict[str, Any], target: dict[str, Any]) -> Any:
    samples: list[float] = []
    errors = 0
    for index in range(spec["warmup"] + spec["samples"]):
        now_ns = time.time_ns()
        payload = make_payload(spec["value_bytes"], time.monotonic_ns())
        batch = encode_batch([RecordInput(value=payload, timestamp=now_ns // 1_000_000)])
        started = time.perf_counter_ns()
        try:
            await client.produce_one(
                target["topic"], target["partition"], batch, acks=target["acks"]
            )
        except (YakError, OSError):
            errors += 1
            continue
        elapsed_ms = (time.perf_counter_ns() - started) / 1e6
        if index >= spec["warmup"]:
            samples.append(elapsed_ms)
        await asyncio.sleep(spec["interval_s"])
    return {"rf": target["rf"], "acks": target["acks"], "ms": samples, "errors": errors}


async def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure every target of ``spec`` in turn (see the module docstring)."""
    clients: dict[str, BrokerClient] = {}
    rows = []
    try:
        for target in spec["targets"]:
            url = target["url"]
            if url not in clients:
                # The internal listener when the build has one (older builds: HTTP only).
                extra = {"data_port": target["data_port"]} if target.get("data_port") else {}
                clients[url] = BrokerClient(
                    url, timeout_s=REQUEST_TIMEOUT_S, max_connections=1, **extra
                )
            rows.append(await _target(clients[url], spec, target))
    finally:
        for client in clients.values():
            await client.aclose()
    return {"code": yak.__file__, "rows": rows}


def main() -> None:
    spec = json.loads(sys.argv[1])
    print(json.dumps(asyncio.run(probe(spec))), flush=True)


if __name__ == "__main__":
    main()
