"""Exactly-once: topic ``in`` → transform → topic ``out``, surviving a crash at the worst moment.

The processor writes each output record as one batch of an idempotent producer session whose
sequence number *is* the input offset, so replaying input after a crash re-sends batches the
broker already has, and it answers them with their first offsets instead of writing them again.
The broker remembers a producer's last 5 batches per partition, so the processor commits at
least every 5 records: a replay never goes further back than that. Commits are fenced by the
member epoch, so a member that lost its partition cannot commit over the new owner. Here the
processor "crashes" after producing and before committing; its successor redoes that work and
``out`` still holds every record once.
Run: ``python docs/examples/exactly_once.py http://127.0.0.1:9430``.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import httpx

COMMIT_EVERY = 5  # <= the broker's 5-batch duplicate window


def process(
    http: httpx.Client,
    group: str,
    source: str,
    sink: str,
    session: dict[str, Any],
    crash_after: int | None,
) -> None:
    member = http.post(
        f"/api/v1/groups/{group}/members",
        json={"topics": [source], "auto_offset_reset": "earliest"},
    ).json()["member_id"]
    base = f"/api/v1/groups/{group}/members/{member}"
    produced = 0
    for _ in range(50):
        polled = http.get(f"{base}/records", params={"timeout_ms": 1000}).json()
        if not polled["records"]:
            break
        for index, record in enumerate(polled["records"]):
            http.post(
                f"/api/v1/topics/{sink}/partitions/0/batches",
                json={
                    **session,
                    "base_sequence": record["offset"],  # the input offset is the sequence
                    "records": [{"value": str(record["value"]).upper()}],
                },
            ).raise_for_status()
            produced += 1
            if crash_after is not None and produced >= crash_after:
                http.delete(base)  # produced, not committed: the worst moment to die
                return
            last = index == len(polled["records"]) - 1
            if last or (record["offset"] + 1) % COMMIT_EVERY == 0:
                http.post(
                    f"{base}/commit",
                    json={
                        "member_epoch": polled["member_epoch"],
                        "offsets": [
                            {"topic": source, "partition": 0, "offset": record["offset"] + 1}
                        ],
                    },
                ).raise_for_status()
    http.delete(base)


def main(url: str) -> list[str]:
    suffix = uuid.uuid4().hex[:8]
    source, sink, group = f"eos-in-{suffix}", f"eos-out-{suffix}", f"eos-{suffix}"
    with httpx.Client(base_url=url, timeout=30) as http:
        for name in (source, sink):
            http.post("/api/v1/topics", json={"name": name, "partitions": 1}).raise_for_status()
        values = [f"record-{i}" for i in range(20)]
        http.post(
            f"/api/v1/topics/{source}/records", json={"records": [{"value": v} for v in values]}
        ).raise_for_status()
        session = http.post("/api/v1/producers").json()
        process(http, group, source, sink, session, crash_after=8)
        process(http, group, source, sink, session, crash_after=None)
        read = http.get(f"/api/v1/topics/{sink}/partitions/0/records", params={"offset": 0})
        return [r["value"] for r in read.json()["records"]]


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:9430"))
