"""The classic group APIs on an in-process broker, spoken with kio (Kafka's own schemas):
FindCoordinator by the hash, a whole group life (JoinGroup with MEMBER_ID_REQUIRED, SyncGroup,
Heartbeat, OffsetCommit, OffsetFetch incl. v8's batch, LeaveGroup, Describe/List/DeleteGroups),
a parked JoinGroup that holds back only its own connection, the old versions' translations, and
NOT_COORDINATOR for a group another broker wins."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.delete_groups.v2 import request as delete2
from kio.schema.describe_groups.v5 import request as describe5
from kio.schema.find_coordinator.v0 import request as find0
from kio.schema.find_coordinator.v4 import request as find4
from kio.schema.heartbeat.v4 import request as heartbeat4
from kio.schema.join_group.v0 import request as join0
from kio.schema.join_group.v9 import request as join9
from kio.schema.leave_group.v0 import request as leave0
from kio.schema.leave_group.v5 import request as leave5
from kio.schema.list_groups.v5 import request as list5
from kio.schema.offset_commit.v8 import request as commit8
from kio.schema.offset_fetch.v5 import request as fetch5
from kio.schema.offset_fetch.v8 import request as fetch8
from kio.schema.sync_group.v5 import request as sync5

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import KafkaTestConnection, kafka_port
from tests.unit.broker.kafka.test_kafka_listener import make
from yak.metadata.models import BrokerRegistration
from yak_broker.kafka.groups import coordinator
from yak_broker.kafka.groups.rendezvous import coordinator_of
from yak_broker.kafka.groups.state.records import GroupSettings

FIND, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
COMMIT, FETCH, DESCRIBE, LIST, DELETE = 8, 9, 15, 16, 42
SECONDS = datetime.timedelta(seconds=1)


@pytest.fixture(autouse=True)
def no_initial_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups do not wait for more members (before the broker fixture starts the listener)."""
    monkeypatch.setattr(
        coordinator, "BROKER_GROUP_SETTINGS", GroupSettings(initial_rebalance_delay_ms=0)
    )


@pytest.fixture
async def conn(broker: BrokerHarness) -> AsyncIterator[KafkaTestConnection]:
    connection = await KafkaTestConnection.open(kafka_port(broker.broker))
    yield connection
    await connection.close()


def join9_request(member_id: str = "", group: str = "g") -> Any:
    return make(
        join9.JoinGroupRequest,
        group_id=group,
        session_timeout=10 * SECONDS,
        rebalance_timeout=30 * SECONDS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(make(join9.JoinGroupRequestProtocol, name="range", metadata=b"sub"),),
        reason=None,
    )


async def join_one(conn: KafkaTestConnection, group: str = "g") -> tuple[str, int]:
    first = await conn.call(JOIN, 9, join9_request(group=group))
    assert first.error_code == 79  # MEMBER_ID_REQUIRED, with the id to come back with
    answer = await conn.call(JOIN, 9, join9_request(first.member_id, group))
    assert (answer.error_code, answer.leader) == (0, first.member_id)
    return first.member_id, answer.generation_id


def sync_request(member: str, generation: int, assignment: bytes, group: str = "g") -> Any:
    return make(
        sync5.SyncGroupRequest,
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(
            make(sync5.SyncGroupRequestAssignment, member_id=member, assignment=assignment),
        ),
    )


def heartbeat(member: str, generation: int, group: str = "g") -> Any:
    return make(
        heartbeat4.HeartbeatRequest,
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
    )


async def test_find_coordinator_answers_this_broker_for_groups_only(
    broker: BrokerHarness, conn: KafkaTestConnection
) -> None:
    answer = await conn.call(
        FIND, 4, make(find4.FindCoordinatorRequest, key_type=0, coordinator_keys=("g1", "g2"))
    )
    port = kafka_port(broker.broker)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in answer.coordinators] == [
        ("g1", 0, 0, port),
        ("g2", 0, 0, port),
    ]
    txn = await conn.call(
        FIND, 4, make(find4.FindCoordinatorRequest, key_type=1, coordinator_keys=("t",))
    )
    assert txn.coordinators[0].error_code == 15
    assert "transactions" in (txn.coordinators[0].error_message or "")
    old = await conn.call(FIND, 0, make(find0.FindCoordinatorRequest, key="g"))
    assert (old.error_code, old.node_id, old.port) == (0, 0, port)


