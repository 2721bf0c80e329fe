"""``ClassicGroup``: one Kafka classic consumer group at its coordinator, as a pure state machine
(Kafka's ``ClassicGroup`` and the classic half of its ``GroupMetadataManager``;
docs/decisions.md, "Kafka classic groups").

**States.** Empty (no member) → PreparingRebalance (members rejoin; JoinGroups are parked) →
CompletingRebalance (the generation is bumped, the protocol chosen, every parked JoinGroup
answered, the leader's list of members; SyncGroups are parked until the leader's brings the
assignments) → Stable (every member holds an assignment of the current generation). A new
member, a leader's or changed member's rejoin, a leave or an expiry sends a Stable or
CompletingRebalance group back to PreparingRebalance; a round that ends with no member sends it
to Empty (the generation still bumped). Dead: deleted or unloaded, terminal. Who is in the
group (members in join order, the leader, static instances, reserved ids) is its ``Roster``.

**Rules.**
- A new member gets its id from the coordinator (``<client_id>-<fresh_id>``); from JoinGroup v4
  its first join only reserves the id (MEMBER_ID_REQUIRED) and the round waits for it to come
  back (or for its session to end). The first member to join leads; if the leader does not
  rejoin, the first member that did takes over.
- A round completes when every member and every reserved id has rejoined (an Empty group's
  first round also waits ``initial_rebalance_delay_ms``), or at the rebalance timeout (the
  largest of the members'), when the dynamic members that did not rejoin are removed.
- The protocol is the members' vote (``member.select_protocol``); a join whose protocol type or
  protocols do not fit the group is refused with INCONSISTENT_GROUP_PROTOCOL.
- Sessions: a member's session deadline is renewed by its heartbeats, joins, syncs and commits
  and does not run while a join or sync of its is parked; at the deadline it is removed. Members
  that do not SyncGroup within the rebalance timeout after a round are removed too. Heartbeats
  answer REBALANCE_IN_PROGRESS while PreparingRebalance (rejoin), else NONE (CompletingRebalance
  too, as Kafka's coordinator does: members heartbeat between their join and sync answers).
- Static members (``group.instance.id``, KIP-345) keep their place across restarts: a join with
  a known instance id replaces the old member id (whose later requests get FENCED_INSTANCE_ID),
  without a rebalance when the group is Stable and the protocols are unchanged; they are not
  removed for missing a round, only when their session ends or they leave.

**Driver contract.** Feed every request and ``tick(now)`` at ``next_deadline()``; after each
input, ``take_replies()`` and answer them (a JoinGroup's or SyncGroup's own answer may be among
them, or come with a later input). A Heartbeat, LeaveGroup, OffsetCommit check or delete is
answered by the return value. Every parked request is answered exactly once. Time is an
argument; nothing here awaits, reads a clock or does I/O. Not thread-safe: one owner applies one
input at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

from yak.protocol.kafka_errors import GroupErrorCode
from yak_broker.kafka.groups.state.member import ClassicMember, common_protocols, select_protocol
from yak_broker.kafka.groups.state.records import (
    GroupDescription,
    GroupListing,
    GroupSettings,
    GroupStateName,
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    LeaveMemberResult,
    Reply,
    SyncGroup,
    SyncGroupResult,
)
from yak_broker.kafka.groups.state.roster import Roster

__all__ = ["ClassicGroup"]

_E = GroupErrorCode
_EMPTY = GroupStateName.EMPTY
_PREPARING = GroupStateName.PREPARING_REBALANCE
_COMPLETING = GroupStateName.COMPLETING_REBALANCE
_STABLE = GroupStateName.STABLE
_DEAD = GroupStateName.DEAD


class ClassicGroup:
    """See the module doc."""

    def __init__(self, group_id: str, settings: GroupSettings) -> None:
        self.group_id = group_id
        self.settings = settings
        self.state = _EMPTY
        self.generation_id = 0
        #: Set by the first member of a non-empty group and kept while it is Empty (ListGroups).
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self._roster = Roster()
        #: Members that have not sent their SyncGroup since the round completed.
        self._awaiting_sync: set[str] = set()
        self._join_deadline: int | None = None
        self._sync_deadline: int | None = None
        #: While an Empty group's first round waits for more members: the latest it may end.
        self._initial_limit: int | None = None
        self._outbox: list[Reply] = []

    # --- reading ---------------------------------------------------------------------------

    @property
    def members(self) -> tuple[ClassicMember, ...]:
        """The members in join order (do not mutate them)."""
        return tuple(self._roster)

    @property
    def leader_id(self) -> str | None:
        return self._roster.leader_id

    def member(self, member_id: str) -> ClassicMember | None:
        return self._roster.get(member_id)

    def take_replies(self) -> list[Reply]:
        """The answers to parked requests that are due, each given once."""
        replies, self._outbox = self._outbox, []
        return replies

    def next_deadline(self) -> int | None:
        """When ``tick`` next has something to do (None: nothing is timed)."""
        times = list(self._roster.reserved.values())
        times += [m.session_deadline_ms for m in self._roster if not m.parked]
        if self.state is _PREPARING and self._join_deadline is not None:
            times.append(self._join_deadline)
        if self._awaiting_sync and self._sync_deadline is not None:
            times.append(self._sync_deadline)
        return min(times, default=None)

    def describe(self) -> GroupDescription:
        """DescribeGroups: member metadata and assignments only while Stable, as Kafka."""
        protocol = self.protocol_name if self.state is _STABLE else None
        return GroupDescription(
            self.group_id,
            self.state,
            self.protocol_type or "",
            protocol or "",
            tuple(m.description(protocol) for m in self._roster),
        )

    def listing(self) -> GroupListing:
        return GroupListing(self.group_id, self.protocol_type or "", self.state)

    # --- JoinGroup -------------------------------------------------------------------------

    def join(self, request: JoinGroup, now_ms: int) -> None:
        """Apply a JoinGroup; its answer goes to the outbox now or when the round completes."""
        error = self._join_error(request)
        if error is not None:
            self._reply_join(request.request_id, JoinGroupResult(error, request.member_id))
        elif not request.member_id:
            self._join_new(request, now_ms)
        elif request.member_id in self._roster.reserved and request.group_instance_id is None:
            self._join_reserved(request, now_ms)
        else:
            self._join_known(request, now_ms)

    def _join_error(self, request: JoinGroup) -> GroupErrorCode | None:
        settings = self.settings
        if self.state is _DEAD:
            return _E.COORDINATOR_NOT_AVAILABLE
        timeout = request.session_timeout_ms
        if not settings.min_session_timeout_ms <= timeout <= settings.max_session_timeout_ms:
            return _E.INVALID_SESSION_TIMEOUT
        if not request.protocol_type or not request.protocols:
            return _E.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _join_new(self, request: JoinGroup, now_ms: int) -> None:
        instance = request.group_instance_id
        static = self._roster.static_member(instance)
        if static is not None:
            self._replace_static(static, request, now_ms)
            return
        error = self._admission_error(request, None)
        if error is not None:
            self._reply_join(request.request_id, JoinGroupResult(error))
            return
        if not request.fresh_id:
            raise ValueError("a JoinGroup without a member id needs a fresh_id")
        member_id = f"{request.client_id}-{request.fresh_id}"
        if instance is None and request.require_known_member_id:
            self._roster.reserved[member_id] = now_ms + request.session_timeout_ms
            self._reply_join(request.request_id, JoinGroupResult(_E.MEMBER_ID_REQUIRED, member_id))
            return
        self._add(member_id, request, now_ms)

    def _join_reserved(self, request: JoinGroup, now_ms: int) -> None:
        error = self._admission_error(request, None)
        if error is not None:
            self._reply_join(request.request_id, JoinGroupResult(error, request.member_id))
            return
        del self._roster.reserved[request.member_id]
        self._add(request.member_id, request, now_ms)

    def _join_known(self, request: JoinGroup, now_ms: int) -> None:
        error = self._roster.member_error(request.member_id, request.group_instance_id)
        member = self._roster.get(request.member_id)
        if error is None and member is not None:
            error = self._admission_error(request, member)
        if error is not None or member is None:
            self._reply_join(request.request_id, JoinGroupResult(error or _E.UNKNOWN_MEMBER_ID))
            return
        unchanged = member.same_protocols(request.protocols)
        if self.state is _PREPARING:
            self._rejoin(member, request, now_ms)
        elif self.state is _COMPLETING and unchanged:
            # The member lost its JoinGroup answer: give it again.
            member.renew(now_ms)
            self._reply_join(request.request_id, self._join_result(member))
        elif self.state is _STABLE and unchanged and member.member_id != self.leader_id:
            member.renew(now_ms)
            self._reply_join(request.request_id, self._join_result(member))
        else:
            self._rejoin(member, request, now_ms)

    def _admission_error(
        self, request: JoinGroup, member: ClassicMember | None
    ) -> GroupErrorCode | None:
        """Whether the group can take this joiner (``member``: its current self, if any)."""
        if member is None and len(self._roster) >= self.settings.max_size:
            return _E.GROUP_MAX_SIZE_REACHED
        others = [m for m in self._roster if m is not member]
        if not others:
            return None
        common = common_protocols(others) or set()
        if request.protocol_type != self.protocol_type or not any(
            p.name in common for p in request.protocols
        ):
            return _E.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _add(self, member_id: str, request: JoinGroup, now_ms: int) -> None:
        if not self._roster:
            self.protocol_type = request.protocol_type
        self._roster.add(ClassicMember.joining(member_id, request, now_ms))
        if self.state is _PREPARING and self._initial_limit is not None:
            delay = self.settings.initial_rebalance_delay_ms
            self._join_deadline = min(now_ms + delay, self._initial_limit)
        self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    def _rejoin(self, member: ClassicMember, request: JoinGroup, now_ms: int) -> None:
        if member.join_request is not None:
            self._reply_join(member.join_request, JoinGroupResult(_E.REBALANCE_IN_PROGRESS))
        self._update(member, request)
        member.join_request = request.request_id
        self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    def _replace_static(self, old: ClassicMember, request: JoinGroup, now_ms: int) -> None:
        """A static member restarted: its new member id takes the old one's place."""
        error = self._admission_error(request, old)
        if error is not None:
            self._reply_join(request.request_id, JoinGroupResult(error))
            return
        if not request.fresh_id:
            raise ValueError("a JoinGroup without a member id needs a fresh_id")
        new_id = f"{request.client_id}-{request.fresh_id}"
        fenced = JoinGroupResult(_E.FENCED_INSTANCE_ID, old.member_id)
        if old.join_request is not None:
            self._reply_join(old.join_request, fenced)
        if old.sync_request is not None:
            self._reply_sync(old.sync_request, SyncGroupResult(_E.FENCED_INSTANCE_ID))
        unchanged = old.same_protocols(request.protocols)
        old.join_request = old.sync_request = None
        self._rename(old, new_id)
        self._update(old, request)
        old.renew(now_ms)
        if self.state is _STABLE and unchanged:
            leader = self._roster.is_leader(old)
            self._reply_join(request.request_id, self._join_result(old, skip_assignment=leader))
            return
        old.join_request = request.request_id
        self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    def _update(self, member: ClassicMember, request: JoinGroup) -> None:
        member.update(request)
        if len(self._roster) == 1:
            # The only member may change the group's protocol type (no one else to fit).
            self.protocol_type = request.protocol_type

    def _rename(self, member: ClassicMember, new_id: str) -> None:
        old_id = member.member_id
        self._roster.rename(member, new_id)
        if old_id in self._awaiting_sync:
            self._awaiting_sync.discard(old_id)
            self._awaiting_sync.add(new_id)

    def _join_result(self, member: ClassicMember, skip_assignment: bool = False) -> JoinGroupResult:
        protocol = self.protocol_name or ""
        leader = self._roster.is_leader(member)
        return JoinGroupResult(
            _E.NONE,
            member.member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            skip_assignment,
            tuple(m.joined_view(protocol) for m in self._roster) if leader else (),
        )

    # --- rounds ----------------------------------------------------------------------------

    def _prepare_rebalance(self, now_ms: int) -> None:
        """Start a round (nothing to do if one is under way)."""
        if self.state is _PREPARING:
            return
        if self.state is _COMPLETING:
            for member in self._roster:
                if member.sync_request is not None:
                    self._reply_sync(member.sync_request, SyncGroupResult(_E.REBALANCE_IN_PROGRESS))
                    member.sync_request = None
        self._awaiting_sync.clear()
        self._sync_deadline = None
        timeout = self._rebalance_timeout()
        delay = self.settings.initial_rebalance_delay_ms
        if self.state is _EMPTY and delay > 0:
            self._join_deadline = now_ms + min(delay, timeout)
            self._initial_limit = now_ms + timeout
        else:
            self._join_deadline = now_ms + timeout
        self.state = _PREPARING

    def _rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self._roster), default=0)

    def _maybe_complete_join(self, now_ms: int) -> None:
        if self.state is not _PREPARING or self._initial_limit is not None or self._roster.reserved:
            return
        if all(m.join_request is not None for m in self._roster):
            self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        """End the joining phase: drop dynamic laggards, bump the generation, answer joins."""
        self._initial_limit = None
        for member in list(self._roster):
            if member.join_request is None and member.group_instance_id is None:
                self._remove(member, _E.UNKNOWN_MEMBER_ID)
        joined = [m for m in self._roster if m.join_request is not None]
        if not self._roster:
            self.generation_id += 1
            self.protocol_name = self._join_deadline = None
            self.state = _EMPTY
            return
        if not joined:
            # Only static members that have not rejoined: wait for them or their sessions.
            self._join_deadline = now_ms + self._rebalance_timeout()
            return
        if self.leader_id not in {m.member_id for m in joined}:
            # Kafka's maybeElectNewJoinedLeader: a leader that did not rejoin cannot assign.
            self._roster.leader_id = joined[0].member_id
        self.generation_id += 1
        self.protocol_name = select_protocol(list(self._roster))
        self.state = _COMPLETING
        self._join_deadline = None
        for member in joined:
            request_id = member.join_request
            assert request_id is not None
            member.join_request = None
            member.renew(now_ms)
            self._reply_join(request_id, self._join_result(member))
        self._awaiting_sync = {m.member_id for m in self._roster}
        self._sync_deadline = now_ms + self._rebalance_timeout()

    # --- SyncGroup -------------------------------------------------------------------------

    def sync(self, request: SyncGroup, now_ms: int) -> None:
        """Apply a SyncGroup; a follower's waits for the leader's, which answers all."""
        error = self._sync_error(request)
        member = self._roster.get(request.member_id)
        if error is not None or member is None:
            self._reply_sync(request.request_id, SyncGroupResult(error or _E.UNKNOWN_MEMBER_ID))
            return
        member.renew(now_ms)
        self._awaiting_sync.discard(member.member_id)
        if not self._awaiting_sync:
            self._sync_deadline = None
        if self.state is _STABLE:
            self._reply_sync(request.request_id, self._sync_result(member))
            return
        if member.sync_request is not None:
            self._reply_sync(member.sync_request, SyncGroupResult(_E.REBALANCE_IN_PROGRESS))
        member.sync_request = request.request_id
        if self._roster.is_leader(member):
            self._complete_sync(dict(request.assignments))

    def _sync_error(self, request: SyncGroup) -> GroupErrorCode | None:
        if self.state is _DEAD:
            return _E.COORDINATOR_NOT_AVAILABLE
        error = self._roster.member_error(request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != self.generation_id:
            return _E.ILLEGAL_GENERATION
        if request.protocol_type is not None and request.protocol_type != self.protocol_type:
            return _E.INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != self.protocol_name:
            return _E.INCONSISTENT_GROUP_PROTOCOL
        if self.state is _PREPARING:
            return _E.REBALANCE_IN_PROGRESS
        return None

    def _complete_sync(self, assignments: dict[str, bytes]) -> None:
        """The leader's assignments: every member gets its own (none named: empty)."""
        for member in self._roster:
            member.assignment = assignments.get(member.member_id, b"")
            member.assignment_generation = self.generation_id
        self.state = _STABLE
        for member in self._roster:
            if member.sync_request is not None:
                self._reply_sync(member.sync_request, self._sync_result(member))
                member.sync_request = None

    def _sync_result(self, member: ClassicMember) -> SyncGroupResult:
        return SyncGroupResult(_E.NONE, self.protocol_type, self.protocol_name, member.assignment)

    # --- Heartbeat, OffsetCommit ------------------------------------------------------------

    def heartbeat(self, request: Heartbeat, now_ms: int) -> GroupErrorCode:
        """Renew the member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""
        if self.state is _DEAD:
            return _E.COORDINATOR_NOT_AVAILABLE
        error = self._roster.member_error(request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != self.generation_id:
            return _E.ILLEGAL_GENERATION
        member = self._roster.get(request.member_id)
        assert member is not None
        member.renew(now_ms)
        return _E.REBALANCE_IN_PROGRESS if self.state is _PREPARING else _E.NONE

    def check_commit(self, request: Heartbeat, now_ms: int) -> GroupErrorCode:
        """Whether an OffsetCommit by this identity may be written (Kafka's ``doCommitOffsets``
        checks, in its order): any commit with a negative generation while the group is Empty
        (a "simple" commit: the group only stores offsets), else a member of the current
        generation while Stable or PreparingRebalance (its generation is not bumped yet)."""
        if self.state is _DEAD:
            return _E.COORDINATOR_NOT_AVAILABLE
        static = self._roster.static_member(request.group_instance_id)
        if static is not None and static.member_id != request.member_id:
            return _E.FENCED_INSTANCE_ID
        if request.generation_id < 0 and self.state is _EMPTY:
            return _E.NONE
        member = self._roster.get(request.member_id)
        if member is None:
            return _E.UNKNOWN_MEMBER_ID
        if request.generation_id != self.generation_id:
            return _E.ILLEGAL_GENERATION
        if self.state is _COMPLETING:
            return _E.REBALANCE_IN_PROGRESS
        member.renew(now_ms)
        return _E.NONE

    # --- LeaveGroup, expiry, deletion ---------------------------------------------------------

    def leave(self, leaving: Iterable[LeaveMember], now_ms: int) -> LeaveGroupResult:
        """LeaveGroup: each member named leaves (a reserved id is forgotten)."""
        if self.state is _DEAD:
            return LeaveGroupResult(_E.COORDINATOR_NOT_AVAILABLE)
        results = []
        for one in leaving:
            error = self._leave_one(one, now_ms)
            results.append(LeaveMemberResult(one.member_id, one.group_instance_id, error))
        return LeaveGroupResult(_E.NONE, tuple(results))

    def _leave_one(self, one: LeaveMember, now_ms: int) -> GroupErrorCode:
        if one.group_instance_id is not None:
            member = self._roster.static_member(one.group_instance_id)
            if member is not None and one.member_id and one.member_id != member.member_id:
                return _E.FENCED_INSTANCE_ID
        elif one.member_id in self._roster.reserved:
            del self._roster.reserved[one.member_id]
            self._maybe_complete_join(now_ms)
            return _E.NONE
        else:
            member = self._roster.get(one.member_id)
        if member is None:
            return _E.UNKNOWN_MEMBER_ID
        self._remove_and_rebalance(member, now_ms)
        return _E.NONE

    def tick(self, now_ms: int) -> None:
        """Apply what is due at ``now_ms``: the end of a joining phase, members that did not
        sync in time, lapsed sessions and reservations."""
        if self.state is _PREPARING and _due(self._join_deadline, now_ms):
            self._complete_join(now_ms)
        if self._awaiting_sync and _due(self._sync_deadline, now_ms):
            # Kafka's pending-sync timeout: every member that did not sync leaves.
            for member_id in sorted(self._awaiting_sync):
                member = self._roster.get(member_id)
                if member is not None:
                    self._remove_and_rebalance(member, now_ms)
        for member in list(self._roster):
            lapsed = not member.parked and member.session_deadline_ms <= now_ms
            # A removal may complete a round, which removes or renews others: look again.
            if lapsed and self._roster.get(member.member_id) is member:
                self._remove_and_rebalance(member, now_ms)
        reservations = [m for m, deadline in self._roster.reserved.items() if deadline <= now_ms]
        for member_id in reservations:
            del self._roster.reserved[member_id]
        if reservations:
            self._maybe_complete_join(now_ms)

    def delete(self) -> GroupErrorCode:
        """DeleteGroups: only an Empty group may go (Dead after)."""
        if self.state is _DEAD:
            return _E.GROUP_ID_NOT_FOUND
        if self.state is not _EMPTY:
            return _E.NON_EMPTY_GROUP
        self.state = _DEAD
        return _E.NONE

    def unload(self) -> None:
        """This broker no longer coordinates the group: answer every parked request
        NOT_COORDINATOR (the clients look the coordinator up again) and go Dead."""
        for member in self._roster:
            if member.join_request is not None:
                self._reply_join(member.join_request, JoinGroupResult(_E.NOT_COORDINATOR))
            if member.sync_request is not None:
                self._reply_sync(member.sync_request, SyncGroupResult(_E.NOT_COORDINATOR))
        self._roster.clear()
        self._awaiting_sync.clear()
        self.state = _DEAD

    def _remove_and_rebalance(self, member: ClassicMember, now_ms: int) -> None:
        self._remove(member, _E.UNKNOWN_MEMBER_ID)
        if self.state in (_STABLE, _COMPLETING):
            self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    def _remove(self, member: ClassicMember, error: GroupErrorCode) -> None:
        """Take the member out, answering its parked requests with ``error``."""
        self._roster.remove(member)
        self._awaiting_sync.discard(member.member_id)
        if member.join_request is not None:
            self._reply_join(member.join_request, JoinGroupResult(error, member.member_id))
        if member.sync_request is not None:
            self._reply_sync(member.sync_request, SyncGroupResult(error))
        member.join_request = member.sync_request = None

    def _reply_join(self, request_id: int, result: JoinGroupResult) -> None:
        self._outbox.append(Reply(request_id, result))

    def _reply_sync(self, request_id: int, result: SyncGroupResult) -> None:
        self._outbox.append(Reply(request_id, result))


def _due(deadline: int | None, now_ms: int) -> bool:
    return deadline is not None and deadline <= now_ms
