"""Yak for PySpark: the data source ``yak`` (batch and streaming reads and writes).

Needs the ``spark`` extra (``pip install 'yak[spark]'``: pyspark, pyarrow) on the driver and on
every worker, since Spark imports these classes by name in its Python workers. Nothing else in
Yak imports this package. Usage::

    from yak.spark import register
    register(spark)
    df = (spark.read.format("yak").option("url", "http://proxy:9430")
          .option("subscribe", "orders").load())

Semantics (offsets, data loss, exactly-once writes): ``docs/spark.md`` and the module
docstrings of ``yak.spark.reader``, ``yak.spark.stream`` and ``yak.spark.sink``.
"""

from pyspark.sql import SparkSession

from yak.spark.offsets import DataLossError
from yak.spark.options import OptionError
from yak.spark.reader import SCHEMA
from yak.spark.source import YakDataSource

__all__ = ["SCHEMA", "DataLossError", "OptionError", "YakDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("yak")`` available in ``spark``."""
    spark.dataSource.register(YakDataSource)
