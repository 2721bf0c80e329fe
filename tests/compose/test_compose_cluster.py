"""`docker compose up` for real (issue 22): the images built on this machine with no image
registry (deploy/offline/), the whole topology of deploy/compose/ started on a Docker engine
(a private ``dockerd`` when none runs: tests/compose/engine.py) and used as a client would.

Three etcd members, three brokers on volumes, two coordinators, two proxies behind nginx, the
console, and Prometheus of the monitoring profile (Grafana has no image here). A topic of
replication factor 3 is created through nginx, records go in and come out through each proxy,
the console's pages answer, Prometheus scrapes every service, and a broker and the active
coordinator are killed (``docker kill``) under an acks=all producer: every acknowledged record
is read back where it was acknowledged. ``docker compose down -v`` then leaves no container,
network or volume of the project behind. The only hosts the test talks to are the project's
own containers, through ports published on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.compose.engine import (
    COMPOSE_DIR,
    OFFLINE,
    ROOT,
    Compose,
    Engine,
    bridge_forwarding,
    docker_engine,
    offline_images,
    run,
)
from yak.errors import TopicAlreadyExistsError, YakError
from yak.sdk import AsyncAdmin, AsyncConsumer, AsyncProducer
from yak.sdk.records import RecordMetadata
from yak.sdk.schema_registry import SchemaRegistryClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

CORE = [
    *(f"etcd-{i}" for i in range(3)),
    *(f"coordinator-{i}" for i in range(2)),
    *(f"broker-{i}" for i in range(3)),
    "rest-proxy-0",
    "rest-proxy-1",
    "lb",
    "console",
]
TEST_FILE = Path(__file__).with_name("docker-compose.test.yml")
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
SECURE_FILE = COMPOSE_DIR / "docker-compose.secure.yml"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _build_images(engine: Engine) -> None:
    """The wheelhouse, then every image the offline path uses (timings on stdout)."""
    started = time.monotonic()
    run(["sh", str(OFFLINE / "wheelhouse.sh"), sys.executable], engine.env, timeout=600)
    print(f"wheelhouse: {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    done = run(["sh", str(OFFLINE / "compose-images.sh")], engine.env, timeout=1200)
    print(done.stdout, f"images: {time.monotonic() - started:.0f} s")


def _wait_healthy(compose: Compose, services: list[str], timeout_s: float) -> None:
    """Until every service's container reports healthy (Docker runs the checks; there is no
    event to wait on from here, so the states are read every second, bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = compose.health()
        if all(states.get(s) == "healthy" for s in services):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not healthy within {timeout_s} s: {states}\n{compose.logs()}")
        time.sleep(1)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with docker_engine() as found:
        _build_images(found)
        yield found


@contextlib.contextmanager
def _up(
    engine: Engine, files: list[Path], services: list[str], profiles: tuple[str, ...] = ()
) -> Iterator[tuple[Compose, dict[str, str]]]:
    """A compose project (a new name each time) up and healthy, with its published URLs;
    torn down (volumes too) afterwards, whatever happened. The tests check that the tear-down
    leaves nothing behind."""
    run_id = secrets.token_hex(4)
    ports = {name: _free_port() for name in ("proxy", "console", "prometheus", "registry")}
    scheme = "https" if SECURE_FILE in files else "http"
    urls = {
        "lb": f"{scheme}://127.0.0.1:{ports['proxy']}",
        "console": f"{scheme}://127.0.0.1:{ports['console']}",
        "prometheus": f"http://127.0.0.1:{ports['prometheus']}",
        "schema-registry": f"{scheme}://127.0.0.1:{ports['registry']}",
    }
    variables = {
        **offline_images(),
        "YAK_PROXY_PORT": str(ports["proxy"]),
        "YAK_CONSOLE_PORT": str(ports["console"]),
        "PROMETHEUS_PORT": str(ports["prometheus"]),
        "YAK_SCHEMA_REGISTRY_PORT": str(ports["registry"]),
        "YAK_PUBLIC_URL": urls["lb"],
        "YAK_TEST_BRIDGE": f"yak-{run_id}",
    }
    compose = Compose(
        engine, f"yaktest{run_id}", [*files, TEST_FILE], variables, profiles=list(profiles)
    )
    with bridge_forwarding(variables["YAK_TEST_BRIDGE"]):
        try:
            started = time.monotonic()
            compose("up", "-d", "--no-build", *services, timeout=600)
            _wait_healthy(compose, services, 240)
            print(f"compose up, all healthy: {time.monotonic() - started:.0f} s")
            for proxy in ("rest-proxy-0", "rest-proxy-1"):
                host_port = compose("port", proxy, "9430").strip()
                urls[proxy] = f"{scheme}://{host_port}"
            yield compose, urls
        finally:
            compose("down", "--volumes", "--remove-orphans", "--timeout", "10", check=False)


