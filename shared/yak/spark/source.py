"""``YakDataSource``: the PySpark data source named ``yak`` (``spark.read.format("yak")``).

One class serves the four modes of PySpark's Python data source API: batch and streaming
reads (``yak.spark.reader``, ``yak.spark.stream``) and batch and streaming writes
(``yak.spark.writer``). Options are parsed, and rejected with an ``OptionError`` naming the
option, on the driver when the reader or writer is made, so a bad option fails the query
before any task runs. Spark pickles the objects it returns to its Python workers: they hold
only parsed options, and open their HTTP clients in ``read()`` / ``write()``.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType
from typing_extensions import override

from yak.spark.options import parse_read_options, parse_write_options
from yak.spark.reader import SCHEMA, YakBatchReader
from yak.spark.stream import YakStreamReader
from yak.spark.writer import YakBatchWriter, YakStreamWriter, check_schema

__all__ = ["YakDataSource"]


class YakDataSource(DataSource):
    """Reads and writes Yak topics through the rest-proxy's native API (``url`` option)."""

    @classmethod
    @override
    def name(cls) -> str:
        return "yak"

    @override
    def schema(self) -> StructType:
        return SCHEMA

    @override
    def reader(self, schema: StructType) -> DataSourceReader:
        return YakBatchReader(parse_read_options(self.options, streaming=False))

    @override
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return YakStreamReader(parse_read_options(self.options, streaming=True))

    @override
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("yak sink: a topic can only be appended to: use mode('append')")
        options = parse_write_options(self.options)
        check_schema(schema, options)
        return YakBatchWriter(options)

    @override
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_write_options(self.options)
        check_schema(schema, options)
        return YakStreamWriter(options)
