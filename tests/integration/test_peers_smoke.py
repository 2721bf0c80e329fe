"""The peers comparison end to end, tiny: every driver against its real server.

redis-server and nats-server (Debian's, started by ``loadtest.peers.servers`` on free ports in
temporary folders with the benchmark's durability settings) and a real one-broker Yak cluster
with a rest-proxy. Each driver runs a few seconds at 200 msg/s and a 500-record backlog drain;
records must be published without errors, consumed, and with plausible latencies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from loadtest.peers.drivers.base import Driver
from loadtest.peers.drivers.nats_jetstream import NatsJetStreamDriver
from loadtest.peers.drivers.redis_streams import RedisStreamsDriver
from loadtest.peers.drivers.yak_rest import YakRestDriver
from loadtest.peers.drivers.yak_sdk import YakSdkDriver
from loadtest.peers.runner import Runner
from loadtest.peers.servers import YakServer, nats_server, redis_server, yak_server
from loadtest.peers.workload import Workload

pytestmark = pytest.mark.integration

STEADY = Workload(
    "smoke-steady",
    partitions_per_topic=2,
    message_size=256,
    producer_rate=200,
    duration_s=2.0,
    warmup_s=0.5,
)
BACKLOG = Workload("smoke-backlog", partitions_per_topic=2, message_size=256, backlog_records=500)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def nats_url() -> Iterator[str]:
    with nats_server() as url:
        yield url


@pytest.fixture(scope="module")
def yak() -> Iterator[YakServer]:
    with yak_server(brokers=1) as server:
        yield server


@pytest.fixture(params=["yak-rest", "yak-sdk", "redis", "nats"])
def make_driver(request: pytest.FixtureRequest) -> Callable[[], Driver]:
    name = request.param
    if name == "redis":
        url = request.getfixturevalue("redis_url")
        return lambda: RedisStreamsDriver(url)
    if name == "nats":
        url = request.getfixturevalue("nats_url")
        return lambda: NatsJetStreamDriver(url)
    server: YakServer = request.getfixturevalue("yak")
    kind = YakRestDriver if name == "yak-rest" else YakSdkDriver
    return lambda: kind(server.url, replication_factor=1)


async def test_steady_rate_and_backlog(make_driver: Callable[[], Driver]) -> None:
    driver = make_driver()
    try:
        steady = await Runner(driver, STEADY).run()
        backlog = await Runner(driver, BACKLOG).run()
    finally:
        await driver.aclose()
    assert steady.errors == 0
    assert steady.published >= 0.8 * STEADY.producer_rate * STEADY.duration_s
    assert steady.consumed >= 0.8 * steady.published
    assert 0 < steady.publish_latency.p50 < 2_000
    assert 0 < steady.e2e_latency.p50 < 2_000
    assert steady.e2e_latency.max < 10_000
    assert steady.windows
    assert backlog.errors == 0
    assert (backlog.published, backlog.consumed) == (500, 500)
    assert backlog.publish_rate > 0
    assert backlog.consume_rate > 0