@pytest.fixture
def cluster(engine: Engine) -> Iterator[tuple[Compose, dict[str, str]]]:
    """The whole topology, the schema registry and Prometheus of the monitoring profile."""
    services = [*CORE, "schema-registry", "prometheus"]
    with _up(engine, [COMPOSE_FILE], services, ("monitoring",)) as found:
        yield found


async def _produce_and_consume(urls: dict[str, str]) -> None:
    """A topic of RF 3 made through nginx; records in through each proxy, all of them out
    through each proxy."""
    async with AsyncAdmin(urls["lb"]) as admin:
        created = await admin.create_topic("orders", partitions=3, replication_factor=3)
    assert created.replication_factor == 3
    assert all(sorted(p.replicas) == [0, 1, 2] for p in created.partitions)
    values: set[bytes] = set()
    for proxy in ("rest-proxy-0", "rest-proxy-1"):
        sent = {f"{proxy}-{i}".encode() for i in range(100)}
        async with AsyncProducer(urls[proxy], linger_ms=2) as producer:
            futures = [await producer.send("orders", v, key=v) for v in sorted(sent)]
            await asyncio.gather(*futures)
        values |= sent
    for group, proxy in (("via-0", "rest-proxy-0"), ("via-1", "rest-proxy-1")):
        seen = await _read_all(urls[proxy], group, "orders", len(values))
        assert set(seen.values()) == values, proxy


