"""``TaskSink``: what one Spark write task sends to Yak, as idempotent batches (no Spark here).

Each task writes under one idempotent producer session derived from who it is, never handed
out by the cluster, so that running the same task again (a task retry, or a restarted query
replaying its last micro-batch) presents the *same* session and the *same* sequence numbers:

* a micro-batch task: producer id = ``2**62 | sha256("yak-spark", query id, Spark partition,
  batch id // 32768)[:62 bits]``, producer epoch = ``batch id % 32768``. The query id is kept
  in the checkpoint, so a restart keeps it; each new batch bumps the epoch, which also fences
  a zombie task of an earlier batch (``INVALID_PRODUCER_EPOCH``);
* a batch-write task: the same with a random job id drawn once on the driver, epoch 0.

Ids at or above ``2**62`` are never handed out by ``POST /api/v1/producers`` (it counts up from
0), and two derived ids collide with probability ~2**-62 per pair.

Within the session each Yak partition numbers its records from 0. Rows are routed and cut
into batches deterministically: an explicit ``partition``, else Kafka's murmur2 of the key,
else round-robin by row index from the task's Spark partition; a batch closes at
``maxRecordsPerBatch`` records or ``maxBytesPerBatch`` bytes. So a rerun over the same rows
in the same order sends byte-identical batches with identical stamps, and the partition
leader answers each one it already has with its first offsets (its 5-batch window), or — for
an older one — ``OUT_OF_ORDER_SEQUENCE_NUMBER`` expecting a sequence past it, which here means
"already written" as well. Exactly-once therefore needs a deterministic query (the same rows
per Spark partition, in the same order, on a rerun) and unchanged partition counts; the
broker forgets idle producers after ``producer.id.expiration.ms`` (24 h).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from yak.errors import OutOfOrderSequenceError
from yak.partitioner import partition_for_key
from yak.sdk.idempotence import SEQUENCE_LIMIT, BatchStamp
from yak.spark.client import OutgoingRecord, YakHttp
from yak.spark.options import WriteOptions

__all__ = ["DERIVED_ID_BASE", "EPOCHS", "TaskSink", "derived_session"]

#: Derived producer ids live in [2**62, 2**63).
DERIVED_ID_BASE = 1 << 62
#: Producer epochs are int16; a session serves this many micro-batches, one epoch each.
EPOCHS = 32768


def derived_session(run_id: str, spark_partition: int, batch_id: int) -> tuple[int, int]:
    """(producer id, epoch) of one write task (see the module docstring)."""
    name = f"yak-spark/{run_id}/{spark_partition}/{batch_id // EPOCHS}".encode()
    digest = int.from_bytes(hashlib.sha256(name).digest()[:8], "big")
    return DERIVED_ID_BASE | (digest & (DERIVED_ID_BASE - 1)), batch_id % EPOCHS


def choose_partition(
    key: bytes | None, explicit: int | None, partition_count: int, row_index: int
) -> int:
    """The Yak partition of one row (see the module docstring)."""
    if explicit is not None:
        if not 0 <= explicit < partition_count:
            raise ValueError(
                f"partition column: {explicit} is not a partition of the topic "
                f"(it has {partition_count})"
            )
        return explicit
    if key is not None:
        return partition_for_key(key, partition_count)
    return row_index % partition_count


@dataclass
class _Pending:
    records: list[OutgoingRecord] = field(default_factory=list)
    size: int = 0
    next_sequence: int = 0


def _record_size(record: OutgoingRecord) -> int:
    key, value, headers = record
    return len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers)


class TaskSink:
    """Routes, batches and sends one task's rows under one derived session."""

    def __init__(
        self,
        http: YakHttp,
        options: WriteOptions,
        session: tuple[int, int],
        spark_partition: int,
    ) -> None:
        self._http = http
        self._options = options
        self._session = session
        self._rows = spark_partition  # round-robin starts at the task's partition
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._partition_counts: dict[str, int] = {}
        self.records = 0
        self.batches = 0
        self.duplicates = 0

    def partition_count(self, topic: str) -> int:
        if topic not in self._partition_counts:
            self._partition_counts[topic] = self._http.describe_topic(topic).partition_count
        return self._partition_counts[topic]

    def add(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        partition: int | None,
    ) -> None:
        chosen = choose_partition(key, partition, self.partition_count(topic), self._rows)
        self._rows += 1
        pending = self._pending.setdefault((topic, chosen), _Pending())
        record: OutgoingRecord = (key, value, tuple(headers))
        pending.records.append(record)
        pending.size += _record_size(record)
        opts = self._options
        full = len(pending.records) >= opts.max_records_per_batch
        if full or pending.size >= opts.max_bytes_per_batch:
            self._send(topic, chosen, pending)

    def flush(self) -> None:
        """Send every partly filled batch, in (topic, partition) order."""
        for (topic, partition), pending in sorted(self._pending.items()):
            if pending.records:
                self._send(topic, partition, pending)

    def _send(self, topic: str, partition: int, pending: _Pending) -> None:
        producer_id, epoch = self._session
        stamp = BatchStamp(producer_id, epoch, pending.next_sequence)
        count = len(pending.records)
        try:
            self._http.produce_batch(
                topic, partition, stamp, pending.records, self._options.compression
            )
        except OutOfOrderSequenceError as exc:
            expected = exc.details.get("expected_sequence")
            if not isinstance(expected, int) or expected < stamp.base_sequence + count:
                raise
            self.duplicates += 1  # an earlier run of this task wrote it, and more after it
        self.records += count
        self.batches += 1
        pending.next_sequence = (pending.next_sequence + count) % SEQUENCE_LIMIT
        pending.records = []
        pending.size = 0
