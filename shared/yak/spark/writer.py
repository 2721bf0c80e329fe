"""The batch and streaming writers of the ``yak`` data source (``df.write`` / ``writeStream``).

Columns, as Spark's Kafka sink takes them: ``value`` (binary or string) is required; ``key``
(binary or string), ``topic`` (string), ``partition`` (int) and ``headers``
(``array<struct<key:string,value:binary or string>>``) are optional; other columns are
ignored. The option ``topic``, when given, overrides the ``topic`` column (as in Spark's Kafka
sink), so a DataFrame read from one topic can be written to another unchanged. Every row
needs a topic from one or the other.

Each task sends its rows through a ``TaskSink`` under an idempotent session derived from the
task's identity (``yak.spark.sink``): a streaming micro-batch replayed after a restart from
its checkpoint, or a retried task, re-sends the same batches and the brokers drop the copies —
the output is exactly-once for deterministic queries. Records are visible as soon as they are
written (no transactions): a reader may see part of a micro-batch that failed and is replayed
later, but never twice. Nothing happens on commit or abort.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)
from typing_extensions import override

from yak.spark.client import YakHttp
from yak.spark.options import OptionError, WriteOptions
from yak.spark.sink import TaskSink, derived_session

__all__ = ["YakBatchWriter", "YakCommitMessage", "YakStreamWriter", "check_schema"]

#: Spark local properties set on every task of a streaming micro-batch.
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"
_DATA = (BinaryType(), StringType())


@dataclass(frozen=True)
class YakCommitMessage(WriterCommitMessage):
    """What one task wrote: records, batches sent, and batches an earlier run had written."""

    records: int
    batches: int
    duplicates: int


def _is_headers(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and fields["key"] == StringType()
        and (fields["value"] in _DATA)
    )


def check_schema(schema: StructType, options: WriteOptions) -> None:
    """``ValueError`` naming the column if ``schema`` cannot be written."""
    columns = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in columns:
        raise ValueError("yak sink: the DataFrame needs a 'value' column (binary or string)")
    for name in ("value", "key"):
        if name in columns and columns[name] not in _DATA:
            raise ValueError(f"yak sink: column {name!r} must be binary or string")
    if "topic" in columns and columns["topic"] != StringType():
        raise ValueError("yak sink: column 'topic' must be a string")
    if "topic" not in columns and options.topic is None:
        raise OptionError("topic", "required when the DataFrame has no 'topic' column")
    if "partition" in columns and columns["partition"] != IntegerType():
        raise ValueError("yak sink: column 'partition' must be an int")
    if "headers" in columns and not _is_headers(columns["headers"]):
        raise ValueError(
            "yak sink: column 'headers' must be array<struct<key:string,value:binary>> "
            "(or a string value)"
        )


def _data(item: object) -> bytes | None:
    if item is None or isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode()
    raise TypeError(f"yak sink: expected bytes or a string, got {type(item).__name__}")


def write_batches(
    batches: Iterator[pa.RecordBatch], options: WriteOptions, session: tuple[int, int], index: int
) -> YakCommitMessage:
    """Send every row of ``batches`` (one task's) under ``session``."""
    with YakHttp(options.urls, timeout_s=options.request_timeout_s, start=index) as http:
        sink = TaskSink(http, options, session, index)
        for batch in batches:
            columns = {
                name.lower(): batch.column(i).to_pylist()
                for i, name in enumerate(batch.schema.names)
            }
            size = batch.num_rows
            none = [None] * size
            topics = [options.topic] * size if options.topic else columns["topic"]
            keys, headers = columns.get("key", none), columns.get("headers", none)
            partitions = columns.get("partition", none)
            for row, value in enumerate(columns["value"]):
                topic = topics[row]
                if topic is None:
                    raise ValueError("yak sink: a row has a null topic and no option 'topic'")
                pairs = [(h["key"], _data(h["value"])) for h in headers[row] or ()]
                sink.add(topic, _data(keys[row]), _data(value), pairs, partitions[row])
        sink.flush()
    return YakCommitMessage(sink.records, sink.batches, sink.duplicates)


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("yak sink: write() runs outside a Spark task")
    return context


class YakBatchWriter(DataSourceArrowWriter):
    """``df.write.format("yak")``: one random job id, drawn on the driver, for every task."""

    def __init__(self, options: WriteOptions) -> None:
        self._options = options
        self._job_id = uuid.uuid4().hex

    @override
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        index = _task().partitionId()
        session = derived_session(self._job_id, index, 0)
        return write_batches(iterator, self._options, session, index)


class YakStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("yak")``: sessions from the query id and the batch id."""

    def __init__(self, options: WriteOptions) -> None:
        self._options = options

    @override
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = _task()
        query_id, batch_id = (
            context.getLocalProperty(_QUERY_ID),
            context.getLocalProperty(_BATCH_ID),
        )
        if query_id is None or batch_id is None:
            raise RuntimeError(f"yak sink: Spark set no {_QUERY_ID} / {_BATCH_ID} on the task")
        index = context.partitionId()
        session = derived_session(query_id, index, int(batch_id))
        return write_batches(iterator, self._options, session, index)

    @override
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every record was written by its task."""

    @override
    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: a replay of the batch is recognised by its sessions."""
