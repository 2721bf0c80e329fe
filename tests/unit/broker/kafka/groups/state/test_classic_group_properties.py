"""Random sequences of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit checks and
clock moves, sent by a few clients that follow the answers as Kafka clients do (or not), keep
the machine's invariants after every step: at most one leader, a member of it; every Stable
member holds an assignment of the current generation; the generation never goes back;
requests are parked only in the state that parks them; nothing is due after a tick; every
answer is given once, and once time runs out every parked request has had one."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.broker.kafka.groups.state.support import E, GroupHarness
from yak_broker.kafka.groups.state.classic_group import ClassicGroup
from yak_broker.kafka.groups.state.records import (
    GroupSettings,
    JoinGroupResult,
    LeaveMember,
    Protocol,
    SyncGroupResult,
)

CLIENTS = 4
#: Client 3 is static (group.instance.id "i3"); the others are dynamic.
STATIC = {3: "i3"}
PROTOCOL_SETS = [
    (Protocol("range", b"r"),),
    (Protocol("roundrobin", b"o"), Protocol("range", b"r2")),
    (Protocol("roundrobin", b"o"),),  # fits only a group that has no range-only member
]

_action = st.one_of(
    st.tuples(
        st.just("join"),
        st.integers(0, CLIENTS - 1),
        st.integers(0, len(PROTOCOL_SETS) - 1),
        st.sampled_from([1_000, 5_000, 10_000]),
        st.booleans(),  # v4
        st.integers(0, 9),  # 0: forget its member id (a restart)
    ),
    # A client doing what a Kafka consumer does next (join, sync, heartbeat and rejoin).
    st.tuples(st.just("behave"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("behave"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("behave"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("sync"), st.integers(0, CLIENTS - 1), st.booleans()),
    st.tuples(st.just("heartbeat"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("commit"), st.integers(0, CLIENTS - 1), st.booleans()),
    st.tuples(st.just("leave"), st.integers(0, CLIENTS - 1)),
    st.tuples(st.just("advance"), st.sampled_from([1, 100, 999, 3_000, 10_000, 40_000])),
)


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    synced: int = -1
    members: tuple[str, ...] = ()


@dataclass
class Run:
    h: GroupHarness
    clients: list[Client] = field(default_factory=lambda: [Client() for _ in range(CLIENTS)])
    owner: dict[int, int] = field(default_factory=dict)
    issued: set[int] = field(default_factory=set)
    seen: int = 0
    leaders: dict[int, str] = field(default_factory=dict)
    generation: int = 0

    def step(self, action: tuple[object, ...]) -> None:
        match action:
            case ("join", int(c), int(p), int(session), bool(v4), int(forget)):
                if forget == 0:
                    self.clients[c].member_id = ""
                self._join(c, p, session, v4)
            case ("behave", int(c)):
                self._behave(c)
            case ("sync", int(c), bool(stale)):
                client = self.clients[c]
                assignments = {m: m.encode() for m in client.members}
                generation = client.generation - 1 if stale else client.generation
                rid = self.h.sync(client.member_id, generation, assignments, instance=STATIC.get(c))
                self._issued(rid, c)
            case ("heartbeat", int(c)):
                client = self.clients[c]
                code = self.h.heartbeat(client.member_id, client.generation, STATIC.get(c))
                self._lost(c, code)
            case ("commit", int(c), bool(simple)):
                client = self.clients[c]
                if simple:
                    code = self.h.commit_check("", -1)
                    assert (code is E.NONE) == (self.h.group.state == "Empty")
                else:
                    code = self.h.commit_check(client.member_id, client.generation, STATIC.get(c))
                    self._lost(c, code)
            case ("leave", int(c)):
                client = self.clients[c]
                self.h.leave(LeaveMember(client.member_id, STATIC.get(c)))
                client.member_id = ""
            case ("advance", int(ms)):
                self.h.advance(ms)
                deadline = self.h.group.next_deadline()
                assert deadline is None or deadline > self.h.now, "a tick left work due"
        self._follow_answers()
        self.check()

    def _join(self, c: int, p: int = 0, session: int = 5_000, v4: bool = True) -> None:
        rid = self.h.join(
            self.clients[c].member_id,
            client=f"c{c}",
            instance=STATIC.get(c),
            protocols=PROTOCOL_SETS[p],
            session_ms=session,
            rebalance_ms=session * 2,
            v4=v4,
        )
        self._issued(rid, c)
        result = self.h.answers.get(rid)
        if isinstance(result, JoinGroupResult) and result.error is E.MEMBER_ID_REQUIRED:
            self.clients[c].member_id = result.member_id
            self._join(c, p, session, v4)  # joins again at once with its id, as clients do

    def _behave(self, c: int) -> None:
        client = self.clients[c]
        if any(self.owner[r] == c and r not in self.h.answers for r in self.issued):
            return  # its request is parked: a Kafka client waits
        if not client.member_id:
            self._join(c)
        elif client.synced != client.generation:
            client.synced = client.generation
            assignments = {m: m.encode() for m in client.members}
            rid = self.h.sync(
                client.member_id, client.generation, assignments, instance=STATIC.get(c)
            )
            self._issued(rid, c)
        else:
            code = self.h.heartbeat(client.member_id, client.generation, STATIC.get(c))
            self._lost(c, code)
            if code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
                self._join(c)

    def _issued(self, rid: int, c: int) -> None:
        self.owner[rid] = c
        self.issued.add(rid)

    def _lost(self, c: int, code: E) -> None:
        if code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            self.clients[c].member_id = ""

    def _follow_answers(self) -> None:
        for rid in sorted(self.h.answers)[self.seen :]:
            result = self.h.answers[rid]
            client = self.clients[self.owner[rid]]
            if isinstance(result, JoinGroupResult):
                self._check_join(result)
                if result.error in (E.NONE, E.MEMBER_ID_REQUIRED):
                    client.member_id = result.member_id
                if result.error is E.NONE:
                    client.generation = result.generation_id
                    client.members = tuple(m.member_id for m in result.members)
            else:
                assert isinstance(result, SyncGroupResult)
            if result.error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                client.member_id = ""
        self.seen = len(self.h.answers)

    def _check_join(self, result: JoinGroupResult) -> None:
        if result.error is not E.NONE:
            return
        # One leader per generation, and only the leader is told the members.
        leader = self.leaders.setdefault(result.generation_id, result.leader)
        assert result.leader == leader
        assert bool(result.members) == (result.member_id == leader)

    def check(self) -> None:
        check_invariants(self.h.group)
        assert self.h.group.generation_id >= self.generation
        self.generation = self.h.group.generation_id


def check_invariants(group: ClassicGroup) -> None:
    members = {m.member_id: m for m in group.members}
    assert (group.leader_id is None) == (not members)
    assert group.leader_id is None or group.leader_id in members
    if group.state in ("Empty", "Dead"):
        assert not members
    if group.state == "Stable":
        assert all(m.assignment_generation == group.generation_id for m in members.values())
    for member in members.values():
        assert member.join_request is None or group.state == "PreparingRebalance"
        assert member.sync_request is None or group.state == "CompletingRebalance"
        if member.group_instance_id is not None:
            assert group.member(member.member_id) is member


@settings(max_examples=300, deadline=None)
@given(
    delay=st.sampled_from([0, 100, 3_000]),
    actions=st.lists(_action, max_size=60),
)
def test_random_inputs_keep_the_invariants(delay: int, actions: list[tuple[object, ...]]) -> None:
    h = GroupHarness(GroupSettings(1_000, 60_000, initial_rebalance_delay_ms=delay))
    run = Run(h)
    for action in actions:
        run.step(action)
    # Let time run out: every parked request is answered and the group empties.
    for _ in range(100):
        deadline = h.group.next_deadline()
        if deadline is None:
            break
        h.advance(deadline - h.now)
        run.check()
    assert h.group.state == "Empty"
    assert run.issued <= set(h.answers)
