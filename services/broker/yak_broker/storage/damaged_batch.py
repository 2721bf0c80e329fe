"""Bit rot in a sealed segment: a batch whose CRC-32C no longer matches is never served.

The leader appends only batches whose CRC it checked (``log_validator``) and never rewrites a
sealed (rolled) segment, so a sealed batch that fails its CRC was damaged at rest: a flipped
bit on the disk. ``Log.read`` passes what it read from a sealed segment through
``intact_prefix``: the batches before the first damaged one are served (the reader moves on
to it next), and a read that starts at a damaged batch raises ``DamagedBatchError`` — a
``KAFKA_STORAGE_ERROR`` (retriable, 503), the fault of the server's disk, not of the client's
request (``CORRUPT_MESSAGE`` is a 400: "your bytes are wrong"). The replica manager then
repairs the replica from an in-sync copy (``ReplicaManager.report_damage``).

The active segment is not checked on read: its batches were checked on append moments ago,
and the check costs a CRC pass over every byte served — paid only by reads of older data,
which come from the page cache or the disk anyway.

Pure: no I/O, no state; called on the log's thread.
"""

from __future__ import annotations

from yak.errors import CorruptRecordError, InvalidRecordError, KafkaStorageError
from yak.record.batch_header import iter_batches

__all__ = ["DamagedBatchError", "intact_prefix"]


class DamagedBatchError(KafkaStorageError):
    """A batch of a sealed segment fails its CRC or framing: ``details["offset"]`` is the
    offset whose batch is damaged (everything from that batch on is to be re-fetched)."""


def intact_prefix(records: memoryview, where: str, offset: int) -> memoryview:
    """``records`` (whole batches read from a sealed segment, the first holding ``offset``)
    up to the first damaged batch; ``DamagedBatchError`` if that is the first one."""
    good = 0
    try:
        for position, header in iter_batches(records):
            good = position + header.size
    except (CorruptRecordError, InvalidRecordError) as exc:
        if good == 0:
            raise DamagedBatchError(
                f"{where}: the stored batch holding offset {offset} is damaged ({exc}); it is "
                "not served and is being repaired from an in-sync replica: retry",
                offset=offset,
            ) from exc
        return records[:good]
    return records
