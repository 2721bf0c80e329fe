"""What the replication machines exchange and emit: plain immutable values.

Requests a follower sends (``EpochQuery``, ``FetchPosition``), the answers it applies
(``EpochAnswer``, ``FetchAnswer``), and the outputs of a leader (``HighWatermarkAdvanced``,
``AlterIsr``). Errors travel as Kafka's error names (``yak.errors`` codes), so the in-memory
network of the tests and the HTTP driver carry the same thing.
"""

from __future__ import annotations

from typing import NamedTuple

from yak.protocol.broker_wire import Buffer

__all__ = [
    "FENCED_LEADER_EPOCH",
    "NOT_LEADER_OR_FOLLOWER",
    "OFFSET_OUT_OF_RANGE",
    "UNDEFINED_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "AlterIsr",
    "EpochAnswer",
    "EpochQuery",
    "FetchAnswer",
    "FetchPosition",
    "HighWatermarkAdvanced",
    "LeaderOutput",
]

FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
#: "No epoch" in OffsetsForLeaderEpoch questions and answers.
UNDEFINED_EPOCH = -1


class EpochQuery(NamedTuple):
    """OffsetsForLeaderEpoch: where does ``leader_epoch`` end in the leader's log?"""

    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


class EpochAnswer(NamedTuple):
    """The largest epoch <= the one asked that the leader knows, and its end offset."""

    topic: str
    partition: int
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = -1
    error: str | None = None


class FetchPosition(NamedTuple):
    """Fetch from ``fetch_offset`` (the follower's log end offset)."""

    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int


class FetchAnswer(NamedTuple):
    """The leader's answer for one partition: batches from the position, its HW and log start.

    On ``OFFSET_OUT_OF_RANGE`` the leader still fills ``log_start_offset`` and
    ``high_watermark`` (or -1 when it cannot), so the follower can reset.
    """

    topic: str
    partition: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: Buffer = b""
    error: str | None = None


class HighWatermarkAdvanced(NamedTuple):
    """The leader's high watermark moved up to ``high_watermark`` (already set in the log)."""

    high_watermark: int


class AlterIsr(NamedTuple):
    """A leader's proposal: set the ISR to ``new_isr`` if the partition is still at
    ``expected_partition_epoch`` under this leader and epoch (a compare-and-swap).

    ``log_dirs``: the data folder ids to record for members (``PartitionState.isr_log_dirs``):
    the one a member being added fetched from, and the leader's own; members kept keep theirs.
    """

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    expected_partition_epoch: int
    new_isr: tuple[int, ...]
    log_dirs: tuple[tuple[int, str], ...] = ()


LeaderOutput = HighWatermarkAdvanced | AlterIsr
