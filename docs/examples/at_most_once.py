"""At-most-once: acks=0 on produce, and the consumer commits *before* it processes.

A crash after the commit and before the processing loses those records for this group; no record
is ever processed twice. Run: ``python docs/examples/at_most_once.py http://127.0.0.1:9430``.
"""

from __future__ import annotations

import sys
import uuid

import httpx


def main(url: str) -> list[int]:
    topic, group = f"amo-{uuid.uuid4().hex[:8]}", f"amo-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=url, timeout=30) as http:
        http.post("/api/v1/topics", json={"name": topic, "partitions": 1}).raise_for_status()
        member = http.post(
            f"/api/v1/groups/{group}/members",
            json={"topics": [topic], "auto_offset_reset": "earliest"},
        ).json()["member_id"]
        base = f"/api/v1/groups/{group}/members/{member}"
        # Fire and forget: acks=0 answers before any broker confirmed anything.
        records = [{"value": i} for i in range(10)]
        http.post(f"/api/v1/topics/{topic}/records?acks=0", json={"records": records})
        processed: list[int] = []
        for _ in range(50):
            polled = http.get(f"{base}/records", params={"timeout_ms": 1000}).json()
            if polled["records"]:
                http.post(f"{base}/commit").raise_for_status()  # commit first ...
                processed += [r["value"] for r in polled["records"]]  # ... then process
            if len(processed) >= 10:
                break
        http.delete(base)
        return processed


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:9430"))
