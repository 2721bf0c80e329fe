"""Reading offset ranges into Arrow batches, and the batch reader of the ``yak`` source.

``YakBatchReader`` resolves everything on the driver, once: the partitions of the
subscription, their start offsets (``startingOffsets`` or ``startingTimestamp``) and end
offsets (``endingOffsets``, never past the high watermark seen then), cut into
``RangePartition``s by ``maxRecordsPerPartition`` / ``minPartitions``. A task reads its range
with stateless partition reads (no consumer group) and yields Arrow record batches in the
schema of Spark's Kafka source, in offset order; records appended after planning are not read.
With the ``filter`` option each read sends it and the proxy returns only the records it passes;
the read offset still moves to the proxy's ``next_offset``, past the records it dropped (a page
may hold none), so ranges, offsets and ``maxOffsetsPerTrigger`` count the partition's offsets.

Data loss (``yak.spark.offsets``): a range whose first offsets were deleted fails the task with
``DataLossError``, or with ``failOnDataLoss=false`` starts at the log start; a range reaching
past the partition's current end fails or stops there. A range planned "from the log start"
(``start`` None: a partition new to a streaming query) never reports loss at its start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from typing_extensions import override

from yak.api.records import ConsumedRecord
from yak.errors import OffsetOutOfRangeError
from yak.sdk.records import consumer_record
from yak.spark.client import YakHttp
from yak.spark.offsets import OffsetRange, check_end, check_start, split_ranges
from yak.spark.options import ReadOptions
from yak.spark.resolve import bounds, by_timestamp, discover, resolve
from yak.types import TopicPartition

__all__ = ["SCHEMA", "RangePartition", "YakBatchReader", "read_range"]

#: The columns of Spark's Kafka source.
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)
_ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
#: Yak stores the producer's create time (Kafka's timestampType 0), never log-append time.
_CREATE_TIME = 0


class RangePartition(InputPartition):
    """One Spark task's work: an offset range of one Yak partition, and which rest-proxy of
    the ``url`` list the task asks first (``index``)."""

    def __init__(self, offset_range: OffsetRange, index: int) -> None:
        super().__init__(offset_range)
        self.range = offset_range
        self.index = index


def to_record_batch(records: Sequence[ConsumedRecord]) -> pa.RecordBatch:
    """Records read with base64 encodings as one Arrow batch of ``SCHEMA``."""
    decoded = [consumer_record(r) for r in records]
    columns = [
        [r.key for r in decoded],
        [r.value for r in decoded],
        [r.topic for r in decoded],
        [r.partition for r in decoded],
        [r.offset for r in decoded],
        [r.timestamp * 1000 for r in decoded],  # ms → µs
        [_CREATE_TIME] * len(decoded),
        [[{"key": k, "value": v} for k, v in r.headers] for r in decoded],
    ]
    arrays = [
        pa.array(column, type=field.type)
        for column, field in zip(columns, _ARROW_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=_ARROW_SCHEMA)


def read_range(
    offset_range: OffsetRange, options: ReadOptions, index: int
) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` in offset order, one Arrow batch per read request."""
    topic, partition, start, end = offset_range
    tp = TopicPartition(topic, partition)
    fail = options.fail_on_data_loss
    with YakHttp(options.urls, timeout_s=options.request_timeout_s, start=index) as http:
        offset = http.bounds(topic, partition)[0] if start is None else start
        while offset < end:
            try:
                page = http.read(topic, partition, offset, options.fetch_max_bytes, options.filter)
            except OffsetOutOfRangeError as exc:
                log_start = exc.details.get("log_start_offset")
                log_end = exc.details.get("log_end_offset")
                if not isinstance(log_start, int) or not isinstance(log_end, int):
                    raise
                if offset < log_start:
                    offset = check_start(tp, offset, log_start, fail_on_data_loss=fail)
                    continue
                check_end(tp, offset, end, log_end, fail_on_data_loss=fail)
                return
            if page.log_start_offset > offset:  # a read never starts below the log start
                offset = check_start(tp, offset, page.log_start_offset, fail_on_data_loss=fail)
            records = [r for r in page.records if r.offset < end]
            if records:
                yield to_record_batch(records)
            if page.next_offset > offset:
                offset = page.next_offset
            elif check_end(tp, offset, end, page.high_watermark, fail_on_data_loss=fail):
                raise RuntimeError(f"{tp}: reading from offset {offset} makes no progress")
            else:
                return


def plan(ranges: Sequence[OffsetRange], options: ReadOptions) -> list[RangePartition]:
    """``ranges`` cut by the split options, as Spark partitions spread over the proxies."""
    pieces = split_ranges(
        ranges,
        max_records=options.max_records_per_partition,
        min_partitions=options.min_partitions,
    )
    return [RangePartition(r, i) for i, r in enumerate(pieces)]


class YakBatchReader(DataSourceReader):
    """``spark.read.format("yak")``: see the module docstring."""

    def __init__(self, options: ReadOptions) -> None:
        self._options = options

    @override
    def partitions(self) -> Sequence[InputPartition]:
        opts = self._options
        with YakHttp(opts.urls, timeout_s=opts.request_timeout_s) as http:
            found = bounds(http, discover(http, opts.subscription))
            if opts.starting_timestamp is not None:
                starts = by_timestamp(http, opts.starting_timestamp, found)
            else:
                starts = resolve(opts.starting, "startingOffsets", found)
        ends = resolve(opts.ending, "endingOffsets", found)
        ranges = [
            OffsetRange(tp.topic, tp.partition, starts[tp], min(ends[tp], found[tp][1]))
            for tp in sorted(found)
        ]
        return plan(ranges, opts)

    @override
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(partition.range, self._options, partition.index)
