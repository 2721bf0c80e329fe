"""``enqueue`` of a request's records in columns (``RequestRecords``) puts each record in the
partition, and in the order, that the record-at-a-time path does."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from yak.partitioner import StickyPartitioner
from yak.record import RecordInput
from yak.record.record_encoder import encode_record_body
from yak_rest_proxy.produce.accumulator import ProducedRecord, Result, record_size
from yak_rest_proxy.produce.publish import OutgoingRecord, RequestRecords, enqueue

NOW = 1_700_000_000_000


@dataclass
class Topic:
    partitions: int = 8
    deleting: bool = False
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class Snapshot:
    topics: dict[str, Topic] = field(default_factory=lambda: {"t": Topic()})


@dataclass
class Recorder:
    """A producer that answers every record at once: partition, its place in the queue."""

    queued: dict[int, list[bytes]] = field(default_factory=dict)

    def _answer(self, partition: int, bodies: list[bytes]) -> asyncio.Future[list[Result]]:
        queue = self.queued.setdefault(partition, [])
        first = len(queue)
        queue.extend(bodies)
        future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        future.set_result([ProducedRecord(partition, first + i, NOW) for i in range(len(bodies))])
        return future

    def send(
        self, topic: str, partition: int, records: Sequence[RecordInput], **_: Any
    ) -> asyncio.Future[list[Result]]:
        return self._answer(partition, [encode_record_body(r.key, r.value) for r in records])

    def send_bodies(
        self, topic: str, partition: int, bodies: list[bytes], *_: Any, **__: Any
    ) -> asyncio.Future[list[Result]]:
        return self._answer(partition, bodies)


async def test_columns_go_where_records_go() -> None:
    values = [b"v%d" % i * (1 + i % 900) for i in range(300)]  # sticky runs of many lengths
    records = [OutgoingRecord(RecordInput(None, v, (), NOW)) for v in values]
    columns = RequestRecords(
        [None] * len(values),
        [encode_record_body(None, v) for v in values],
        [NOW] * len(values),
        [record_size(RecordInput(None, v)) for v in values],
    )
    answers = []
    for given in (records, columns):
        producer = Recorder()
        partitioner = StickyPartitioner(batch_bytes=4096, rng=random.Random(7))
        publication = enqueue(producer, partitioner, Snapshot(), "t", given, acks=-1)  # type: ignore[arg-type]
        answers.append((await publication.results(), producer.queued))
    assert answers[0] == answers[1]
    assert len(answers[0][1]) > 1  # the records spread over several partitions
