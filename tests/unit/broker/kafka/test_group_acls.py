"""ACLs on the group APIs (SASL_PLAINTEXT, in-process), as Kafka's: the membership APIs and
OffsetCommit need READ on the group, OffsetCommit READ on each topic, OffsetFetch, FindCoordinator
and DescribeGroups DESCRIBE, DeleteGroups DELETE; ListGroups lists only describable groups; a
topic the principal may not describe is left out of a fetch of all offsets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.delete_groups.v2 import request as delete2
from kio.schema.describe_groups.v5 import request as describe5
from kio.schema.find_coordinator.v4 import request as find4
from kio.schema.list_groups.v5 import request as list5
from kio.schema.offset_commit.v8 import request as commit8
from kio.schema.offset_fetch.v8 import request as fetch8

from tests.unit.broker.kafka.secured_broker import Secured, secured_broker
from tests.unit.broker.kafka.test_group_apis import heartbeat, join9_request, sync_request
from tests.unit.broker.kafka.test_kafka_listener import make
from yak.security import AclBinding, Operation, ResourceType
from yak_broker.kafka.groups import coordinator
from yak_broker.kafka.groups.state.records import GroupSettings

FIND, JOIN, HEARTBEAT, SYNC = 10, 11, 12, 14
COMMIT, FETCH, DESCRIBE, LIST, DELETE = 8, 9, 15, 16, 42
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
GROUP_DENIED, TOPIC_DENIED = 30, 29


@pytest.fixture
async def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Secured]:
    monkeypatch.setattr(
        coordinator, "BROKER_GROUP_SETTINGS", GroupSettings(initial_rebalance_delay_ms=0)
    )
    async with secured_broker(tmp_path) as broker:
        for topic in ("orders", "secret"):
            await broker.harness.create_topic(topic)
        await broker.allow(
            AclBinding("User:alice", GROUP, "g", Operation.READ),
            AclBinding("User:alice", TOPIC, "orders", Operation.READ),
        )
        yield broker


def commit(member: str, generation: int, *topics: str) -> Any:
    return make(
        commit8.OffsetCommitRequest,
        group_id="g",
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        topics=tuple(
            make(
                commit8.OffsetCommitRequestTopic,
                name=t,
                partitions=(
                    make(
                        commit8.OffsetCommitRequestPartition,
                        partition_index=0,
                        committed_offset=3,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            )
            for t in topics
        ),
    )


def fetch_all(group: str = "g") -> Any:
    return make(
        fetch8.OffsetFetchRequest,
        groups=(make(fetch8.OffsetFetchRequestGroup, group_id=group, topics=None),),
        require_stable=False,
    )


async def test_a_principal_without_acls_is_refused_everywhere(secured: Secured) -> None:
    bob = await secured.connect("bob")
    try:
        find = make(find4.FindCoordinatorRequest, key_type=0, coordinator_keys=("g",))
        assert (await bob.call(FIND, 4, find)).coordinators[0].error_code == GROUP_DENIED
        assert (await bob.call(JOIN, 9, join9_request())).error_code == GROUP_DENIED
        assert (await bob.call(HEARTBEAT, 4, heartbeat("m", 1))).error_code == GROUP_DENIED
        committed = await bob.call(COMMIT, 8, commit("", -1, "orders"))
        assert committed.topics[0].partitions[0].error_code == GROUP_DENIED
        assert (await bob.call(FETCH, 8, fetch_all())).groups[0].error_code == GROUP_DENIED
        describe = make(
            describe5.DescribeGroupsRequest, groups=("g",), include_authorized_operations=False
        )
        assert (await bob.call(DESCRIBE, 5, describe)).groups[0].error_code == GROUP_DENIED
        delete = make(delete2.DeleteGroupsRequest, groups_names=("g",))
        assert (await bob.call(DELETE, 2, delete)).results[0].error_code == GROUP_DENIED
    finally:
        await bob.close()
    assert await secured.harness.store.get(secured.harness.keyspace.group_classic("g")) is None


async def test_group_read_and_topic_read_commit_and_fetch_what_may_be_described(
    secured: Secured,
) -> None:
    alice = await secured.connect("alice")
    admin = await secured.connect("admin")
    try:
        first = await alice.call(JOIN, 9, join9_request())
        joined = await alice.call(JOIN, 9, join9_request(first.member_id))
        assert joined.error_code == 0
        synced = await alice.call(SYNC, 5, sync_request(first.member_id, joined.generation_id, b""))
        assert synced.error_code == 0
        answer = await alice.call(
            COMMIT, 8, commit(first.member_id, joined.generation_id, "orders", "secret")
        )
        codes = {t.name: t.partitions[0].error_code for t in answer.topics}
        assert codes == {"orders": 0, "secret": TOPIC_DENIED}
        # The super-user commits to "secret" too: alice's fetch of everything leaves it out.
        answer = await admin.call(
            COMMIT, 8, commit(first.member_id, joined.generation_id, "secret")
        )
        assert answer.topics[0].partitions[0].error_code == 0
        await secured.allow(AclBinding("User:alice", GROUP, "g", Operation.DESCRIBE))
        describe = make(
            describe5.DescribeGroupsRequest, groups=("g",), include_authorized_operations=False
        )
        (described,) = (await alice.call(DESCRIBE, 5, describe)).groups
        assert [m.client_host for m in described.members] == ["/127.0.0.1"]
        (group,) = (await alice.call(FETCH, 8, fetch_all())).groups
        assert [(t.name, t.partitions[0].committed_offset) for t in group.topics] == [("orders", 3)]
        listed = make(list5.ListGroupsRequest, states_filter=(), types_filter=())
        assert [g.group_id for g in (await alice.call(LIST, 5, listed)).groups] == ["g"]
        bob = await secured.connect("bob")
        assert [g.group_id for g in (await bob.call(LIST, 5, listed)).groups] == []
        await bob.close()
    finally:
        await alice.close()
        await admin.close()
