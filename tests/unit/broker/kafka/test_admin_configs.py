"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs spoken with kio to the handlers:
sources, synonyms, types and sensitive flags as Kafka lists them; alterations validated here,
written by the controller (``FakeController``), visible to the next describe."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.alter_configs.v2 import request as alter2
from kio.schema.describe_configs.v1 import request as describe1
from kio.schema.describe_configs.v4 import request as describe4
from kio.schema.incremental_alter_configs.v1 import request as incremental1

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.admin_harness import AdminBench, make
from yak.security.acl import AclBinding, Operation, ResourceType
from yak.topic_config import CATALOGUE
from yak_broker.kafka.admin_configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)

DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
async def bench(broker: BrokerHarness) -> AdminBench:
    bench = await AdminBench.open(broker)
    await broker.create_topic("conf", configs={"retention.ms": "1000"})
    return bench


def describe(kind: int, name: str, keys: tuple[str, ...] | None = None, **flags: bool) -> Any:
    resource = make(
        describe4.DescribeConfigsResource,
        resource_type=kind,
        resource_name=name,
        configuration_keys=keys,
    )
    return make(describe4.DescribeConfigsRequest, resources=(resource,), **flags)


async def described(bench: AdminBench, kind: int, name: str, **flags: Any) -> Any:
    answer = await bench.call(handle_describe_configs, DESCRIBE, 4, describe(kind, name, **flags))
    (result,) = answer.results
    return result


async def test_a_topics_configs_with_sources_types_and_synonyms(bench: AdminBench) -> None:
    result = await described(
        bench, TOPIC, "conf", include_synonyms=True, include_documentation=True
    )
    assert (result.error_code, result.resource_name) == (0, "conf")
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(CATALOGUE)
    retention, policy = configs["retention.ms"], configs["cleanup.policy"]
    assert (retention.value, retention.config_source, retention.config_type) == ("1000", 1, 5)
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("1000", 1),  # DYNAMIC_TOPIC_CONFIG
        (CATALOGUE["retention.ms"].default, 5),  # DEFAULT_CONFIG
    ]
    assert (policy.value, policy.config_source, policy.config_type) == ("delete", 5, 7)
    assert configs["segment.bytes"].config_type == 3  # INT
    assert configs["unclean.leader.election.enable"].config_type == 1  # BOOLEAN
    assert not any(c.is_sensitive or c.read_only for c in result.configs)
    assert policy.documentation == CATALOGUE["cleanup.policy"].doc


async def test_synonyms_and_documentation_only_when_asked_and_keys_filter(
    bench: AdminBench,
) -> None:
    answer = await bench.call(
        handle_describe_configs, DESCRIBE, 4, describe(TOPIC, "conf", ("retention.ms", "nope"))
    )
    (config,) = answer.results[0].configs
    assert (config.name, config.synonyms, config.documentation) == ("retention.ms", (), None)


async def test_describe_v1_unknown_topic_and_other_brokers(bench: AdminBench) -> None:
    request = make(
        describe1.DescribeConfigsRequest,
        resources=tuple(
            make(
                describe1.DescribeConfigsResource,
                resource_type=kind,
                resource_name=name,
                configuration_keys=None,
            )
            for kind, name in [(TOPIC, "absent"), (BROKER, "7"), (BROKER, "0"), (8, "0")]
        ),
        include_synonyms=False,
    )
    answer = await bench.call(handle_describe_configs, DESCRIBE, 1, request)
    absent, other, own, logger = answer.results
    assert (absent.error_code, other.error_code, own.error_code) == (3, 42, 0)
    assert logger.error_code == 42
    assert logger.error_message
    configs = {c.name: c for c in own.configs}
    assert configs["broker.id"].value == "0"
    assert all(c.read_only and c.config_source == 4 for c in own.configs)  # STATIC_BROKER


async def test_a_configured_cluster_secret_is_listed_as_sensitive(bench: AdminBench) -> None:
    settings = bench.harness.broker.settings
    object.__setattr__(settings, "cluster_secret", "s3cret")
    try:
        result = await described(bench, BROKER, "")
    finally:
        object.__setattr__(settings, "cluster_secret", None)
    secret = next(c for c in result.configs if c.name == "yak.cluster.secret")
    assert (secret.value, secret.is_sensitive, secret.config_type) == (None, True, 9)


