"""``ReplicaLog``: what the replication machines need of a partition log.

``yak_broker.storage.log.Log`` implements it; the machines are written against this protocol so
that their needs stay visible and small. All calls are synchronous and happen on the caller's
thread; the machines never hold a log across an await (they have none).
"""

from __future__ import annotations

from typing import Protocol

from yak.protocol.broker_wire import Buffer

__all__ = ["ReplicaLog"]


class ReplicaLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def latest_epoch(self) -> int | None: ...

    def update_high_watermark(self, offset: int) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def assign_epoch(self, epoch: int, start_offset: int) -> None: ...

    def append_as_follower(self, records: Buffer) -> object: ...

    def truncate_to(self, offset: int) -> bool: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...
