"""``enqueue`` of a request's records in columns (``RequestRecords``) puts each record in the
partition, and in the order, that the record-at-a-time path does."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from yak.errors import MessageTooLargeError
from yak.partitioner import StickyPartitioner
from yak.record import RecordInput
from yak.record.record_encoder import encode_record_body
from yak_rest_proxy.produce.accumulator import ProducedRecord, Result, batch_limit, record_size
from yak_rest_proxy.produce.publish import OutgoingRecord, RequestRecords, check_records, enqueue

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


def test_a_batch_is_capped_by_the_smaller_of_max_message_bytes_and_a_segment() -> None:
    assert batch_limit({}) == 1024 * 1024 + 12  # the default max.message.bytes
    assert batch_limit({"segment.bytes": "65536"}) == 65536
    assert batch_limit({"segment.bytes": "65536", "max.message.bytes": "2000"}) == 2000


def _given(values: list[bytes], as_columns: bool) -> Sequence[OutgoingRecord]:
    """The records of a request with these values, as records or in columns."""
    records = [OutgoingRecord(RecordInput(None, v, (), NOW)) for v in values]
    if not as_columns:
        return records
    return RequestRecords(
        [None] * len(values),
        [encode_record_body(None, v) for v in values],
        [NOW] * len(values),
        [record.size for record in records],
    )


@pytest.mark.parametrize("as_columns", [False, True])
def test_a_record_larger_than_a_segment_is_refused_by_its_place(as_columns: bool) -> None:
    """Records that each fit a segment pass, however many (the producer splits them); one that
    does not is named, with the limit that refused it, not the request's size."""
    snapshot: Any = Snapshot({"t": Topic(configs={"segment.bytes": "4096"})})
    small = [b"x" * 1000] * 50
    assert check_records(snapshot, "t", _given(small, as_columns)) == 8
    with pytest.raises(MessageTooLargeError, match=re.escape("records[50]")) as refused:
        check_records(snapshot, "t", _given([*small, b"y" * 5000], as_columns))
    assert "segment.bytes" in refused.value.message
