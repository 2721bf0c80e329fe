"""ACLs on the Kafka listener (SASL_PLAINTEXT, in-process): Produce needs WRITE, Fetch READ,
ListOffsets and OffsetForLeaderEpoch DESCRIBE, Metadata lists only describable topics and
refuses named ones alike whether they exist or not; denials answer Kafka's
TOPIC_AUTHORIZATION_FAILED per partition or topic and are audited; a DENY wins; super-users
pass; InitProducerId needs only a login; ``kafka.authorize``'s helpers."""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.metadata.v12 import request as metadata12
from kio.schema.offset_for_leader_epoch.v4 import request as epoch4
from kio.schema.produce.v7 import request as produce7

from tests.unit.broker.kafka.kafka_test_client import KafkaTestConnection
from tests.unit.broker.kafka.secured_broker import Secured, secured_broker
from tests.unit.broker.kafka.test_kafka_apis import list_offsets, metadata
from tests.unit.broker.kafka.test_kafka_listener import (
    batch,
    fetch_request,
    make,
    produce_request,
)
from yak.security import AclBinding, Operation, Permission, ResourceType
from yak.security.audit import AUDIT_LOGGER
from yak_broker.kafka.authorize import (
    audit_allowed,
    authorize,
    authorized,
    denied_code,
    visible,
)
from yak_broker.kafka.context import ANONYMOUS, KafkaRequest

PRODUCE, FETCH, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID, EPOCHS = 0, 1, 2, 3, 22, 23
TOPIC = ResourceType.TOPIC


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    async with secured_broker(tmp_path) as broker:
        for topic in ("orders", "listed", "secret"):
            await broker.harness.create_topic(topic)
        await broker.allow(
            AclBinding("User:alice", TOPIC, "orders", Operation.WRITE),
            AclBinding("User:alice", TOPIC, "orders", Operation.READ),
            AclBinding("User:alice", TOPIC, "listed", Operation.DESCRIBE),
        )
        yield broker


async def _as(secured: Secured, user: str) -> KafkaTestConnection:
    return await secured.connect(user)


def _log_end(secured: Secured, topic: str) -> int:
    replicas = secured.harness.broker.replicas.replicas
    return next(r.log.log_end_offset for tp, r in replicas.items() if tp.topic == topic)


async def test_produce_needs_write_per_topic_and_denials_are_audited(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    bob = await _as(secured, "bob")
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        answer = await bob.call(PRODUCE, 7, produce_request("orders", batch(b"x")))
    (partition,) = answer.responses[0].partition_responses
    assert (partition.error_code, partition.base_offset) == (29, -1)
    assert _log_end(secured, "orders") == 0
    (line,) = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    for part in ('"principal": "User:bob"', '"resource": "TOPIC:orders"', '"result": "denied"'):
        assert part in line
    assert '"operation": "WRITE"' in line
    assert '"action": "Kafka Produce v7"' in line
    await bob.close()


async def test_one_produce_is_split_between_allowed_and_denied_topics(secured: Secured) -> None:
    alice = await _as(secured, "alice")
    data = [
        make(
            produce7.TopicProduceData,
            name=topic,
            partition_data=(make(produce7.PartitionProduceData, index=0, records=batch(b"v")),),
        )
        for topic in ("orders", "secret")
    ]
    request = make(
        produce7.ProduceRequest,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=tuple(data),
    )
    answer = await alice.call(PRODUCE, 7, request)
    codes = {r.name: r.partition_responses[0].error_code for r in answer.responses}
    assert codes == {"orders": 0, "secret": 29}
    assert (_log_end(secured, "orders"), _log_end(secured, "secret")) == (1, 0)
    await alice.close()


async def test_fetch_needs_read(secured: Secured) -> None:
    alice = await _as(secured, "alice")
    await alice.call(PRODUCE, 7, produce_request("orders", batch(b"a", b"b")))
    fetched = await alice.call(FETCH, 11, fetch_request("orders", 0, max_wait_ms=0))
    (partition,) = fetched.responses[0].partitions
    assert (partition.error_code, partition.high_watermark) == (0, 2)
    assert partition.records
    bob = await _as(secured, "bob")
    fetched = await bob.call(FETCH, 11, fetch_request("orders", 0, max_wait_ms=0))
    (partition,) = fetched.responses[0].partitions
    assert (partition.error_code, partition.records) == (29, b"")
    await alice.close()
    await bob.close()


async def test_list_offsets_and_epochs_need_describe(secured: Secured) -> None:
    epochs = make(
        epoch4.OffsetForLeaderEpochRequest,
        replica_id=-1,
        topics=(
            make(
                epoch4.OffsetForLeaderTopic,
                topic="listed",
                partitions=(make(epoch4.OffsetForLeaderPartition, partition=0, leader_epoch=0),),
            ),
        ),
    )
    expected = {"alice": 0, "bob": 29}
    for user, code in expected.items():
        connection = await _as(secured, user)
        listed = await connection.call(LIST_OFFSETS, 7, list_offsets("listed", -1))
        (partition,) = listed.topics[0].partitions
        assert (partition.error_code, partition.offset) == (code, 0 if code == 0 else -1)
        answer = await connection.call(EPOCHS, 4, epochs)
        assert answer.topics[0].partitions[0].error_code == code
        await connection.close()


def _names(answer: Any) -> dict[str | None, int]:
    return {t.name: t.error_code for t in answer.topics}


async def test_metadata_lists_only_describable_topics(secured: Secured) -> None:
    seen = {}
    for user in ("alice", "bob", "admin"):
        connection = await _as(secured, user)
        answer = await connection.call(METADATA, 12, metadata(None))
        seen[user] = _names(answer)
        assert [b.node_id for b in answer.brokers] == [0]
        await connection.close()
    assert seen == {
        "alice": {"listed": 0, "orders": 0},
        "bob": {},
        "admin": {"listed": 0, "orders": 0, "secret": 0},
    }


async def test_named_topics_are_refused_alike_whether_they_exist_or_not(
    secured: Secured,
) -> None:
    bob = await _as(secured, "bob")
    answer = await bob.call(METADATA, 12, metadata(["orders", "absent"]))
    assert _names(answer) == {"orders": 29, "absent": 29}
    assert all(not t.partitions for t in answer.topics)
    alice = await _as(secured, "alice")
    answer = await alice.call(METADATA, 12, metadata(["orders", "secret"]))
    assert _names(answer) == {"orders": 0, "secret": 29}
    by_id = make(metadata12.MetadataRequestTopic, topic_id=answer.topics[0].topic_id, name=None)
    request = make(
        metadata12.MetadataRequest,
        topics=(by_id,),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = (await bob.call(METADATA, 12, request)).topics
    assert (topic.error_code, topic.name) == (29, None)
    await bob.close()
    await alice.close()


async def test_a_deny_wins_and_takes_effect_at_once(secured: Secured) -> None:
    alice = await _as(secured, "alice")
    await secured.allow(AclBinding("User:alice", TOPIC, "orders", Operation.WRITE, Permission.DENY))
    answer = await alice.call(PRODUCE, 7, produce_request("orders", batch(b"x")))
    assert answer.responses[0].partition_responses[0].error_code == 29
    await alice.close()


async def test_init_producer_id_needs_only_a_login(secured: Secured) -> None:
    bob = await _as(secured, "bob")
    answer = await bob.call(
        INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),  # type: ignore[arg-type]
            producer_id=-1,  # type: ignore[arg-type]
            producer_epoch=-1,  # type: ignore[arg-type]
        ),
    )
    assert (answer.error_code, answer.producer_epoch) == (0, 0)
    assert answer.producer_id >= 0
    await bob.close()


