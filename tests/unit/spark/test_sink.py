"""``TaskSink``: derived sessions, routing, batching, and a rerun that writes nothing twice.

A fake rest-proxy (httpx ``MockTransport``) keeps each partition's log and the broker's
idempotence rules: a batch equal to one of the producer's last 5 is a duplicate (first offsets
again), any other batch must start at the next sequence (else 409 OUT_OF_ORDER_SEQUENCE_NUMBER
with the expected sequence), and an older epoch is fenced.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from yak.errors import InvalidProducerEpochError
from yak.partitioner import partition_for_key
from yak.spark.client import YakHttp
from yak.spark.options import parse_write_options
from yak.spark.sink import DERIVED_ID_BASE, EPOCHS, TaskSink, choose_partition, derived_session

URL = "http://proxy:9430"


class FakeProxy:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.logs: dict[int, list[tuple[bytes | None, bytes | None, list[object]]]] = {}
        self.producers: dict[tuple[int, int], tuple[int, list[tuple[int, int, int]]]] = {}
        self.requests = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.split("/")
        if request.method == "GET":
            return httpx.Response(
                200,
                json={
                    "name": parts[-1],
                    "topic_id": "x",
                    "partition_count": self.partitions,
                    "replication_factor": 1,
                    "configs": {},
                    "partitions": [],
                },
            )
        self.requests += 1
        partition = int(parts[-2])
        body = json.loads(request.content)
        pid, epoch, first = body["producer_id"], body["producer_epoch"], body["base_sequence"]
        last = first + len(body["records"]) - 1
        known_epoch, window = self.producers.get((pid, partition), (epoch, []))
        log = self.logs.setdefault(partition, [])
        if epoch < known_epoch:
            return _error(409, "INVALID_PRODUCER_EPOCH", {})
        if epoch > known_epoch:
            window = []
        for f, l_, offset in window:
            if (f, l_) == (first, last):
                return _answer(partition, offset, len(body["records"]))
        if (pid, partition) not in self.producers:
            expected = first  # a producer the partition does not know may start anywhere
        elif epoch > known_epoch:
            expected = 0
        else:
            expected = window[-1][1] + 1 if window else 0
        if first != expected:
            return _error(409, "OUT_OF_ORDER_SEQUENCE_NUMBER", {"expected_sequence": expected})
        offset = len(log)
        for r in body["records"]:
            log.append((_unb64(r.get("key")), _unb64(r.get("value")), r.get("headers", [])))
        self.producers[(pid, partition)] = (epoch, [*window, (first, last, offset)][-5:])
        return _answer(partition, offset, len(body["records"]))


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _answer(partition: int, offset: int, count: int) -> httpx.Response:
    offsets = list(range(offset, offset + count))
    return httpx.Response(
        200, json={"partition": partition, "base_offset": offset, "offsets": offsets}
    )


def _error(status: int, code: str, details: dict[str, int]) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": code, "details": details})


def run(proxy: FakeProxy, rows, session=(DERIVED_ID_BASE + 1, 0), **options: str) -> TaskSink:
    opts = parse_write_options({"url": URL, "maxRecordsPerBatch": "3", **options})
    with YakHttp([URL], timeout_s=5, transport=httpx.MockTransport(proxy.handle)) as http:
        sink = TaskSink(http, opts, session, spark_partition=1)
        for key, value, partition in rows:
            sink.add("t", key, value, [("h", b"v")], partition)
        sink.flush()
    return sink


def test_derived_sessions_are_stable_high_and_bump_the_epoch_per_batch():
    pid, epoch = derived_session("query-1", 3, 7)
    assert derived_session("query-1", 3, 7) == (pid, epoch)
    assert DERIVED_ID_BASE <= pid < 2**63
    assert epoch == 7
    assert derived_session("query-1", 3, 8) == (pid, 8)
    assert derived_session("query-1", 3, EPOCHS + 7)[1] == 7
    assert derived_session("query-1", 3, EPOCHS + 7)[0] != pid
    assert derived_session("query-1", 4, 7)[0] != pid
    assert derived_session("query-2", 3, 7)[0] != pid


def test_choose_partition():
    assert choose_partition(b"k", None, 8, 0) == partition_for_key(b"k", 8)
    assert choose_partition(b"k", 5, 8, 0) == 5
    assert [choose_partition(None, None, 3, i) for i in range(4, 8)] == [1, 2, 0, 1]
    with pytest.raises(ValueError, match="partition column: 8"):
        choose_partition(None, 8, 8, 0)


def test_rows_are_batched_per_partition_and_sent_in_order():
    proxy = FakeProxy(partitions=2)
    rows = [(None, f"v{i}".encode(), i % 2) for i in range(10)]
    sink = run(proxy, rows)
    assert (sink.records, sink.batches, sink.duplicates) == (10, 4, 0)
    assert [v for _, v, _ in proxy.logs[0]] == [f"v{i}".encode() for i in range(0, 10, 2)]
    assert [v for _, v, _ in proxy.logs[1]] == [f"v{i}".encode() for i in range(1, 10, 2)]


def test_batches_close_at_max_bytes():
    proxy = FakeProxy(partitions=1)
    sink = run(
        proxy, [(None, b"x" * 10, None)] * 4, maxRecordsPerBatch="100", maxBytesPerBatch="20"
    )
    assert sink.batches == 2  # 13 bytes a record (value and header): two records a batch


def test_a_rerun_of_the_same_task_writes_nothing_twice():
    proxy = FakeProxy(partitions=2)
    rows = [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(40)]  # > 5 batches each
    run(proxy, rows)
    logs = {p: list(log) for p, log in proxy.logs.items()}
    again = run(proxy, rows)
    assert proxy.logs == logs
    assert again.records == 40
    assert again.duplicates > 0


def test_a_partial_first_run_is_completed_by_the_rerun():
    proxy = FakeProxy(partitions=1)
    rows = [(None, f"v{i}".encode(), None) for i in range(20)]
    run(proxy, rows[:7])  # the first run died after 7 rows (2 full batches + 1 partial)
    del proxy.logs[0][6:]  # ... and its partial last batch never arrived
    window = proxy.producers[(DERIVED_ID_BASE + 1, 0)]
    proxy.producers[(DERIVED_ID_BASE + 1, 0)] = (window[0], window[1][:-1])
    run(proxy, rows)
    assert [v for _, v, _ in proxy.logs[0]] == [r[1] for r in rows]


def test_a_task_of_an_older_batch_is_fenced():
    proxy = FakeProxy(partitions=1)
    run(proxy, [(None, b"new", None)], session=(DERIVED_ID_BASE + 1, 5))
    with pytest.raises(InvalidProducerEpochError):
        run(proxy, [(None, b"zombie", None)], session=(DERIVED_ID_BASE + 1, 4))