async def _read_all(url: str, group: str, topic: str, count: int) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of the first ``count`` records a new group reads."""
    seen: dict[tuple[int, int], bytes] = {}
    async with AsyncConsumer(url, group, [topic], auto_offset_reset="earliest") as consumer:
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            for record in await consumer.poll(timeout_ms=1_000):
                seen[(record.partition, record.offset)] = bytes(record.value or b"")
    return seen


def _console_pages(urls: dict[str, str]) -> None:
    """The console serves its pages from the API behind nginx: the topic made there shows."""
    with httpx.Client(base_url=urls["console"], timeout=10) as client:
        for path in ("/", "/brokers", "/groups"):
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.text[:500])
        topics = client.get("/topics")
        assert topics.status_code == 200
        assert "orders" in topics.text
        topic = client.get("/topics/orders")
        assert topic.status_code == 200
        assert "orders" in topic.text


async def _schema_registry_answers(url: str) -> None:
    """The registry published on the host: no subject, then a schema registered and read back
    (by id and as its subject's latest version), as Confluent's clients do."""
    async with SchemaRegistryClient(url) as registry:
        assert await registry.subjects() == []
        schema = '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}'
        schema_id = await registry.register("orders-value", schema)
        latest = await registry.version("orders-value")
        assert (latest.id, latest.version, latest.schema) == (schema_id, 1, schema)
        assert await registry.subjects() == ["orders-value"]


def _prometheus_scrapes_everything(url: str) -> None:
    """Every Yak service and etcd member is an `up` target (scraped every 5 s: read again,
    bounded, until each has been scraped once)."""
    wanted = {
        "coordinator": 2,
        "broker": 3,
        "rest-proxy": 2,
        "console": 1,
        "schema-registry": 1,
        "etcd": 3,
    }
    deadline = time.monotonic() + 60
    while True:
        targets = httpx.get(f"{url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        up: dict[str, int] = {}
        for target in targets:
            if target["health"] == "up":
                up[target["labels"]["job"]] = up.get(target["labels"]["job"], 0) + 1
        if up == wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"targets up: {up}, wanted {wanted}: {targets}")
        time.sleep(1)


async def _cluster_view(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=5) as client:
        answer = await client.get(f"{url}/api/v1/cluster")
        answer.raise_for_status()
        view: dict[str, Any] = answer.json()
        return view


async def _until(url: str, what: str, ok: Any, timeout_s: float) -> dict[str, Any]:
    """The cluster view once ``ok(view)`` holds (another process's state, read every 0.5 s,
    bounded)."""
    deadline = time.monotonic() + timeout_s
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            view = await _cluster_view(url)
            if ok(view):
                return view
        except httpx.HTTPError:
            pass  # the proxy's controller may be the one just killed
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout_s} s; last view {view}")


async def _kill_under_acks_all(compose: Compose, urls: dict[str, str]) -> None:
    """docker kill a partition leader and the active coordinator while an idempotent acks=all
    producer writes; restart both; every acknowledged record is read back at its offset."""
    lb = urls["lb"]
    async with AsyncAdmin(lb) as admin:
        await admin.create_topic("durable", partitions=3, replication_factor=3)
        leader = (await admin.describe_topic("durable")).partitions[0].leader
    view = await _until(lb, "a controller", lambda v: v.get("controller"), 30)
    coordinator = f"coordinator-{view['controller']['coordinator_id']}"
    victims = [f"broker-{leader}", coordinator]

    acked: list[tuple[RecordMetadata, bytes]] = []
    failed: list[BaseException] = []

    async def produce(producer: AsyncProducer, count: int) -> None:
        futures = []
        for i in range(count):
            value = f"durable-{i}".encode()
            futures.append((await producer.send("durable", value, key=value), value))
            await asyncio.sleep(0.01)
        for future, value in futures:
            try:
                acked.append((await future, value))
            except Exception as exc:  # not acknowledged: allowed to be lost, counted
                failed.append(exc)

    async with AsyncProducer(lb, acks="all", linger_ms=5, delivery_timeout_ms=120_000) as producer:
        writing = asyncio.create_task(produce(producer, 1500))
        await asyncio.sleep(3)
        for service in victims:
            compose.engine.docker("kill", compose.container(service))
        await _until(
            lb,
            "a new controller",
            lambda v: (
                v.get("controller")
                and f"coordinator-{v['controller']['coordinator_id']}" != coordinator
            ),
            60,
        )
        await asyncio.sleep(3)
        for service in victims:
            compose.engine.docker("start", compose.container(service))
        await writing
    assert not failed, failed[:3]
    assert len(acked) == 1500

    await _until(
        lb,
        "three brokers up, every partition fully replicated",
        lambda v: (
            sum(b["status"] == "up" for b in v["brokers"]) == 3
            and v["under_replicated_partition_count"] == 0
            and v["offline_partition_count"] == 0
        ),
        120,
    )
    read = await _read_all(urls["rest-proxy-1"], "verify", "durable", len(acked))
    lost = [(m.partition, m.offset, v) for m, v in acked if read.get((m.partition, m.offset)) != v]
    assert not lost, f"{len(lost)} acknowledged records not read back: {lost[:5]}"
    assert len(read) == len(acked), "a record was written twice"


async def _create_retrying(admin: AsyncAdmin, topic: str, within_s: float = 60.0) -> None:
    """Create ``topic`` RF 3 as a Kafka admin client does: a retriable error (the metadata
    store's transaction timed out while the surviving members elected a leader, or no
    controller yet) is tried again; ``TOPIC_ALREADY_EXISTS`` after a retry means the timed-out
    attempt landed."""
    deadline = time.monotonic() + within_s
    retried = False
    while True:
        try:
            await admin.create_topic(topic, partitions=2, replication_factor=3)
            return
        except TopicAlreadyExistsError:
            if retried:
                return
            raise
        except YakError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            retried = True
            await asyncio.sleep(1)


async def _lose_an_etcd_member(compose: Compose, urls: dict[str, str]) -> None:
    """docker kill etcd-0, the member every service starts on (the first of YAK_ETCD): the
    services move to the next member; brokers keep their registrations, a topic is still
    created through nginx and records still go in and out through the proxies."""
    compose.engine.docker("kill", compose.container("etcd-0"))
    async with AsyncAdmin(urls["lb"]) as admin:
        await _create_retrying(admin, "after-etcd-loss")
    values = {f"etcd-loss-{i}".encode() for i in range(50)}
    async with AsyncProducer(urls["rest-proxy-0"]) as producer:
        await asyncio.gather(*[await producer.send("after-etcd-loss", v) for v in sorted(values)])
    seen = await _read_all(urls["rest-proxy-1"], "etcd-loss", "after-etcd-loss", len(values))
    assert set(seen.values()) == values
    view = await _cluster_view(urls["lb"])
    assert [b["status"] for b in view["brokers"]] == ["up", "up", "up"], view["brokers"]


def test_the_compose_cluster_runs_survives_kills_and_leaves_nothing(
    cluster: tuple[Compose, dict[str, str]],
) -> None:
    compose, urls = cluster
    states = compose.health()
    assert sorted(states) == sorted([*CORE, "schema-registry", "prometheus"])
    volumes = compose.labelled("volume")
    for service in ("etcd-0", "etcd-1", "etcd-2", "broker-0", "broker-1", "broker-2"):
        assert f"{compose.project}_{service}-data" in volumes, volumes

    asyncio.run(_produce_and_consume(urls))
    asyncio.run(_schema_registry_answers(urls["schema-registry"]))
    _console_pages(urls)
    _prometheus_scrapes_everything(urls["prometheus"])
    asyncio.run(_kill_under_acks_all(compose, urls))
    asyncio.run(_lose_an_etcd_member(compose, urls))
    compose.engine.docker("start", compose.container("etcd-0"))
    _wait_healthy(compose, ["etcd-0"], 60)

    _down_leaves_nothing(compose)


def _down_leaves_nothing(compose: Compose) -> None:
    compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
    assert compose.labelled("container") == []
    assert compose.labelled("network") == []
    assert compose.labelled("volume") == []


async def _secure_round_trip(urls: dict[str, str], api_key: str) -> None:
    """Over TLS through nginx's TCP pass-through: no key, no answer; the admin's key makes
    an RF 3 topic, and records go in through one proxy and out through the other."""
    async with httpx.AsyncClient(
        verify=ssl.create_default_context(cafile=os.environ["YAK_TLS_CA"])
    ) as client:
        refused = await client.get(f"{urls['lb']}/topics")
        assert refused.status_code == 401, refused.text
    async with AsyncAdmin(urls["lb"], api_key=api_key) as admin:
        created = await admin.create_topic("secure", partitions=2, replication_factor=3)
    assert all(sorted(p.replicas) == [0, 1, 2] for p in created.partitions)
    values = {f"secure-{i}".encode() for i in range(50)}
    async with AsyncProducer(urls["rest-proxy-0"], api_key=api_key) as producer:
        await asyncio.gather(*[await producer.send("secure", v) for v in sorted(values)])
    seen: set[bytes] = set()
    async with AsyncConsumer(
        urls["rest-proxy-1"],
        "secure-reader",
        ["secure"],
        auto_offset_reset="earliest",
        api_key=api_key,
    ) as consumer:
        deadline = time.monotonic() + 60
        while len(seen) < len(values) and time.monotonic() < deadline:
            seen |= {bytes(r.value or b"") for r in await consumer.poll(timeout_ms=1_000)}
    assert seen == values


async def _secure_registry(url: str, api_key: str) -> None:
    """The registry over TLS: no credential, 401 / 40101; the admin's key registers."""
    async with httpx.AsyncClient(
        verify=ssl.create_default_context(cafile=os.environ["YAK_TLS_CA"])
    ) as client:
        refused = await client.get(f"{url}/subjects")
        assert (refused.status_code, refused.json()["error_code"]) == (401, 40101)
    async with SchemaRegistryClient(url, api_key=api_key) as registry:
        schema = '{"type":"record","name":"Order","fields":[]}'
        assert await registry.register("secure-value", schema) == 1
        assert await registry.subjects() == ["secure-value"]


#: The etcd members' CA inside their containers (the yak-etcd-tls volume).
ETCD_CA = "/etc/etcd/tls/ca.pem"
ETCD_PREFIX = "/yak/compose/"


def _etcdctl(
    compose: Compose, *argv: str, url: str = "https://127.0.0.1:2379", user: str = ""
) -> subprocess.CompletedProcess[str]:
    """etcdctl of etcd-1's image, in etcd-1, against its client port; ``user`` as
    ``name:password`` (passed in the environment, off the command line)."""
    login = ["-e", f"ETCDCTL_USER={user}"] if user else []
    command = (
        "docker",
        "exec",
        *login,
        compose.container("etcd-1"),
        "etcdctl",
        f"--endpoints={url}",
        f"--cacert={ETCD_CA}",
        "--dial-timeout=3s",
        "--command-timeout=5s",
        *argv,
    )
    return run(command, compose.engine.env, timeout=60, check=False)


def _etcd_is_closed(compose: Compose) -> None:
    """etcd answers https only, and only to its users: anonymous, a read and a write of
    ``security/`` are refused ("user name is empty"), and over plain http nothing answers.
    A proxy's user reads the cluster's keys but may not write a principal (``security/``).
    Each kind of Yak service holds only its own etcd password; no service holds the CA's
    key."""
    principal = f"{ETCD_PREFIX}security/principals/intruder"
    read = ("get", "--prefix", "--keys-only", ETCD_PREFIX)
    write = ("put", principal, "{}")
    for argv in (read, write):
        anonymous = _etcdctl(compose, *argv)
        assert anonymous.returncode != 0, anonymous
        assert "user name is empty" in anonymous.stderr, anonymous.stderr[-2000:]
        plain = _etcdctl(compose, *argv, url="http://127.0.0.1:2379")
        assert plain.returncode != 0, plain
        assert ETCD_PREFIX not in plain.stdout

    proxy = compose.container("rest-proxy-0")
    secret = "/var/lib/yak/etcd-auth/yak-rest-proxy.password"
    password = compose.engine.docker("exec", proxy, "cat", secret).strip()
    as_proxy = f"yak-rest-proxy:{password}"
    keys = _etcdctl(compose, *read, user=as_proxy)
    assert keys.returncode == 0, keys.stderr[-2000:]
    assert f"{ETCD_PREFIX}security/principals/admin" in keys.stdout.split()
    refused = _etcdctl(compose, *write, user=as_proxy)
    assert refused.returncode != 0, refused
    assert "permission denied" in refused.stderr, refused.stderr[-2000:]
    assert principal not in _etcdctl(compose, *read, user=as_proxy).stdout.split()
    members = _etcdctl(compose, "member", "list", user=as_proxy).stdout
    assert members.count("https://etcd-") == 6, members  # each member's peer and client URL

    for kind in ("coordinator", "broker", "rest-proxy"):
        container = compose.container(f"{kind}-0")
        held = compose.engine.docker("exec", container, "ls", "/var/lib/yak/etcd-auth").split()
        assert held == [f"yak-{kind}.password"], (kind, held)
        tls = compose.engine.docker("exec", container, "ls", "/var/lib/yak/secrets/tls").split()
        assert "ca.pem" in tls
        assert "ca-key.pem" not in tls
        assert not any(name.startswith("etcd") for name in tls), tls


def test_the_secure_override_runs_on_tls_with_keys(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docker-compose.secure.yml over the same images: secure-init writes the CA, the
    certificates and etcd's passwords, etcd-init closes etcd (users, roles, authentication)
    and makes the admin's key; every service answers its health check over TLS, etcd's
    members too, and etcd refuses anyone without a user and a proxy's user a write of
    ``security/``."""
    with _up(engine, [COMPOSE_FILE, SECURE_FILE], [*CORE, "schema-registry"]) as (compose, urls):
        states = compose.health()
        assert states["secure-init"] == "exited"
        assert states["etcd-init"] == "exited"
        _etcd_is_closed(compose)
        proxy = compose.container("rest-proxy-0")
        ca = tmp_path / "ca.pem"
        engine.docker("cp", f"{proxy}:/var/lib/yak/secrets/tls/ca.pem", str(ca))
        api_key = engine.docker("exec", proxy, "cat", "/var/lib/yak/secrets/console-api-key")
        monkeypatch.setenv("YAK_TLS_CA", str(ca))
        asyncio.run(_secure_round_trip(urls, api_key.strip()))
        asyncio.run(_secure_registry(urls["schema-registry"], api_key.strip()))
        login = httpx.get(
            f"{urls['console']}/login", verify=ssl.create_default_context(cafile=str(ca))
        )
        assert login.status_code == 200
        _down_leaves_nothing(compose)


def test_the_images_come_from_this_machine(engine: Engine) -> None:
    """The Yak image runs Debian's Python 3.11 with Yak from the wheelhouse; etcd is Debian's
    3.4.23 (a release etcd recommends)."""
    images = offline_images()
    python = engine.docker("run", "--rm", "--network", "none", images["YAK_IMAGE"], "python", "-V")
    assert python.startswith("Python 3.11.")
    version = engine.docker(
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "etcd",
        images["ETCD_IMAGE"],
        "--version",
    )
    assert "etcd Version: 3.4." in version
    assert ROOT.joinpath("deploy/docker/wheels").is_dir()
