"""CreateTopics, DeleteTopics and CreatePartitions spoken with kio to the handlers, the
coordinator's admin API played by ``FakeController``: what reaches the controller, what is
refused before it (and with which Kafka error), validate_only, waiting for the metadata."""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any

import pytest
from kio.schema.create_partitions.v3 import request as partitions3
from kio.schema.create_topics.v2 import request as create2
from kio.schema.create_topics.v7 import request as create7
from kio.schema.delete_topics.v1 import request as delete1
from kio.schema.delete_topics.v6 import request as delete6

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.admin_harness import CONTROLLER_URL, AdminBench, make
from yak.errors import AuthenticationError, TopicAlreadyExistsError
from yak.security.acl import CLUSTER_NAME, AclBinding, Operation, ResourceType
from yak.security.audit import AUDIT_LOGGER
from yak_broker.kafka.admin_topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from yak_broker.kafka.metadata import topic_uuid

CREATE, DELETE, PARTITIONS = 19, 20, 37
TIMEOUT = datetime.timedelta(seconds=5)


@pytest.fixture
async def bench(broker: BrokerHarness) -> AdminBench:
    return await AdminBench.open(broker)


def topic(
    name: str,
    partitions: int = 1,
    factor: int = -1,
    configs: dict[str, str] | None = None,
    assignments: tuple[Any, ...] = (),
) -> Any:
    return make(
        create7.CreatableTopic,
        name=name,
        num_partitions=partitions,
        replication_factor=factor,
        assignments=assignments,
        configs=tuple(
            make(create7.CreatableTopicConfig, name=k, value=v) for k, v in (configs or {}).items()
        ),
    )


def create(*topics: Any, validate_only: bool = False) -> Any:
    return make(
        create7.CreateTopicsRequest, topics=topics, timeout=TIMEOUT, validate_only=validate_only
    )


