"""A driver for one ``ClassicGroup`` in tests: a fake clock, request ids, and the answers taken
from the machine's outbox after every input (each request answered at most once)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from yak.protocol.kafka_errors import GroupErrorCode
from yak_broker.kafka.groups.state.classic_group import ClassicGroup
from yak_broker.kafka.groups.state.records import (
    GroupSettings,
    Heartbeat,
    JoinGroup,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMember,
    Protocol,
    SyncGroup,
    SyncGroupResult,
)

E = GroupErrorCode
SESSION_MS = 10_000
REBALANCE_MS = 30_000
SETTINGS = GroupSettings(
    min_session_timeout_ms=1_000, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=0
)
RANGE = (Protocol("range", b"range-sub"),)


class FakeClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def advance(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms


class GroupHarness:
    """Feeds one group and keeps its answers by request id."""

    def __init__(self, settings: GroupSettings = SETTINGS) -> None:
        self.clock = FakeClock()
        self.group = ClassicGroup("orders", settings)
        self.answers: dict[int, JoinGroupResult | SyncGroupResult] = {}
        self._request_ids = itertools.count(1)
        self._fresh = itertools.count()

    @property
    def now(self) -> int:
        return self.clock.now_ms

    def drain(self) -> None:
        for reply in self.group.take_replies():
            assert reply.request_id not in self.answers, f"answered twice: {reply}"
            self.answers[reply.request_id] = reply.result

    def join(
        self,
        member_id: str = "",
        *,
        client: str = "c",
        instance: str | None = None,
        protocols: Sequence[Protocol] = RANGE,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        v4: bool = True,
    ) -> int:
        """Send a JoinGroup; its request id (``joined`` tells if it has been answered)."""
        request_id = next(self._request_ids)
        request = JoinGroup(
            request_id=request_id,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=tuple(protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=instance,
            require_known_member_id=v4,
            client_id=client,
            fresh_id=f"f{next(self._fresh)}",
        )
        self.group.join(request, self.now)
        self.drain()
        return request_id

    def join_result(self, request_id: int) -> JoinGroupResult | None:
        result = self.answers.get(request_id)
        assert result is None or isinstance(result, JoinGroupResult)
        return result

    def joined(self, request_id: int) -> JoinGroupResult:
        result = self.join_result(request_id)
        assert result is not None, f"join {request_id} is still parked"
        return result

    def new_member(self, client: str = "c", protocols: Sequence[Protocol] = RANGE) -> int:
        """The v4 handshake: MEMBER_ID_REQUIRED, then the join with that id (its request id)."""
        first = self.joined(self.join(client=client, protocols=protocols))
        assert first.error is E.MEMBER_ID_REQUIRED
        return self.join(first.member_id, client=client, protocols=protocols)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        request_id = next(self._request_ids)
        request = SyncGroup(
            request_id=request_id,
            member_id=member_id,
            generation_id=generation,
            group_instance_id=instance,
            protocol_name=protocol_name,
            assignments=tuple((assignments or {}).items()),
        )
        self.group.sync(request, self.now)
        self.drain()
        return request_id

    def synced(self, request_id: int) -> SyncGroupResult:
        result = self.answers.get(request_id)
        assert isinstance(result, SyncGroupResult), f"sync {request_id} is still parked"
        return result

    def heartbeat(
        self, member_id: str, generation: int, instance: str | None = None
    ) -> GroupErrorCode:
        return self.group.heartbeat(Heartbeat(member_id, generation, instance), self.now)

    def commit_check(
        self, member_id: str, generation: int, instance: str | None = None
    ) -> GroupErrorCode:
        return self.group.check_commit(Heartbeat(member_id, generation, instance), self.now)

    def leave(self, *members: LeaveMember) -> LeaveGroupResult:
        result = self.group.leave(members, self.now)
        self.drain()
        return result

    def advance(self, ms: int) -> None:
        """Move the clock and tick the group, as the driver's timer would."""
        self.group.tick(self.clock.advance(ms))
        self.drain()

    def stable_pair(self) -> tuple[str, str, int]:
        """A Stable group of a leader and a follower: (leader id, follower id, generation)."""
        a = self.new_member("a")
        b_first = self.joined(self.join(client="b"))
        generation_one = self.joined(a)
        self.sync(generation_one.member_id, generation_one.generation_id)
        # b's arrival made a round: a rejoins with its id.
        a_again = self.join(generation_one.member_id, client="a")
        b = self.join(b_first.member_id, client="b")
        leader, follower = self.joined(a_again), self.joined(b)
        self.sync(
            leader.member_id,
            leader.generation_id,
            {leader.member_id: b"A", follower.member_id: b"B"},
        )
        self.sync(follower.member_id, follower.generation_id)
        assert self.group.state == "Stable"
        return leader.member_id, follower.member_id, leader.generation_id
