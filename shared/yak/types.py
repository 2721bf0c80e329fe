"""Value types that several services and the clients share.

Plain ``NamedTuple`` values with no behaviour beyond naming and formatting, so that any module
can name them without importing the component that happens to use them most (a log manager,
a consumer, an assignor). This module imports only the standard library.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic: ``(topic, partition)``, hashable and ordered.

    ``str()`` and :attr:`dir_name` give ``<topic>-<partition>``, the name of its folder on a
    broker's disk and the form Kafka's tools print; :meth:`parse` reads that form back.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, dir_name: str) -> TopicPartition | None:
        """``orders-3`` → ``TopicPartition("orders", 3)``; ``None`` for anything else."""
        topic, sep, number = dir_name.rpartition("-")
        if not sep or not topic or not number.isdigit():
            return None
        return cls(topic, int(number))