def incremental(*changes: tuple[str, int, str | None], validate_only: bool = False) -> Any:
    configs = tuple(
        make(incremental1.AlterableConfig, name=n, config_operation=op, value=v)
        for n, op, v in changes
    )
    resource = make(
        incremental1.AlterConfigsResource,
        resource_type=TOPIC,
        resource_name="conf",
        configs=configs,
    )
    return make(
        incremental1.IncrementalAlterConfigsRequest,
        resources=(resource,),
        validate_only=validate_only,
    )


async def alter(bench: AdminBench, request: Any) -> Any:
    answer = await bench.call(handle_incremental_alter_configs, INCREMENTAL, 1, request)
    (response,) = answer.responses
    return response


async def test_incremental_set_delete_append_and_subtract(bench: AdminBench) -> None:
    response = await alter(
        bench,
        incremental(
            ("retention.ms", DELETE, None),
            ("segment.ms", SET, "60000"),
            ("cleanup.policy", APPEND, "compact"),
        ),
    )
    assert (response.error_code, response.error_message) == (0, None)
    assert bench.controller.calls == [
        (
            "alter",
            "conf",
            {"segment.ms": "60000", "cleanup.policy": "compact,delete"},
            ["retention.ms"],
        )
    ]
    configs = {
        c.name: (c.value, c.config_source) for c in (await described(bench, TOPIC, "conf")).configs
    }
    assert configs["retention.ms"][1] == 5
    assert configs["segment.ms"] == ("60000", 1)
    assert configs["cleanup.policy"] == ("compact,delete", 1)
    await alter(bench, incremental(("cleanup.policy", SUBTRACT, "delete")))
    assert bench.controller.calls[-1][2] == {"cleanup.policy": "compact"}


async def test_incremental_refusals_and_validate_only(bench: AdminBench) -> None:
    for change, code in [
        (("retention.ms", APPEND, "5"), 40),  # INVALID_CONFIG: not a list config
        (("no.such", SET, "1"), 40),
        (("retention.ms", SET, "soon"), 40),
        (("min.insync.replicas", SET, "2"), 40),  # above the replication factor
        (("retention.ms", 9, "1"), 42),  # INVALID_REQUEST: no such operation
    ]:
        response = await alter(bench, incremental(change))
        assert (response.error_code, bool(response.error_message)) == (code, True), change
    dry = await alter(bench, incremental(("retention.ms", SET, "5"), validate_only=True))
    assert dry.error_code == 0
    assert bench.controller.calls == []


async def test_broker_configs_are_static_and_duplicates_refused(bench: AdminBench) -> None:
    resources = tuple(
        make(
            incremental1.AlterConfigsResource,
            resource_type=kind,
            resource_name=name,
            configs=(),
        )
        for kind, name in [(BROKER, "0"), (TOPIC, "conf"), (TOPIC, "conf")]
    )
    request = make(
        incremental1.IncrementalAlterConfigsRequest, resources=resources, validate_only=False
    )
    answer = await bench.call(handle_incremental_alter_configs, INCREMENTAL, 1, request)
    assert [r.error_code for r in answer.responses] == [42, 42, 42]


async def test_alter_configs_replaces_the_overrides(bench: AdminBench) -> None:
    resource = make(
        alter2.AlterConfigsResource,
        resource_type=TOPIC,
        resource_name="conf",
        configs=(make(alter2.AlterableConfig, name="segment.ms", value="5000"),),
    )
    request = make(alter2.AlterConfigsRequest, resources=(resource,), validate_only=False)
    answer = await bench.call(handle_alter_configs, ALTER, 2, request)
    assert answer.responses[0].error_code == 0
    assert bench.controller.calls == [("alter", "conf", {"segment.ms": "5000"}, ["retention.ms"])]
    assert bench.harness.broker.snapshot().topics["conf"].configs == {"segment.ms": "5000"}


async def test_config_acls_on_the_topic_and_on_the_cluster_for_brokers(bench: AdminBench) -> None:
    await bench.harness.create_topic("open")
    bench.secure(
        "User:carol",
        AclBinding("User:carol", ResourceType.TOPIC, "open", Operation.DESCRIBE_CONFIGS),
        AclBinding("User:carol", ResourceType.TOPIC, "open", Operation.ALTER_CONFIGS),
    )
    assert (await described(bench, TOPIC, "open")).error_code == 0
    assert (await described(bench, TOPIC, "conf")).error_code == 29
    assert (await described(bench, BROKER, "0")).error_code == 31  # CLUSTER_AUTHORIZATION_FAILED
    denied = await alter(bench, incremental(("segment.ms", SET, "5")))  # on "conf"
    assert denied.error_code == 29
    assert bench.controller.calls == []
