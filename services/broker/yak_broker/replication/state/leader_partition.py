"""``LeaderPartition``: one partition on its leader — follower progress, ISR, high watermark.

Owns, for the leader epoch it was created for: the last ``PartitionState`` seen, the one ISR
proposal in flight, and per follower its log end offset (LEO; -1 = unknown until it fetches in
this epoch), the last time it was caught up, and the leader's LEO and the time at its previous
fetch. It writes one thing to the log: the high watermark (and the epoch stamp at creation).

Rules (Kafka's ``Partition``/``Replica``):

- **Caught up**: a fetch at or past the leader's LEO makes the follower caught up *now*; a fetch
  at or past the leader's LEO *at its previous fetch* makes it caught up as of that previous
  fetch. A fetch beyond the leader's LEO (a follower that has not truncated) counts for nothing.
- **High watermark** = min LEO over the ISR, the ISR taken as the union of the committed ISR
  and the proposal in flight (KIP-497's maximal ISR: a follower being added already counts, one
  being removed still counts). It never goes back and never passes the leader's LEO (nor, in
  ``flush.mode=sync``, the leader's fsynced end).
- **ISR shrink**: ``tick`` proposes removing every follower not caught up for longer than
  ``replica.lag.time.max.ms``. A follower fetching in an incremental fetch session (KIP-227)
  does not name an unchanged partition, so the leader hears of it only when its position
  moves; while that session keeps fetching and the follower's last position is the leader's
  LEO, it counts as caught up at the session's last fetch (``FollowerProgress.caught_up_ms``).
  **Expand**: a follower outside the ISR whose LEO reached the high watermark and the start of
  the current leader epoch is proposed for addition — only if the fetch that showed it came
  from the data folder its broker's registration names (``eligible``: KIP-903, a fetch of a
  process whose log is gone never adds it), and the proposal records that folder's id.
- **Data folders** (empty-disk restarts): a follower's progress belongs to the data folder
  its fetches come from (``log_dir_id``). A fetch from another folder starts the progress
  afresh — what the leader knew was another log's — and an ISR member whose fetches come
  from another folder than its ISR entry records lost that log: ``tick`` proposes removing
  it at once, without waiting for the lag window.
- One proposal in flight at a time; it ends when a state with a higher partition epoch arrives
  (``on_state``) or its compare-and-swap fails (``on_proposal_failed``).
- **Fencing**: a request carrying another ``current_leader_epoch`` is refused (older:
  ``FENCED_LEADER_EPOCH``, newer: ``UNKNOWN_LEADER_EPOCH``; -1 is not checked). Once a state
  names another leader or leader epoch the machine is **retired**: inert, and it refuses every
  request with ``NOT_LEADER_OR_FOLLOWER``.

Creating the machine is Kafka's ``becomeLeader``: the leader epoch is stamped into the log's
epoch cache at the LEO, so followers asking about the previous epoch learn where it ended.
Crash: nothing here is persisted except through the log (HW checkpoint, epoch cache); a
restarted broker builds a new machine from the log and the current state, with every follower
position unknown again. Not thread-safe: one event loop (or the simulation) drives it, and
every method returns before the next input is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

from yak.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    YakError,
)
from yak.metadata.models import PartitionState
from yak_broker.replication.state.fetch_metadata import SessionClock
from yak_broker.replication.state.messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    AlterIsr,
    EpochAnswer,
    EpochQuery,
    HighWatermarkAdvanced,
    LeaderOutput,
)
from yak_broker.replication.state.replica_log import ReplicaLog

__all__ = ["FollowerProgress", "LeaderPartition"]


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower in this leader epoch."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = -1
    #: The incremental fetch session its last fetch came in (None: sessionless): while the
    #: session keeps fetching and its position is the leader's LEO, it is caught up.
    session: SessionClock | None = None
    #: The data folder its fetches come from ("" unknown: an older broker, or none yet).
    log_dir_id: str = ""
    #: It has fetched from this leader in this epoch: it knows this broker leads, so it no
    #: longer acts as the partition's leader itself (``ReplicaManager.wait_handed_over``).
    fetched: bool = False

    def caught_up_ms(self, leader_leo: int) -> int:
        """When it was last caught up, counting the session's fetches that did not name this
        partition (its position unchanged at the leader's LEO: Kafka's first rule each one)."""
        session = self.session
        if session is not None and not session.closed and self.log_end_offset >= leader_leo:
            return max(self.last_caught_up_ms, session.last_fetch_ms)
        return self.last_caught_up_ms


class LeaderPartition:
    """See the module doc."""

    def __init__(
        self,
        broker_id: int,
        state: PartitionState,
        log: ReplicaLog,
        *,
        now_ms: int,
        replica_lag_time_max_ms: int,
        log_dir_id: str = "",
    ) -> None:
        if state.leader != broker_id:
            raise ValueError(f"broker {broker_id} does not lead {state.topic}-{state.partition}")
        self.broker_id = broker_id
        #: This broker's data folder id, recorded as its own ISR entry in its proposals.
        self.log_dir_id = log_dir_id
        self.topic = state.topic
        self.partition = state.partition
        self.leader_epoch = state.leader_epoch
        self.state = state
        self.retired = False
        self._log = log
        self._lag_max_ms = replica_lag_time_max_ms
        latest = log.latest_epoch
        if latest is None or latest < state.leader_epoch:
            log.assign_epoch(state.leader_epoch, log.log_end_offset)
        #: Where this leader epoch starts (at the latest): a follower must reach it to join.
        self.epoch_start_offset = log.log_end_offset
        self.followers: dict[int, FollowerProgress] = {}
        self._add_followers(state, now_ms)
        self.pending: AlterIsr | None = None
        #: How far the leader's own copy counts for the high watermark (see ``on_append``).
        self._local_end = log.log_end_offset
        #: Whether the last ``tick`` found every ISR follower parked at this leader's LEO in an
        #: open fetch session, and no input came since: then, until one of those sessions
        #: stalls or closes, a tick finds nothing (see ``tick``). Any input clears it.
        self.quiet = False

    # --- reads ---------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr

    def maximal_isr(self) -> set[int]:
        """The committed ISR plus the replicas of the proposal in flight (KIP-497)."""
        isr = set(self.state.isr)
        if self.pending is not None:
            isr |= set(self.pending.new_isr)
        return isr

    def followed_by(self, replica_id: int) -> bool:
        """Whether ``replica_id`` has fetched from this leader in this epoch."""
        progress = self.followers.get(replica_id)
        return progress is not None and progress.fetched

    def check_fetch_epoch(self, current_leader_epoch: int) -> str | None:
        """The error code for a request made in another leader epoch, or None (-1: unchecked)."""
        if self.retired:
            return NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return FENCED_LEADER_EPOCH
        return UNKNOWN_LEADER_EPOCH

    def check_epoch(self, current_leader_epoch: int) -> None:
        """``check_fetch_epoch`` raising the error (for the HTTP handlers)."""
        code = self.check_fetch_epoch(current_leader_epoch)
        if code is None:
            return
        where = f"{self.topic}-{self.partition}"
        error: type[YakError] = {
            FENCED_LEADER_EPOCH: FencedLeaderEpochError,
            UNKNOWN_LEADER_EPOCH: UnknownLeaderEpochError,
        }.get(code, NotLeaderOrFollowerError)
        raise error(
            f"{where}: request for leader epoch {current_leader_epoch}, this broker leads "
            f"epoch {self.leader_epoch}{' (retired)' if self.retired else ''}",
            leader_epoch=self.leader_epoch,
        )

    def check_acks_all(self, min_insync_replicas: int) -> None:
        """acks=all is refused before any write when the ISR is below ``min.insync.replicas``."""
        if len(self.state.isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition}: ISR {list(self.state.isr)} is smaller than "
                f"min.insync.replicas {min_insync_replicas}",
                isr=list(self.state.isr),
                min_insync_replicas=min_insync_replicas,
            )

    @overload
    def answer_epoch_query(self, query: EpochQuery, /) -> EpochAnswer: ...

    @overload
    def answer_epoch_query(
        self, current_leader_epoch: int, leader_epoch: int, /
    ) -> tuple[int, int]: ...

    def answer_epoch_query(
        self, query: EpochQuery | int, leader_epoch: int | None = None, /
    ) -> EpochAnswer | tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-279): where ``leader_epoch`` ends in this log.

        With an ``EpochQuery``: an ``EpochAnswer`` (fencing errors as its ``error``). With two
        ints (``current_leader_epoch, leader_epoch``): ``(epoch, end_offset)``, raising the
        fencing error — the form the HTTP handler uses.
        """
        if isinstance(query, EpochQuery):
            error = self.check_fetch_epoch(query.current_leader_epoch)
            if error is not None:
                return EpochAnswer(query.topic, query.partition, error=error)
            epoch, end = self._log.end_offset_for_epoch(query.leader_epoch)
            return EpochAnswer(query.topic, query.partition, epoch, end)
        if leader_epoch is None:
            raise TypeError("answer_epoch_query(current_leader_epoch, leader_epoch)")
        self.check_epoch(query)
        return self._log.end_offset_for_epoch(leader_epoch)

    # --- inputs --------------------------------------------------------------------------

    def on_append(self, now_ms: int, local_end: int | None = None) -> list[LeaderOutput]:
        """The leader appended: the high watermark may move (an ISR of one).

        ``local_end``: how far the leader's own copy counts — its LEO by default; in
        ``flush.mode=sync`` the end of what an fsync covers.
        """
        del now_ms  # the caught-up clock is driven by fetches only
        self.quiet = False
        if self.retired:
            return []
        if local_end is None:
            self._local_end = self._log.log_end_offset
        else:  # fsyncs complete in offset order, but their callbacks may not
            self._local_end = max(self._local_end, local_end)
        return self._advance_high_watermark()

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        now_ms: int,
        session: SessionClock | None = None,
        *,
        log_dir_id: str = "",
        eligible: bool = True,
    ) -> list[LeaderOutput]:
        """A follower fetches from ``fetch_offset``, its LEO (before the leader reads);
        ``session``: the incremental fetch session it came in (see ``FollowerProgress``);
        ``log_dir_id``: the data folder it fetches from; ``eligible``: whether that is the
        folder its broker's current registration names (else it may not join the ISR)."""
        self.quiet = False
        progress = self.followers.get(replica_id)
        if self.retired or progress is None:
            return []
        if progress.log_dir_id != log_dir_id:
            if progress.log_dir_id:  # another log: what was known is not its
                progress = FollowerProgress(progress.last_caught_up_ms)
                self.followers[replica_id] = progress
            progress.log_dir_id = log_dir_id
        progress.fetched = True
        leader_leo = self._log.log_end_offset
        if fetch_offset > leader_leo:
            return []
        if fetch_offset >= leader_leo:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif fetch_offset >= progress.last_fetch_leader_leo >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_leo = leader_leo
        progress.last_fetch_ms = now_ms
        progress.log_end_offset = fetch_offset
        progress.session = session
        outputs = self._maybe_expand(replica_id) if eligible else []
        outputs += self._advance_high_watermark()
        return outputs

    def tick(self, now_ms: int) -> list[LeaderOutput]:
        """Propose dropping the followers that lag longer than ``replica.lag.time.max.ms``.

        Also settles ``quiet``: every ISR follower at the leader's LEO in an open session, so
        each counts as caught up as of its session's last fetch — nothing but that session
        stalling or closing can make a later tick find a laggard before the next input (which
        clears ``quiet``). ``IsrChecks`` skips quiet leaders while no session has stalled or
        closed: at 20,000 idle partitions the ISR check costs what is due."""
        self.quiet = False
        if self.retired or self.pending is not None:
            return []
        lagging = set()
        parked = True
        leader_leo = self._log.log_end_offset
        for replica in self.state.isr:
            if replica == self.broker_id:
                continue
            progress = self.followers.get(replica)
            if progress is None:
                parked = False
                continue
            if now_ms - progress.caught_up_ms(leader_leo) > self._lag_max_ms or (
                self.state.log_dir_lost(replica, progress.log_dir_id)
            ):
                lagging.add(replica)
            session = progress.session
            if session is None or session.closed or progress.log_end_offset < leader_leo:
                parked = False
        if not lagging:
            self.quiet = parked
            return []
        return self._propose(tuple(r for r in self.state.isr if r not in lagging))

    def on_state(self, state: PartitionState, now_ms: int) -> list[LeaderOutput]:
        """New metadata for this partition (our proposal committed, or the controller's
        change). Another leader or leader epoch retires the machine; returns [] then."""
        self.quiet = False
        if self.retired:
            return []
        if state.leader != self.broker_id or state.leader_epoch != self.leader_epoch:
            self.retired = True
            self.pending = None
            return []
        if state.partition_epoch < self.state.partition_epoch:
            return []  # an older state delivered late
        self.state = state
        pending = self.pending
        if pending is not None and state.partition_epoch > pending.expected_partition_epoch:
            self.pending = None
        self._add_followers(state, now_ms)
        return self._advance_high_watermark()

    def on_follower_forgotten(self, replica_id: int) -> None:
        """The follower's session stopped fetching this partition (it truncates, or it no
        longer follows this leader): that session's later fetches do not count for it."""
        self.quiet = False
        progress = self.followers.get(replica_id)
        if progress is not None:
            progress.session = None

    def on_proposal_failed(self, proposal: AlterIsr | None = None) -> None:
        """The compare-and-swap of ``proposal`` lost: wait for the state that beat it.

        Pass the proposal: a failure reported after ``on_state`` already ended it must not end
        a newer proposal (whose replicas the high watermark may be counting). None: whatever is
        in flight.
        """
        self.quiet = False
        if proposal is None or proposal == self.pending:
            self.pending = None

    # --- internals -----------------------------------------------------------------------

    def _add_followers(self, state: PartitionState, now_ms: int) -> None:
        for replica in state.replicas:
            if replica != self.broker_id and replica not in self.followers:
                # As Kafka: an ISR member gets the full lag window to show up.
                self.followers[replica] = FollowerProgress(last_caught_up_ms=now_ms)
        for replica in list(self.followers):
            if replica not in state.replicas:
                del self.followers[replica]

    def _maybe_expand(self, replica_id: int) -> list[LeaderOutput]:
        if self.pending is not None or replica_id in self.state.isr:
            return []
        progress = self.followers[replica_id]
        leo = progress.log_end_offset
        if leo < self._log.high_watermark or leo < self.epoch_start_offset:
            return []
        return self._propose((*self.state.isr, replica_id), (replica_id, progress.log_dir_id))

    def _propose(
        self, new_isr: tuple[int, ...], added: tuple[int, str] | None = None
    ) -> list[LeaderOutput]:
        dirs = [added] if added is not None and added[1] else []
        if self.log_dir_id and self.state.isr_log_dirs.get(self.broker_id) != self.log_dir_id:
            dirs.append((self.broker_id, self.log_dir_id))
        self.pending = AlterIsr(
            self.topic,
            self.partition,
            self.broker_id,
            self.leader_epoch,
            self.state.partition_epoch,
            new_isr,
            tuple(dirs),
        )
        return [self.pending]

    def _advance_high_watermark(self) -> list[LeaderOutput]:
        new_hw = min(self._local_end, self._log.log_end_offset)
        for replica in self.maximal_isr():
            if replica != self.broker_id:
                progress = self.followers.get(replica)
                new_hw = min(new_hw, progress.log_end_offset if progress else -1)
        if new_hw <= self._log.high_watermark:
            return []
        self._log.update_high_watermark(new_hw)
        return [HighWatermarkAdvanced(self._log.high_watermark)]
