"""``FollowerPartition``: one partition on a follower, for one leader and leader epoch.

Owns the follower's replication state (``status``) and, through the ``ReplicaLog`` it is given,
the follower's log: truncation, appends of the leader's batches, its high watermark. States::

    TRUNCATING --epoch answer, divergence found--> FETCHING
    FETCHING --OFFSET_OUT_OF_RANGE, our LEO not below the leader's start--> TRUNCATING
    any --FENCED_LEADER_EPOCH--> FENCED (idle: the broker creates a machine for the new epoch)

- ``TRUNCATING`` asks the leader where our latest epoch ends (``EpochQuery``) and truncates to
  the divergence point, as Kafka's fetcher does since KIP-279: the leader answers with the
  largest epoch it knows up to ours and where it ends; if we know that epoch too we truncate to
  the smaller of both ends (done); if we don't, we truncate to the end of our largest epoch
  below it and ask again; if we know no epoch at all, we truncate to the leader's end. An
  undefined answer (the leader knows no such epoch) falls back to our high watermark (KIP-101's
  behaviour before epochs).
- ``FETCHING`` asks for batches from our LEO (``FetchPosition``) and appends what comes with the
  leader's offsets and epochs (``append_as_follower``), then sets our high watermark to
  ``min(leader's HW, our LEO)``. ``OFFSET_OUT_OF_RANGE`` below the leader's log start restarts
  the log empty at that start.

Invariant: once ``FETCHING``, our log is a prefix of the leader's (it was cut at the divergence
point, then fed only by this leader in this epoch) — so the LEO we report may count for the
leader's high watermark. The broker creates a new machine on every new leader or leader epoch,
so no divergent history survives a failover. Crash: the next machine starts in ``TRUNCATING``
(the log, its epoch cache and HW checkpoint are all that persist). Retriable errors
(``NOT_LEADER_OR_FOLLOWER`` or ``UNKNOWN_LEADER_EPOCH`` while the leader's metadata lags) leave
the state as is and are kept in ``last_error``; the driver backs off before the next round. Not
thread-safe; one event loop drives it.
"""

from __future__ import annotations

import enum
import logging

from yak.errors import YakError
from yak.metadata.models import PartitionState
from yak_broker.replication.state.messages import (
    FENCED_LEADER_EPOCH,
    OFFSET_OUT_OF_RANGE,
    UNDEFINED_EPOCH,
    EpochAnswer,
    EpochQuery,
    FetchAnswer,
    FetchPosition,
)
from yak_broker.replication.state.replica_log import ReplicaLog

__all__ = ["FollowerPartition", "FollowerStatus"]

_log = logging.getLogger(__name__)


class FollowerStatus(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    FENCED = "fenced"


class FollowerPartition:
    """See the module doc."""

    def __init__(self, broker_id: int, state: PartitionState, log: ReplicaLog) -> None:
        if state.leader == broker_id:
            raise ValueError(f"broker {broker_id} leads {state.topic}-{state.partition}")
        self.broker_id = broker_id
        self.topic = state.topic
        self.partition = state.partition
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.log = log
        self.status = FollowerStatus.TRUNCATING
        #: After a partial truncation, the epoch to ask about next: the log's latest epoch may
        #: still be an empty one stamped at its end (``Log.truncate_to`` at or past the LEO
        #: leaves the epoch cache alone), and asking about it again would loop forever.
        self._next_epoch: int | None = None
        #: Last error applied (for operators and tests); None after a success.
        self.last_error: str | None = None

    def next_request(self) -> EpochQuery | FetchPosition | None:
        """What to ask the leader next (None: nothing until new metadata)."""
        if self.status is FollowerStatus.TRUNCATING:
            epoch = self._next_epoch if self._next_epoch is not None else self.log.latest_epoch
            return EpochQuery(
                self.topic,
                self.partition,
                self.leader_epoch,
                UNDEFINED_EPOCH if epoch is None else epoch,
            )
        if self.status is FollowerStatus.FETCHING:
            return FetchPosition(
                self.topic, self.partition, self.log.log_end_offset, self.leader_epoch
            )
        return None

    def on_epoch_answer(self, answer: EpochAnswer) -> None:
        """Truncate to the divergence point (see the module doc)."""
        if self.status is not FollowerStatus.TRUNCATING or self._failed(answer.error):
            return
        log = self.log
        leo = log.log_end_offset
        self._next_epoch = None
        if answer.leader_epoch == UNDEFINED_EPOCH or answer.end_offset < 0:
            # The leader knows no epoch up to ours (or we know none): KIP-101's fallback.
            target = min(log.high_watermark, leo)
        else:
            ours_epoch, ours_end = log.end_offset_for_epoch(answer.leader_epoch)
            if ours_epoch == UNDEFINED_EPOCH:
                target = min(answer.end_offset, leo)
            elif ours_epoch != answer.leader_epoch:
                # We lack the leader's epoch: cut to the end of our largest epoch below it and
                # ask about that one (KIP-279's extra round).
                target, self._next_epoch = min(ours_end, leo), ours_epoch
            else:
                target = min(ours_end, answer.end_offset, leo)
        if target < leo:
            _log.info(
                "%s-%d: truncating from %d to %d (leader %d answered epoch %d ends at %d)",
                self.topic,
                self.partition,
                leo,
                target,
                self.leader_id,
                answer.leader_epoch,
                answer.end_offset,
            )
            log.truncate_to(target)
        if self._next_epoch is None:
            self.status = FollowerStatus.FETCHING

    def on_fetch_answer(self, position: FetchPosition, answer: FetchAnswer) -> int:
        """Apply the leader's answer to ``position``; the number of record bytes appended."""
        if self.status is not FollowerStatus.FETCHING:
            return 0
        log = self.log
        if position.fetch_offset != log.log_end_offset:
            return 0  # our log moved since the request (a truncation): ask again
        if answer.error == OFFSET_OUT_OF_RANGE:
            self.last_error = answer.error
            if 0 <= log.log_end_offset < answer.log_start_offset:
                log.truncate_fully_and_start_at(answer.log_start_offset)
                # The HW may have stayed below the new start (Log keeps min(HW, LEO)).
                log.update_high_watermark(answer.log_start_offset)
            else:
                self.status, self._next_epoch = FollowerStatus.TRUNCATING, None
            return 0
        if self._failed(answer.error):
            return 0
        size = len(memoryview(answer.records))
        if size:
            try:
                log.append_as_follower(answer.records)
            except YakError as exc:  # corrupt, invalid or too large: retried next round
                self.last_error = exc.code
                _log.warning("%s-%d: refused a fetched batch: %s", self.topic, self.partition, exc)
                return 0
        high_watermark = min(answer.high_watermark, log.log_end_offset)
        if high_watermark > log.high_watermark:
            log.update_high_watermark(high_watermark)
        return size

    def _failed(self, error: str | None) -> bool:
        self.last_error = error
        if error is None:
            return False
        if error == FENCED_LEADER_EPOCH:
            self.status = FollowerStatus.FENCED
        return True