async def test_a_group_life_over_the_wire(broker: BrokerHarness, conn: KafkaTestConnection) -> None:
    await broker.create_topic("t", partitions=2)
    member, generation = await join_one(conn)
    synced = await conn.call(SYNC, 5, sync_request(member, generation, b"mine"))
    assert (synced.error_code, synced.assignment, synced.protocol_name) == (0, b"mine", "range")
    assert (await conn.call(HEARTBEAT, 4, heartbeat(member, generation))).error_code == 0
    assert (await conn.call(HEARTBEAT, 4, heartbeat(member, generation + 1))).error_code == 22

    partitions = tuple(
        make(
            commit8.OffsetCommitRequestPartition,
            partition_index=p,
            committed_offset=10 + p,
            committed_leader_epoch=0,
            committed_metadata="m",
        )
        for p in (0, 1, 7)
    )
    commit = make(
        commit8.OffsetCommitRequest,
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        topics=(make(commit8.OffsetCommitRequestTopic, name="t", partitions=partitions),),
    )
    committed = await conn.call(COMMIT, 8, commit)
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, 0),
        (1, 0),
        (7, 3),  # partition 7 does not exist
    ]
    stored = await broker.store.get(broker.keyspace.committed_offset("g", "t", 1))
    assert stored is not None

    batch = make(
        fetch8.OffsetFetchRequest,
        groups=(
            make(fetch8.OffsetFetchRequestGroup, group_id="g", topics=None),
            make(
                fetch8.OffsetFetchRequestGroup,
                group_id="other",
                topics=(make(fetch8.OffsetFetchRequestTopics, name="t", partition_indexes=(0,)),),
            ),
        ),
        require_stable=False,
    )
    fetched = await conn.call(FETCH, 8, batch)
    mine, other = fetched.groups
    assert [
        (p.partition_index, p.committed_offset, p.metadata) for p in mine.topics[0].partitions
    ] == [
        (0, 10, "m"),
        (1, 11, "m"),
    ]
    assert other.topics[0].partitions[0].committed_offset == -1
    one = make(
        fetch5.OffsetFetchRequest,
        group_id="g",
        topics=(make(fetch5.OffsetFetchRequestTopic, name="t", partition_indexes=(1,)),),
    )
    assert (await conn.call(FETCH, 5, one)).topics[0].partitions[0].committed_offset == 11

    described = await conn.call(
        DESCRIBE,
        5,
        make(describe5.DescribeGroupsRequest, groups=("g",), include_authorized_operations=False),
    )
    (group,) = described.groups
    assert (group.group_state, group.protocol_data, [m.member_id for m in group.members]) == (
        "Stable",
        "range",
        [member],
    )
    assert group.members[0].member_assignment == b"mine"
    listed = await conn.call(
        LIST, 5, make(list5.ListGroupsRequest, states_filter=(), types_filter=())
    )
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Stable")]
    deleted = await conn.call(DELETE, 2, make(delete2.DeleteGroupsRequest, groups_names=("g",)))
    assert deleted.results[0].error_code == 68  # NON_EMPTY_GROUP

    leave = make(
        leave5.LeaveGroupRequest,
        group_id="g",
        members=(
            make(leave5.MemberIdentity, member_id=member, group_instance_id=None, reason="done"),
        ),
    )
    left = await conn.call(LEAVE, 5, leave)
    assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
    deleted = await conn.call(DELETE, 2, make(delete2.DeleteGroupsRequest, groups_names=("g",)))
    assert deleted.results[0].error_code == 0
    assert await broker.store.get(broker.keyspace.committed_offset("g", "t", 1)) is None


async def test_a_parked_join_holds_back_only_its_own_connection(
    broker: BrokerHarness, conn: KafkaTestConnection
) -> None:
    first, generation = await join_one(conn)
    await conn.call(SYNC, 5, sync_request(first, generation, b""))
    other = await KafkaTestConnection.open(kafka_port(broker.broker))
    try:
        fresh = await other.call(JOIN, 9, join9_request())
        second_id = fresh.member_id
        parked = other.send(JOIN, 9, join9_request(second_id))
        # The first member's connection is served meanwhile: rebalance, rejoin.
        assert (await conn.call(HEARTBEAT, 4, heartbeat(first, generation))).error_code == 27
        rejoined = await conn.call(JOIN, 9, join9_request(first))
        answered, second = await other.receive(JOIN, 9)
        assert answered == parked
        assert rejoined.generation_id == second.generation_id == generation + 1
        assert {m.member_id for m in rejoined.members} == {first, second_id}
    finally:
        await other.close()


