"""The Kafka listener of ``yak up --secure`` (SASL_SSL, the brokers' certificates, Yak's users
and ACLs) with real clients; one cluster for the module (1 coordinator, 2 brokers):

* confluent-kafka (librdkafka) with ``SCRAM-SHA-512`` produces and reads back; with a wrong
  password it never connects (an authentication error); a user without WRITE on the topic gets
  TOPIC_AUTHORIZATION_FAILED for its records;
* kafka-python with ``PLAIN`` and ``SCRAM-SHA-256`` does the same;
* the admin APIs over SASL: confluent-kafka's ``AdminClient`` as alice (CREATE and DELETE on a
  PREFIXED topic pattern) creates and deletes a topic under it — the broker acts for her on
  the coordinator's admin API (the cluster secret and ``Yak-On-Behalf-Of``), which checks her
  ACLs again and audits her; bob, without them, gets TOPIC_AUTHORIZATION_FAILED and nothing
  is made.

Users are made with ``yak users create --password`` (which stores the SCRAM credentials), ACLs
with ``yak acls add``, as an operator would.
(The folder is not named ``kafka``: it would shadow kafka-python's package.)
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

with warnings.catch_warnings():
    # kafka-python 3 loads its schemas with importlib.resources.read_text (deprecated).
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPartition
    from kafka.errors import KafkaError as KafkaPythonError
    from kafka.errors import TopicAuthorizationFailedError
from tests.integration.ports import free_base_port, layout_offsets
from tests.integration.yak_up_process import yak_cli, yak_up

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

#: carol and dave only ever fail to log in (one test each): a client with a wrong password keeps
#: retrying, and past the failed-login limit its user is refused for a while, so they must not
#: be users other tests log in as.
PASSWORDS = {"alice": "alice-Pw-1", "bob": "bob-Pw-2", "carol": "carol-Pw-3", "dave": "dave-Pw-4"}


#: alice may create and delete topics named with this prefix (a PREFIXED ACL).
ADMIN_PREFIX = "sasl-admin-"


@dataclass(frozen=True)
class SecureKafka:
    bootstrap: str
    ca: str
    topic: str
    data_dir: Path

    def audited(self, *parts: str, service: str = "broker") -> bool:
        """Whether a ``service``'s audit log (its stderr, in ``logs/``) has a line with every
        part."""
        return any(
            all(part in line for part in parts)
            for log in (self.data_dir / "logs").glob(f"{service}-*.log")
            for line in log.read_text().splitlines()
        )

    def librdkafka(self, user: str, password: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": self.ca,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
            **extra,
        }

    def kafka_python(self, user: str, mechanism: str = "PLAIN", **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": "SASL_SSL",
            "ssl_cafile": self.ca,
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
            **extra,
        }


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    data_dir: Path = tmp_path_factory.mktemp("kafka-secure")
    base = free_base_port(layout_offsets(brokers=2, coordinators=1))
    args = ("--secure", "--data-dir", str(data_dir), "--base-port", str(base))
    with yak_up(*args, "--brokers", "2", "--coordinators", "1", stop_timeout_s=30):
        document = json.loads((data_dir / "cluster.json").read_text())
        topic = f"sasl-{uuid.uuid4().hex[:8]}"
        for user, password in PASSWORDS.items():
            yak_cli(data_dir, "users", "create", user, "--password", password, "--no-key")
        yak_cli(
            data_dir, "topics", "create", topic, "--partitions", "1", "--replication-factor", "2"
        )
        yak_cli(
            data_dir,
            *("acls", "add", "--principal", "User:alice", "-t", "TOPIC", "-n", topic),
            *("-o", "WRITE", "-o", "READ"),
        )
        yak_cli(
            data_dir,
            *("acls", "add", "--principal", "User:alice", "-t", "TOPIC", "-n", ADMIN_PREFIX),
            *("--pattern-type", "PREFIXED", "-o", "CREATE", "-o", "DELETE", "-o", "DESCRIBE"),
        )
        ca = str(data_dir / "tls" / "ca.pem")
        kafka = SecureKafka(document["kafka_bootstrap"], ca, topic, data_dir)
        _wait_until_alice_sees(kafka)
        yield kafka


def _wait_until_alice_sees(kafka: SecureKafka) -> None:
    """The ACL reaches every broker's security cache through its etcd watch: wait on
    Metadata answers (each waits for the broker), not on a clock."""
    admin = AdminClient(kafka.librdkafka("alice", PASSWORDS["alice"]))
    for _ in range(50):
        described = admin.list_topics(topic=kafka.topic, timeout=10).topics[kafka.topic]
        if described.error is None:
            return
    pytest.fail(f"alice never saw {kafka.topic}")


def _confluent_produce(config: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    """Produce and flush; the delivery reports' errors (None: delivered)."""
    errors: list[Any] = []
    producer = ConfluentProducer({**config, "acks": "all", "message.timeout.ms": 15000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors


def test_confluent_kafka_scram_sha_512_produces_and_reads_back(secure: SecureKafka) -> None:
    config = secure.librdkafka("alice", PASSWORDS["alice"])
    values = [f"scram {i} {uuid.uuid4().hex}".encode() for i in range(5)]
    assert _confluent_produce(config, secure.topic, values) == [None] * 5
    consumer = ConfluentConsumer({**config, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentPartition(secure.topic, 0, 0)])
        seen: list[bytes] = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(message.value() or b"")
            if all(v in seen for v in values):
                break
        assert all(v in seen for v in values), seen
    finally:
        consumer.close()


def test_confluent_kafka_with_a_wrong_password_never_connects(secure: SecureKafka) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient(secure.librdkafka("carol", "not-the-password", error_cb=errors.append))
    with pytest.raises(KafkaException):
        admin.list_topics(topic=secure.topic, timeout=8)
    for _ in range(20):  # the error callbacks are served by poll
        if errors:
            break
        admin.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert secure.audited('"action": "Kafka SASL SCRAM-SHA-512"', '"result": "unauthenticated"')


def test_confluent_kafka_without_write_gets_topic_authorization_failed(
    secure: SecureKafka,
) -> None:
    config = secure.librdkafka("bob", PASSWORDS["bob"])
    errors = _confluent_produce(config, secure.topic, [b"not allowed"])
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert secure.audited('"principal": "User:bob"', f'"resource": "TOPIC:{secure.topic}"')


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kafka_python_produces_and_reads_back(secure: SecureKafka, mechanism: str) -> None:
    value = f"kafka-python {mechanism} {uuid.uuid4().hex}".encode()
    producer = KafkaProducer(**secure.kafka_python("alice", mechanism, acks="all"))
    try:
        offset = producer.send(secure.topic, value).get(timeout=30).offset
    finally:
        producer.close()
    consumer = KafkaConsumer(**secure.kafka_python("alice", mechanism, consumer_timeout_ms=10000))
    try:
        consumer.assign([KafkaPartition(secure.topic, 0)])
        consumer.seek(KafkaPartition(secure.topic, 0), offset)
        message = next(iter(consumer))
        assert (message.offset, message.value) == (offset, value)
    finally:
        consumer.close()


def test_kafka_python_with_a_wrong_password_fails(secure: SecureKafka) -> None:
    config = {**secure.kafka_python("dave"), "sasl_plain_password": "wrong"}
    # A known api_version: the constructor connects to nothing, so the producer can be closed.
    producer = KafkaProducer(**config, api_version=(2, 8), max_block_ms=8000)
    try:
        with pytest.raises(KafkaPythonError):
            producer.send(secure.topic, b"never sent").get(timeout=30)
    finally:
        producer.close()
    assert secure.audited('"action": "Kafka SASL PLAIN"', '"result": "unauthenticated"')


def test_kafka_python_without_write_gets_topic_authorization_failed(
    secure: SecureKafka,
) -> None:
    producer = KafkaProducer(**secure.kafka_python("bob", max_block_ms=8000))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secure.topic, b"not allowed").get(timeout=30)
    finally:
        producer.close()


def test_the_admin_apis_over_sasl_follow_the_acls(secure: SecureKafka) -> None:
    name = f"{ADMIN_PREFIX}{uuid.uuid4().hex[:8]}"
    bob = AdminClient(secure.librdkafka("bob", PASSWORDS["bob"]))
    refused = bob.create_topics([NewTopic(name, num_partitions=1, replication_factor=2)])
    with pytest.raises(KafkaException) as caught:
        refused[name].result(timeout=30)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    alice = AdminClient(secure.librdkafka("alice", PASSWORDS["alice"]))
    assert name not in alice.list_topics(timeout=10).topics  # bob's refusal made nothing
    created = alice.create_topics([NewTopic(name, num_partitions=2, replication_factor=2)])
    assert created[name].result(timeout=30) is None
    described = alice.list_topics(topic=name, timeout=10).topics[name]
    assert described.error is None
    assert len(described.partitions) == 2
    deleted = alice.delete_topics([name])
    assert deleted[name].result(timeout=30) is None
    assert secure.audited('"principal": "User:bob"', f'"resource": "TOPIC:{name}"')
    # The coordinator checked alice's ACLs again (the broker acts for her) and audited her.
    for action in ("POST /admin/v1/topics", "DELETE /admin/v1/topics/{name}"):
        assert secure.audited(
            '"principal": "User:alice"',
            f'"action": "{action}"',
            f'"resource": "TOPIC:{name}"',
            '"result": "allowed"',
            service="coordinator",
        )