def _request(secured: Secured | None, session: object = None) -> KafkaRequest:
    server: Any = type("Server", (), {"security": None})()
    if secured is not None:
        listener: Any = secured.harness.broker.kafka_listener
        server = listener._server_state
    return KafkaRequest(server, 0, 7, 1, "t", memoryview(b""), session)  # type: ignore[arg-type]


async def test_the_helpers_without_sasl_let_everything_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = _request(None)
    assert request.principal == ANONYMOUS
    assert authorize(request, Operation.ALTER, ResourceType.CLUSTER, "yak-cluster")
    assert authorized(request, Operation.READ, TOPIC, ["a", "b"]) == {"a", "b"}
    assert visible(request, Operation.DESCRIBE, TOPIC, ["b", "a"]) == ["b", "a"]
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        audit_allowed(request, ["TOPIC:a"], "CREATE")
    assert not [r for r in caplog.records if r.name == AUDIT_LOGGER]


async def test_the_helpers_check_the_principal(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    session: Any = type("Session", (), {"principal": "User:alice", "peer": "1.2.3.4:5"})()
    request = _request(secured, session)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        assert authorized(request, Operation.READ, TOPIC, ["orders", "listed", "orders"]) == {
            "orders"
        }
        assert visible(request, Operation.DESCRIBE, TOPIC, ["secret", "listed"]) == ["listed"]
        assert not authorize(request, Operation.READ, ResourceType.GROUP, "g")
        audit_allowed(request, ["TOPIC:orders"], "ALTER")
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(lines) == 3  # listed (READ denied), group g, the allowed change; not visible's
    assert '"remote": "1.2.3.4:5"' in lines[0]
    assert '"result": "allowed"' in lines[2]
    assert [denied_code(t) for t in ResourceType] == [29, 30, 31]


async def test_a_denied_acks_0_produce_closes_the_connection(secured: Secured) -> None:
    bob = await _as(secured, "bob")
    bob.send(PRODUCE, 7, produce_request("orders", batch(b"x"), acks=0))
    assert await bob.closed_by_peer()
    with contextlib.suppress(OSError):
        await bob.close()
    assert _log_end(secured, "orders") == 0
    alice = await _as(secured, "alice")  # allowed: appended, no answer, the connection stays
    alice.send(PRODUCE, 7, produce_request("orders", batch(b"x"), acks=0))
    answer = await alice.call(METADATA, 12, metadata(["orders"]))
    assert answer.topics[0].error_code == 0
    assert _log_end(secured, "orders") == 1
    await alice.close()
