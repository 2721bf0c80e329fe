"""A worker pool over a share group: 4 workers take 20 jobs; job 13 always fails and, once it
has been tried ``max_delivery_attempts`` times, lands in the dead-letter topic.

Each worker is an ``AsyncShareConsumer``: it acquires jobs (each one locked to it), processes
them, acks the ones that worked and releases the one that failed (deliver it again, maybe to
another worker). The group's leaders count deliveries; at the third failure the record is
archived and copied to the dead-letter topic, with ``yak-dlq-*`` headers saying where it came
from, how often it was tried and why. Order is not promised.
Run: ``python docs/examples/queue_workers.py http://127.0.0.1:9430``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from yak.sdk import AsyncAdmin, AsyncPartitionReader, AsyncProducer, AsyncShareConsumer

JOBS = 20
POISON = 13


def process(job: int) -> None:
    if job == POISON:
        raise ValueError(f"job {job} cannot be done")


async def worker(
    url: str, group: str, topic: str, done: list[int], finished: asyncio.Event
) -> None:
    async with AsyncShareConsumer(url, group, topic, max_records=5) as consumer:
        while not finished.is_set():
            for record in await consumer.acquire(timeout_ms=500):
                job = int(record.value or b"-1")
                try:
                    process(job)
                except ValueError:
                    await record.release()  # tried again (up to the delivery limit)
                else:
                    done.append(job)
                    await record.ack()
                    if len(done) == JOBS - 1:
                        finished.set()


async def dead_letters(url: str, topic: str) -> list[tuple[bytes | None, dict[str, bytes]]]:
    async with AsyncPartitionReader(url) as reader:
        for _ in range(30):  # the leader copies it in the background
            read = await reader.read(topic, 0, offset=0, timeout_ms=1_000)
            if read.records:
                return [(r.value, {k: v or b"" for k, v in r.headers}) for r in read.records]
    return []


async def main(url: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, dlq, group = f"jobs-{suffix}", f"jobs-dlq-{suffix}", f"workers-{suffix}"
    async with AsyncAdmin(url) as admin:
        await admin.create_topic(topic, partitions=3)
        await admin.create_topic(dlq)
        await admin.create_share_group(
            group,
            dead_letter_topic=dlq,
            max_delivery_attempts=3,
            lock_duration_ms=5_000,
            offset_reset="earliest",
        )
    async with AsyncProducer(url) as producer:
        sent = [await producer.send(topic, str(job).encode()) for job in range(JOBS)]
        await asyncio.gather(*sent)
    done: list[int] = []
    finished = asyncio.Event()
    workers = [asyncio.create_task(worker(url, group, topic, done, finished)) for _ in range(4)]
    letters = await dead_letters(url, dlq)
    await asyncio.wait_for(finished.wait(), 60)
    await asyncio.gather(*workers)
    print(f"done: {sorted(done)}")
    for value, headers in letters:
        reason, count = headers.get("yak-dlq-reason"), headers.get("yak-dlq-delivery-count")
        print(f"dead letter: job {value!r}, reason {reason!r}, delivered {count!r} times")
    assert sorted(done) == [job for job in range(JOBS) if job != POISON]
    assert [value for value, _ in letters] == [str(POISON).encode()]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:9430"))
