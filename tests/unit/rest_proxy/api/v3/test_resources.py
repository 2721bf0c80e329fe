import pytest

from yak.api.groups import GroupDescription, MemberDescription, PartitionLag
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak_rest_proxy.api.v3.errors import ResourceMissingError
from yak_rest_proxy.api.v3.resources import (
    Links,
    broker_data,
    cluster_data,
    cluster_links,
    collection,
    config_data,
    consumer_data,
    group_data,
    group_state,
    lag_data,
    lag_summary_data,
    partition_data,
    topic_data,
)

LINKS = Links("http://p:8082/v3", "c1")
C = "http://p:8082/v3/clusters/c1"


def test_cluster_links_know_one_cluster() -> None:
    assert cluster_links("http://p/v3", "c1", "c1") == Links("http://p/v3", "c1")
    with pytest.raises(ResourceMissingError, match="other"):
        cluster_links("http://p/v3", "c1", "other")


def test_cluster_and_collection() -> None:
    cluster = cluster_data(LINKS, None)
    assert cluster["kind"] == "KafkaCluster"
    assert cluster["metadata"] == {"self": C, "resource_name": "crn:///kafka=c1"}
    assert cluster["cluster_id"] == "c1"
    assert cluster["controller"] is None
    assert cluster["topics"] == {"related": f"{C}/topics"}
    assert cluster["consumer_groups"] == {"related": f"{C}/consumer-groups"}
    listed = collection("KafkaClusterList", "http://p:8082/v3/clusters", [cluster])
    assert listed == {
        "kind": "KafkaClusterList",
        "metadata": {"self": "http://p:8082/v3/clusters", "next": None},
        "data": [cluster],
    }


def test_broker() -> None:
    broker = BrokerRegistration(broker_id=2, host="h", port=9092, rack="r1", started_at_ms=0)
    data = broker_data(LINKS, broker)
    assert data["kind"] == "KafkaBroker"
    assert data["metadata"]["self"] == f"{C}/brokers/2"
    assert data["metadata"]["resource_name"] == "crn:///kafka=c1/broker=2"
    assert (data["broker_id"], data["host"], data["port"], data["rack"]) == (2, "h", 9092, "r1")
    assert data["configs"] == {"related": f"{C}/brokers/2/configs"}


def test_topic_and_internal_topics() -> None:
    record = TopicRecord(
        name="orders", topic_id="x", partitions=3, replication_factor=2, created_at_ms=0
    )
    data = topic_data(LINKS, record)
    assert data["kind"] == "KafkaTopic"
    assert data["metadata"]["resource_name"] == "crn:///kafka=c1/topic=orders"
    assert (data["topic_name"], data["partitions_count"], data["replication_factor"]) == (
        "orders",
        3,
        2,
    )
    assert data["is_internal"] is False
    assert data["partitions"] == {"related": f"{C}/topics/orders/partitions"}
    assert data["configs"] == {"related": f"{C}/topics/orders/configs"}
    internal = record.model_copy(update={"name": "__consumer_offsets"})
    assert topic_data(LINKS, internal)["is_internal"] is True


def test_partition_with_and_without_leader() -> None:
    state = PartitionState(topic="t", partition=1, leader=3, replicas=(3, 4), isr=(3,))
    data = partition_data(LINKS, state)
    assert data["metadata"]["resource_name"] == "crn:///kafka=c1/topic=t/partition=1"
    assert data["leader"] == {"related": f"{C}/topics/t/partitions/1/replicas/3"}
    assert data["replicas"] == {"related": f"{C}/topics/t/partitions/1/replicas"}
    leaderless = state.model_copy(update={"leader": -1})
    assert partition_data(LINKS, leaderless)["leader"] is None


def test_config_default_and_override() -> None:
    default = config_data(LINKS, "t", "cleanup.policy", {})
    assert default["value"] == "delete"
    assert default["is_default"] is True
    assert default["source"] == "DEFAULT_CONFIG"
    assert default["synonyms"] == [
        {"name": "cleanup.policy", "value": "delete", "source": "DEFAULT_CONFIG"}
    ]
    over = config_data(LINKS, "t", "cleanup.policy", {"cleanup.policy": "compact"})
    assert (over["value"], over["is_default"], over["source"]) == (
        "compact",
        False,
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert [s["source"] for s in over["synonyms"]] == ["DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"]
    assert over["metadata"]["self"] == f"{C}/topics/t/configs/cleanup.policy"


def test_group_states() -> None:
    assert group_state("PreparingRebalance") == "PREPARING_REBALANCE"
    assert group_state("Stable") == "STABLE"
    assert group_state("Empty") == "EMPTY"
    assert group_state("Sideways") == "UNKNOWN"


def _group() -> GroupDescription:
    member = MemberDescription(
        member_id="m1",
        subscription=["t"],
        topic_pattern=None,
        assignor="uniform",
        member_epoch=3,
        owned=[],
        target=[],
    )
    lags = [
        PartitionLag(topic="t", partition=0, committed_offset=5, end_offset=9, lag=4, owner="m1"),
        PartitionLag(
            topic="t", partition=1, committed_offset=None, end_offset=7, lag=7, owner=None
        ),
        PartitionLag(topic="u", partition=0, committed_offset=1, end_offset=8, lag=7, owner="m1"),
    ]
    return GroupDescription(
        group_id="g",
        state="Stable",
        group_epoch=3,
        assignor="uniform",
        members=[member],
        partitions=lags,
        total_lag=18,
    )


def test_group_consumer_and_lags() -> None:
    group = _group()
    data = group_data(LINKS, "g", group.state, group.assignor)
    assert (data["kind"], data["state"], data["partition_assignor"]) == (
        "KafkaConsumerGroup",
        "STABLE",
        "uniform",
    )
    assert data["consumers"] == {"related": f"{C}/consumer-groups/g/consumers"}
    assert data["lag_summary"] == {"related": f"{C}/consumer-groups/g/lag-summary"}
    consumer = consumer_data(LINKS, "g", group.members[0])
    assert (consumer["consumer_id"], consumer["client_id"]) == ("m1", "m1")
    assert consumer["metadata"]["self"] == f"{C}/consumer-groups/g/consumers/m1"
    owned = lag_data(LINKS, "g", group.partitions[0])
    assert (owned["current_offset"], owned["log_end_offset"], owned["lag"]) == (5, 9, 4)
    assert owned["consumer_id"] == "m1"
    assert owned["metadata"]["self"] == f"{C}/consumer-groups/g/lags/t/partitions/0"
    unowned = lag_data(LINKS, "g", group.partitions[1])
    assert (unowned["current_offset"], unowned["consumer_id"]) == (0, "")


def test_lag_summary_takes_the_first_largest_lag() -> None:
    summary = lag_summary_data(LINKS, _group())
    assert summary["kind"] == "KafkaConsumerGroupLagSummary"
    assert (summary["max_lag_topic_name"], summary["max_lag_partition_id"]) == ("t", 1)
    assert (summary["max_lag"], summary["total_lag"]) == (7, 18)
    assert summary["max_lag_consumer_id"] == ""
    assert summary["max_lag_consumer"] is None
    assert summary["max_lag_partition"] == {"related": f"{C}/topics/t/partitions/1"}


def test_lag_summary_of_a_group_without_partitions() -> None:
    empty = _group().model_copy(update={"partitions": [], "total_lag": 0})
    summary = lag_summary_data(LINKS, empty)
    assert (summary["max_lag"], summary["max_lag_partition_id"], summary["total_lag"]) == (
        0,
        -1,
        0,
    )
    assert summary["max_lag_partition"] is None
