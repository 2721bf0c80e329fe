"""At-least-once: acks=all with retries on produce; the consumer processes, *then* commits.

A crash between processing and committing makes the next consumer process those records again;
none is lost. Run: ``python docs/examples/at_least_once.py http://127.0.0.1:9430``.
"""

from __future__ import annotations

import sys
import uuid

import httpx


def produce_with_retries(http: httpx.Client, topic: str, values: list[int]) -> None:
    for _attempt in range(5):
        answer = http.post(
            f"/api/v1/topics/{topic}/records?acks=all",
            json={"records": [{"value": v} for v in values]},
        )
        results = answer.json().get("results", [])
        failed = [v for v, r in zip(values, results, strict=False) if r["error"] is not None]
        if answer.status_code < 500 and not failed and len(results) == len(values):
            return
        values = failed or values  # a retry may duplicate: that is at-least-once
    raise RuntimeError("not acknowledged after 5 attempts")


def consume(http: httpx.Client, group: str, topic: str, crash_after: int | None) -> list[int]:
    member = http.post(
        f"/api/v1/groups/{group}/members",
        json={"topics": [topic], "auto_offset_reset": "earliest"},
    ).json()["member_id"]
    base = f"/api/v1/groups/{group}/members/{member}"
    processed: list[int] = []
    for _ in range(50):
        polled = http.get(f"{base}/records", params={"timeout_ms": 1000}).json()
        processed += [r["value"] for r in polled["records"]]  # process first ...
        if crash_after is not None and len(processed) >= crash_after:
            http.delete(base)  # "crash": leave without committing
            return processed
        if polled["records"]:
            http.post(f"{base}/commit").raise_for_status()  # ... then commit
        elif processed:
            break
    http.delete(base)
    return processed


def main(url: str) -> tuple[list[int], list[int]]:
    topic, group = f"alo-{uuid.uuid4().hex[:8]}", f"alo-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=url, timeout=30) as http:
        http.post("/api/v1/topics", json={"name": topic, "partitions": 1}).raise_for_status()
        produce_with_retries(http, topic, list(range(10)))
        first = consume(http, group, topic, crash_after=1)
        second = consume(http, group, topic, crash_after=None)
        return first, second


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:9430"))
