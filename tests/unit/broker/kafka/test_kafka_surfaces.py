"""Where the Kafka listener shows: the broker's registration (and older ones without it), the
SASL door under a cluster secret, ``yak up``'s layout, ``cluster.json`` and the broker
listing ``yak cluster status`` prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import kafka_port
from yak.cli.cluster import broker_table
from yak.cli.up import KAFKA_PORT_OFFSET, plan_cluster
from yak.cli.up_status import write_cluster_file
from yak.metadata.describe import broker_info
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import BrokerRegistration
from yak.metadata.snapshot import ClusterSnapshot
from yak.supervisor import ManagedProcess
from yak_broker.app import create_app
from yak_broker.kafka.listener import KafkaListener
from yak_broker.server.broker import Broker
from yak_broker.settings import BrokerSettings, KafkaSecurityProtocol


async def test_the_registration_advertises_the_bound_kafka_port(broker: BrokerHarness) -> None:
    registration = broker.broker._registration()
    assert registration.kafka_port == kafka_port(broker.broker)
    assert registration.kafka_host is None  # the registered host, as for the other ports
    registered = broker.broker.snapshot().brokers[0]
    assert registered.kafka_port == kafka_port(broker.broker)


def test_an_older_registration_without_kafka_fields_still_parses() -> None:
    old = b'{"broker_id": 3, "host": "h", "port": 9420, "started_at_ms": 1, "data_port": 7}'
    registration = BrokerRegistration.decode(old)
    assert (registration.kafka_host, registration.kafka_port) == (None, None)


def test_settings_read_the_kafka_port_and_advertised_address() -> None:
    settings = BrokerSettings.from_env(
        {
            "YAK_KAFKA_PORT": "19092",
            "YAK_KAFKA_ADVERTISED_HOST": "localhost",
            "YAK_KAFKA_ADVERTISED_PORT": "29092",
        }
    )
    assert (settings.kafka_port, settings.kafka_advertised_host) == (19092, "localhost")
    assert settings.kafka_advertised_port == 29092
    with pytest.raises(ValueError, match="kafka port"):
        BrokerSettings(kafka_port=-2)


async def _started(settings: BrokerSettings) -> tuple[Broker, MemoryMetadataStore]:
    store = MemoryMetadataStore()
    app = create_app(settings, store_factory=lambda _url: store)
    broker: Broker = app.state.broker
    await broker.start()
    return broker, store


async def test_an_advertised_address_replaces_the_bound_one(tmp_path: Path) -> None:
    settings = BrokerSettings(
        data_dir=tmp_path / "b",
        kafka_advertised_host="kafka.example",
        kafka_advertised_port=29092,
    )
    broker, store = await _started(settings)
    try:
        registration = broker._registration()
        assert (registration.kafka_host, registration.kafka_port) == ("kafka.example", 29092)
        assert kafka_port(broker) not in (0, 29092)  # bound on a port of its own
    finally:
        await broker.stop()
        await store.aclose()


async def test_no_kafka_listener_with_port_minus_one(tmp_path: Path) -> None:
    broker, store = await _started(BrokerSettings(data_dir=tmp_path / "b", kafka_port=-1))
    try:
        assert broker.kafka_listener is None
        assert broker._registration().kafka_port is None
    finally:
        await broker.stop()
        await store.aclose()


async def test_a_cluster_secret_opens_the_kafka_listener_with_sasl(tmp_path: Path) -> None:
    settings = BrokerSettings(data_dir=tmp_path / "b", cluster_secret="s3cret")
    assert settings.kafka_protocol == KafkaSecurityProtocol.SASL_PLAINTEXT
    broker, store = await _started(settings)
    try:
        assert broker._registration().kafka_port == kafka_port(broker)
        assert isinstance(broker.kafka_listener, KafkaListener)
        assert broker.kafka_listener._server_state.security is not None
    finally:
        await broker.stop()
        await store.aclose()


@pytest.mark.parametrize(
    ("values", "protocol"),
    [
        ({}, "PLAINTEXT"),
        ({"tls": True}, "SSL"),
        ({"security": True}, "SASL_PLAINTEXT"),
        ({"cluster_secret": "s", "tls": True}, "SASL_SSL"),
        ({"kafka_security_protocol": "SASL_PLAINTEXT", "tls": True}, "SASL_PLAINTEXT"),
    ],
)
def test_the_kafka_security_protocol_and_its_default(
    values: dict[str, object], protocol: str
) -> None:
    env = {"YAK_KAFKA_SECURITY_PROTOCOL": str(values.pop("kafka_security_protocol", ""))}
    settings = BrokerSettings.from_env(env, **values)
    assert settings.kafka_protocol == KafkaSecurityProtocol(protocol)


@pytest.mark.parametrize(
    "values",
    [
        {"kafka_security_protocol": KafkaSecurityProtocol.SSL},
        {"kafka_security_protocol": KafkaSecurityProtocol.SASL_SSL},
        {"kafka_security_protocol": KafkaSecurityProtocol.PLAINTEXT, "security": True},
        {"kafka_security_protocol": KafkaSecurityProtocol.SSL, "tls": True, "cluster_secret": "s"},
    ],
)
def test_kafka_security_protocols_that_cannot_open(values: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="Kafka listener"):
        BrokerSettings(**values)  # type: ignore[arg-type]


def test_yak_up_gives_each_broker_a_kafka_port(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path, 9400, brokers=3, coordinators=1, cluster_id="c")
    kafka = {s.name: s.env.get("YAK_KAFKA_PORT") for s in plan.services}
    assert [kafka[f"broker-{i}"] for i in range(3)] == [
        str(9400 + KAFKA_PORT_OFFSET + i) for i in range(3)
    ]
    assert kafka["coordinator-0"] is None
    delays = {s.env.get("YAK_GROUP_INITIAL_REBALANCE_DELAY_MS") for s in plan.services}
    assert delays == {"0", None}  # brokers: Kafka's development setting; the others: none
    secure = plan_cluster(tmp_path, 9400, brokers=1, coordinators=1, cluster_id="c", secure=True)
    (broker,) = (s for s in secure.services if s.name == "broker-0")
    assert broker.env["YAK_KAFKA_PORT"] == str(9400 + KAFKA_PORT_OFFSET)  # SASL_SSL there
    assert (broker.env["YAK_SECURITY"], "YAK_TLS_CERT" in broker.env) == ("on", True)


@pytest.fixture
def finished() -> subprocess.Popen[bytes]:
    popen = subprocess.Popen([sys.executable, "-c", "pass"])
    popen.wait()
    return popen


def test_cluster_json_lists_kafka_addresses_and_the_bootstrap(
    tmp_path: Path, finished: subprocess.Popen[bytes]
) -> None:
    plan = plan_cluster(tmp_path, 9400, brokers=2, coordinators=1, cluster_id="c")
    processes = [ManagedProcess(spec, finished) for spec in plan.services]
    path = write_cluster_file(
        tmp_path, "c", etcd=None, services=processes, secure=False, restart=False
    )
    document = json.loads(path.read_text())
    entries = {p["name"]: p for p in document["processes"]}
    assert entries["broker-1"]["kafka"] == "127.0.0.1:9451"
    assert "kafka" not in entries["coordinator-0"]
    assert document["kafka_bootstrap"] == "127.0.0.1:9450,127.0.0.1:9451"


def test_the_broker_listing_shows_the_kafka_address() -> None:
    with_kafka = BrokerRegistration(
        broker_id=0, host="h", port=9420, started_at_ms=0, kafka_port=9450
    )
    without = BrokerRegistration(broker_id=1, host="h", port=9421, started_at_ms=0)
    snapshot = ClusterSnapshot(revision=1, brokers={0: with_kafka, 1: without})
    infos = [broker_info(snapshot, b, now_ms=5) for b in (0, 1)]
    assert [i.kafka if i else "?" for i in infos] == ["h:9450", None]
    table = broker_table([i for i in infos if i is not None], now_ms=5)
    assert "kafka" in [str(c.header) for c in table.columns]