async def test_create_topics_goes_through_the_controller_and_answers_the_topic(
    bench: AdminBench,
) -> None:
    answer = await bench.call(
        handle_create_topics,
        CREATE,
        7,
        create(topic("orders", 3, configs={"retention.ms": " 60000 "})),
    )
    (result,) = answer.topics
    assert (result.name, result.error_code, result.error_message) == ("orders", 0, None)
    assert bench.controller.calls == [("create", "orders", 3, None, {"retention.ms": "60000"})]
    assert bench.controller.opened == [(CONTROLLER_URL, "User:ANONYMOUS")]
    assert bench.controller.closed == 1
    record = bench.harness.broker.snapshot().topics["orders"]
    assert result.topic_id == topic_uuid(record)
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    configs = {c.name: (c.value, c.config_source) for c in result.configs or ()}
    assert configs["retention.ms"] == ("60000", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"] == ("delete", 5)  # DEFAULT_CONFIG
    assert len(bench.harness.broker.snapshot().partitions_of("orders")) == 3


async def test_create_topics_refuses_each_bad_topic_with_kafkas_error(
    bench: AdminBench,
) -> None:
    await bench.harness.create_topic("taken")
    answer = await bench.call(
        handle_create_topics,
        CREATE,
        7,
        create(
            topic("taken"),
            topic("bad name!"),
            topic("__yak_mine"),
            topic("configured", configs={"no.such.config": "1"}),
            topic("too-safe", factor=1, configs={"min.insync.replicas": "2"}),
            topic("wide", factor=3),
            topic("none", partitions=0),
            topic(
                "placed",
                assignments=(
                    make(create7.CreatableReplicaAssignment, partition_index=0, broker_ids=(0,)),
                ),
            ),
            topic("twice"),
            topic("twice"),
        ),
    )
    codes = {t.name: t.error_code for t in answer.topics}
    assert codes == {
        "taken": 36,  # TOPIC_ALREADY_EXISTS
        "bad name!": 17,  # INVALID_TOPIC_EXCEPTION
        "__yak_mine": 44,  # POLICY_VIOLATION
        "configured": 40,  # INVALID_CONFIG
        "too-safe": 40,
        "wide": 38,  # INVALID_REPLICATION_FACTOR
        "none": 37,  # INVALID_PARTITIONS
        "placed": 39,  # INVALID_REPLICA_ASSIGNMENT
        "twice": 42,  # INVALID_REQUEST
    }
    assert all(t.error_message for t in answer.topics)
    assert bench.controller.calls == []


async def test_validate_only_writes_nothing_and_the_controllers_refusal_is_answered(
    bench: AdminBench,
) -> None:
    dry = await bench.call(
        handle_create_topics, CREATE, 7, create(topic("dry", 2), validate_only=True)
    )
    assert (dry.topics[0].error_code, dry.topics[0].num_partitions) == (0, 2)
    assert bench.controller.calls == []
    assert "dry" not in bench.harness.broker.snapshot().topics
    bench.controller.refuse = TopicAlreadyExistsError("raced")
    raced = await bench.call(handle_create_topics, CREATE, 7, create(topic("raced")))
    assert (raced.topics[0].error_code, raced.topics[0].error_message) == (36, "raced")
    bench.controller.refuse = AuthenticationError("a credential is required")
    secured = await bench.call(handle_create_topics, CREATE, 7, create(topic("secured")))
    assert secured.topics[0].error_code == 31  # not SASL_AUTHENTICATION_FAILED: no login failed
    assert "cluster secret" in (secured.topics[0].error_message or "")
    assert bench.controller.closed == 2


async def test_create_topics_v2_and_without_a_controller(bench: AdminBench) -> None:
    request = make(
        create2.CreateTopicsRequest,
        topics=(
            make(
                create2.CreatableTopic,
                name="old",
                num_partitions=-1,
                replication_factor=-1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=TIMEOUT,
        validate_only=False,
    )
    answer = await bench.call(handle_create_topics, CREATE, 2, request)
    assert answer.topics[0].error_code == 0
    assert bench.controller.calls == [("create", "old", 1, None, {})]
    store, keyspace = bench.harness.store, bench.harness.keyspace
    await store.delete(keyspace.controller)
    await bench.harness.broker.wait_for_metadata(lambda s: s.controller is None, 5)
    orphan = await bench.call(handle_create_topics, CREATE, 7, create(topic("orphan")))
    assert orphan.topics[0].error_code == 41  # NOT_CONTROLLER: the client retries


async def test_create_topics_times_out_while_a_leader_is_missing(bench: AdminBench) -> None:
    await bench.harness.register_peer(1)

    async def leaderless(name: str, **_: Any) -> Any:
        await bench.harness.create_topic(name, leader=-1, replicas=(0, 1))
        return bench.controller._described(name)

    bench.controller.create_topic = leaderless  # type: ignore[method-assign]
    request = make(
        create7.CreateTopicsRequest,
        topics=(topic("slow"),),
        timeout=datetime.timedelta(milliseconds=50),
        validate_only=False,
    )
    answer = await bench.call(handle_create_topics, CREATE, 7, request)
    assert answer.topics[0].error_code == 7  # REQUEST_TIMED_OUT: created, not yet led


async def test_delete_topics_by_name_and_by_id(bench: AdminBench) -> None:
    await bench.harness.create_topic("first")
    await bench.harness.create_topic("second")
    record = bench.harness.broker.snapshot().topics["second"]
    missing = uuid.uuid4()
    request = make(
        delete6.DeleteTopicsRequest,
        topics=(
            make(delete6.DeleteTopicState, name="first", topic_id=None),
            make(delete6.DeleteTopicState, name=None, topic_id=topic_uuid(record)),
            make(delete6.DeleteTopicState, name=None, topic_id=missing),
            make(delete6.DeleteTopicState, name="absent", topic_id=None),
        ),
        timeout=TIMEOUT,
    )
    answer = await bench.call(handle_delete_topics, DELETE, 6, request)
    assert [(r.name, r.error_code) for r in answer.responses] == [
        ("first", 0),
        ("second", 0),
        (None, 100),  # UNKNOWN_TOPIC_ID
        ("absent", 3),  # UNKNOWN_TOPIC_OR_PARTITION
    ]
    assert answer.responses[1].topic_id == topic_uuid(record)
    assert bench.controller.calls == [("delete", "first"), ("delete", "second")]
    assert not {"first", "second"} & set(bench.harness.broker.snapshot().topics)


async def test_delete_topics_v1_by_names(bench: AdminBench) -> None:
    await bench.harness.create_topic("legacy")
    request = make(delete1.DeleteTopicsRequest, topic_names=("legacy",), timeout=TIMEOUT)
    answer = await bench.call(handle_delete_topics, DELETE, 1, request)
    assert [(r.name, r.error_code) for r in answer.responses] == [("legacy", 0)]


def grow(name: str, count: int, *, validate_only: bool = False, assign: bool = False) -> Any:
    assignments = (
        (make(partitions3.CreatePartitionsAssignment, broker_ids=(0,)),) if assign else None
    )
    return make(
        partitions3.CreatePartitionsRequest,
        topics=(
            make(
                partitions3.CreatePartitionsTopic, name=name, count=count, assignments=assignments
            ),
        ),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


async def test_create_partitions_grows_a_topic_and_refuses_shrinking(bench: AdminBench) -> None:
    await bench.harness.create_topic("growing", 2)
    dry = await bench.call(
        handle_create_partitions, PARTITIONS, 3, grow("growing", 4, validate_only=True)
    )
    assert dry.results[0].error_code == 0
    assert bench.controller.calls == []
    answer = await bench.call(handle_create_partitions, PARTITIONS, 3, grow("growing", 4))
    assert answer.results[0].error_code == 0
    assert bench.controller.calls == [("partitions", "growing", 4)]
    assert len(bench.harness.broker.snapshot().partitions_of("growing")) == 4
    for request, code in [
        (grow("growing", 4), 37),  # INVALID_PARTITIONS: the count can only grow
        (grow("absent", 2), 3),
        (grow("growing", 5, assign=True), 39),
    ]:
        refused = await bench.call(handle_create_partitions, PARTITIONS, 3, request)
        assert refused.results[0].error_code == code
        assert refused.results[0].error_message
    assert len(bench.controller.calls) == 1


async def test_internal_topics_cannot_grow(bench: AdminBench) -> None:
    await bench.harness.create_topic("__yak_share_state")
    refused = await bench.call(
        handle_create_partitions, PARTITIONS, 3, grow("__yak_share_state", 3)
    )
    assert refused.results[0].error_code == 44  # POLICY_VIOLATION


async def test_acls_as_kafkas_create_delete_and_alter_on_the_topic(
    bench: AdminBench, caplog: pytest.LogCaptureFixture
) -> None:
    await bench.harness.create_topic("theirs", 1)
    await bench.harness.create_topic("mine", 1)
    bench.secure(
        "User:bob",
        AclBinding("User:bob", ResourceType.TOPIC, "mine", Operation.CREATE),
        AclBinding("User:bob", ResourceType.TOPIC, "mine", Operation.ALTER),
        AclBinding("User:bob", ResourceType.TOPIC, "new", Operation.CREATE),
    )
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        created = await bench.call(
            handle_create_topics, CREATE, 7, create(topic("new"), topic("other"))
        )
    assert [(t.name, t.error_code) for t in created.topics] == [("new", 0), ("other", 29)]
    audited = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert any('"result": "denied"' in line and "TOPIC:other" in line for line in audited)
    assert any('"result": "allowed"' in line and "TOPIC:new" in line for line in audited)
    request = make(delete1.DeleteTopicsRequest, topic_names=("theirs", "absent"), timeout=TIMEOUT)
    deleted = await bench.call(handle_delete_topics, DELETE, 1, request)
    assert [r.error_code for r in deleted.responses] == [29, 29]  # existence not revealed
    grown = await bench.call(handle_create_partitions, PARTITIONS, 3, grow("theirs", 2))
    assert grown.results[0].error_code == 29
    allowed = await bench.call(handle_create_partitions, PARTITIONS, 3, grow("mine", 2))
    assert allowed.results[0].error_code == 0
    assert [c[:2] for c in bench.controller.calls] == [("create", "new"), ("partitions", "mine")]
    # The coordinator checks the same ACLs again for the SASL principal (Yak-On-Behalf-Of).
    assert {who for _, who in bench.controller.opened} == {"User:bob"}


async def test_create_on_the_cluster_covers_every_topic(bench: AdminBench) -> None:
    bench.secure(
        "User:ops", AclBinding("User:ops", ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE)
    )
    answer = await bench.call(handle_create_topics, CREATE, 7, create(topic("a"), topic("b")))
    assert [t.error_code for t in answer.topics] == [0, 0]
