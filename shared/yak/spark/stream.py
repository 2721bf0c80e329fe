"""The streaming reader of the ``yak`` source (``spark.readStream.format("yak")``).

Offsets are Spark's, checkpointed by Spark: JSON ``{"topic": {"0": 42}}`` holding, per
partition, the next offset to read. Nothing is committed to Yak (no consumer group), so
``commit`` does nothing: the checkpoint is the truth, and a restarted query re-reads exactly
the offset range of its last unfinished micro-batch.

Each micro-batch ends where the partitions' high watermarks are when it is planned, limited
by ``maxOffsetsPerTrigger`` (shared over the partitions in proportion to their backlog). The
subscription is looked up again for every micro-batch, so partitions added to a topic and new
topics matching ``subscribePattern`` are picked up; they are read from their log start.
``Trigger.AvailableNow`` fixes the end offsets when the query starts (partitions appearing
later wait for the next run) and then reads up to them in as many micro-batches as the limit
needs. Data loss (``failOnDataLoss``): a partition that disappeared or now ends below the
query's position fails the query, or is dropped / read again from its log start; offsets
deleted before they were read are handled by the read itself (``yak.spark.reader``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from typing_extensions import override

from yak.spark.client import YakHttp
from yak.spark.offsets import (
    DataLossError,
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
)
from yak.spark.options import ReadOptions
from yak.spark.reader import RangePartition, plan, read_range
from yak.spark.resolve import Bounds, bounds, by_timestamp, discover, resolve
from yak.types import TopicPartition

__all__ = ["YakStreamReader"]


class YakStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring. Lives on the driver for the whole query run."""

    def __init__(self, options: ReadOptions) -> None:
        self._options = options
        #: The end offsets of an availableNow run, fixed when it starts.
        self._target: dict[TopicPartition, int] | None = None

    def _http(self) -> YakHttp:
        return YakHttp(self._options.urls, timeout_s=self._options.request_timeout_s)

    def _current(self, http: YakHttp) -> Bounds:
        return bounds(http, discover(http, self._options.subscription, missing_ok=True))

    @override
    def initialOffset(self) -> dict[str, dict[str, int]]:
        opts = self._options
        with self._http() as http:
            found = self._current(http)
            if opts.starting_timestamp is not None:
                starts = by_timestamp(http, opts.starting_timestamp, found)
            else:
                starts = resolve(opts.starting, "startingOffsets", found)
        return offsets_to_json(starts)

    @override
    def prepareForTriggerAvailableNow(self) -> None:
        with self._http() as http:
            self._target = {tp: hw for tp, (_, hw) in self._current(http).items()}

    @override
    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    @override
    def latestOffset(self, start: dict[str, object], limit: ReadLimit) -> dict[str, object]:
        position = offsets_from_json(start)
        with self._http() as http:
            current = self._current(http)
        fail = self._options.fail_on_data_loss
        for tp, offset in sorted(position.items()):
            if tp not in current:
                _lost(fail, f"{tp} no longer exists (its topic was deleted?)")
            elif current[tp][1] < offset:
                _lost(fail, f"{tp} now ends at {current[tp][1]}, below the query's {offset}")
        # A partition new to the query, or re-created below its position, starts at its log
        # start; one that disappeared is dropped (or failed the query above).
        starts = {
            tp: position[tp] if tp in position and position[tp] <= hw else log_start
            for tp, (log_start, hw) in current.items()
        }
        ends = {tp: hw for tp, (_, hw) in current.items()}
        if self._target is not None:
            ends = {
                tp: max(starts[tp], min(hw, self._target[tp]))
                for tp, hw in ends.items()
                if tp in self._target
            }
            starts = {tp: starts[tp] for tp in ends}
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(starts, ends, limit.max_rows)
        return dict(offsets_to_json(ends))

    @override
    def partitions(
        self, start: dict[str, object], end: dict[str, object]
    ) -> Sequence[InputPartition]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        ranges = []
        for tp, last in sorted(finish.items()):
            first = begin.get(tp)
            if first is None and last == 0:
                continue  # a new, empty partition
            if first is not None and first > last:
                first = None  # re-created below the query's position: from its log start
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
        return plan(ranges, self._options)

    @override
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(partition.range, self._options, partition.index)

    @override
    def commit(self, end: dict[str, object]) -> None:
        """Nothing to do: Spark's checkpoint holds the query's position."""


def _lost(fail_on_data_loss: bool, message: str) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"{message}. Set the option failOnDataLoss=false to go on without it.")