async def test_old_versions_join_and_leave_by_one_member_id(
    broker: BrokerHarness, conn: KafkaTestConnection
) -> None:
    v0 = make(
        join0.JoinGroupRequest,
        group_id="old",
        session_timeout=10 * SECONDS,
        member_id="",
        protocol_type="consumer",
        protocols=(make(join0.JoinGroupRequestProtocol, name="range", metadata=b""),),
    )
    joined = await conn.call(JOIN, 0, v0)  # no MEMBER_ID_REQUIRED before v4
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, joined.member_id)
    left = await conn.call(
        LEAVE, 0, make(leave0.LeaveGroupRequest, group_id="old", member_id=joined.member_id)
    )
    assert left.error_code == 0
    again = await conn.call(
        LEAVE, 0, make(leave0.LeaveGroupRequest, group_id="old", member_id=joined.member_id)
    )
    assert again.error_code == 25  # UNKNOWN_MEMBER_ID
    marker = await broker.store.get(broker.keyspace.group_classic("old"))
    assert marker is None


async def test_groups_another_broker_wins_answer_not_coordinator(
    broker: BrokerHarness, conn: KafkaTestConnection
) -> None:
    other = BrokerRegistration(broker_id=1, host="h", port=1, started_at_ms=0, kafka_port=9999)
    await broker.store.put(broker.keyspace.broker(1), other.encode())
    snapshot = await broker.broker.wait_for_metadata(lambda s: 1 in s.brokers, 5)
    elsewhere = next(g for i in range(100) if coordinator_of(g := f"x{i}", snapshot.brokers) == 1)
    found = await conn.call(
        FIND, 4, make(find4.FindCoordinatorRequest, key_type=0, coordinator_keys=(elsewhere,))
    )
    assert (found.coordinators[0].node_id, found.coordinators[0].port) == (1, 9999)
    assert (await conn.call(JOIN, 9, join9_request(group=elsewhere))).error_code == 16
    assert (await conn.call(HEARTBEAT, 4, heartbeat("m", 1, elsewhere))).error_code == 16
    assert await broker.store.get(broker.keyspace.group_classic(elsewhere)) is None


_SCALARS: dict[str, Any] = {
    "int8": 0,
    "int32": 1,
    "int64": 0,
    "bool": False,
    "bytes": b"",
    "string": "sweep",
    "timedelta_i32": 10 * SECONDS,
    "timedelta_i64": 10 * SECONDS,
}


def sample(entity: Any) -> Any:
    """A request of any kio schema with every field filled (one element per array)."""
    hints = typing.get_type_hints(entity)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        kind = hints[f.name]
        if typing.get_origin(kind) in (types.UnionType, typing.Union):  # X | None: an X
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        array = typing.get_origin(kind) is tuple
        inner = typing.get_args(kind)[0] if array else kind
        if dataclasses.is_dataclass(inner):
            value = sample(inner)
        else:
            value = _SCALARS[f.metadata["kafka_type"]]
        values[f.name] = (value,) if array else value
    return entity(**values)


@pytest.mark.parametrize(
    ("api_key", "versions"),
    [
        (8, (2, 8)),
        (9, (1, 8)),
        (10, (0, 4)),
        (11, (0, 9)),
        (12, (0, 4)),
        (13, (0, 5)),
        (14, (0, 5)),
        (15, (0, 5)),
        (16, (0, 5)),
        (42, (0, 2)),
    ],
)
async def test_every_version_of_every_group_api_is_answered(
    broker: BrokerHarness, conn: KafkaTestConnection, api_key: int, versions: tuple[int, int]
) -> None:
    await broker.create_topic("sweep")
    for version in range(versions[0], versions[1] + 1):
        request = sample(load_request_schema(api_key, version))
        answer = await conn.call(api_key, version, request)  # a closed connection fails here
        assert answer is not None
