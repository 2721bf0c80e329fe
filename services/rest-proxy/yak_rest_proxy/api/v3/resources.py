"""Confluent v3 resource shapes, built from Yak's metadata: pure functions over values.

Every v3 resource is ``{"kind": "Kafka<Thing>", "metadata": {"self": <url>, "resource_name":
<crn>}, ...fields, <relation>: {"related": <url>}}`` and every list ``{"kind":
"Kafka<Thing>List", "metadata": {"self": <url>, "next": null}, "data": [...]}`` (Confluent's
``Resource`` and ``ResourceCollection``). URLs are absolute, under the ``/v3`` base the request
came to (``Links.base``); resource names are Confluent's CRNs
(``crn:///kafka=<cluster>/topic=<t>/partition=<p>``). Lists are never paged (``next`` is
null). The cluster id is the proxy's ``YAK_CLUSTER_ID`` — the same id the Kafka listener
reports in Metadata and DescribeCluster, and the prefix of the cluster's keys in etcd.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yak.api.groups import GroupDescription, MemberDescription, PartitionLag
from yak.metadata.models import BrokerRegistration, PartitionState, TopicRecord
from yak.topic_config import CATALOGUE
from yak_rest_proxy.api.v3.errors import ResourceMissingError

__all__ = [
    "Links",
    "broker_data",
    "cluster_data",
    "cluster_links",
    "collection",
    "config_data",
    "consumer_data",
    "group_data",
    "group_state",
    "lag_data",
    "lag_summary_data",
    "partition_data",
    "topic_data",
]

Json = dict[str, Any]


@dataclass(frozen=True)
class Links:
    """URLs and resource names of one cluster's resources under ``base`` (``…/v3``)."""

    base: str
    cluster_id: str

    @property
    def cluster(self) -> str:
        return f"{self.base}/clusters/{self.cluster_id}"

    def url(self, *parts: object) -> str:
        return "/".join([self.cluster, *(str(p) for p in parts)])

    def crn(self, *pairs: tuple[str, object]) -> str:
        tail = "".join(f"/{kind}={name}" for kind, name in pairs)
        return f"crn:///kafka={self.cluster_id}{tail}"

    def related(self, *parts: object) -> dict[str, str]:
        return {"related": self.url(*parts)}


def cluster_links(base: str, cluster_id: str, given: str) -> Links:
    """The links of the cluster a path names: this proxy's only cluster, else 404 / 404."""
    if given != cluster_id:
        raise ResourceMissingError(f"Cluster {given} cannot be found.")
    return Links(base, cluster_id)


def _resource(kind: str, url: str, crn: str) -> Json:
    return {"kind": kind, "metadata": {"self": url, "resource_name": crn}}


def collection(kind: str, url: str, data: Sequence[Json]) -> Json:
    """A ``ResourceCollection``: one page holding every item."""
    return {"kind": kind, "metadata": {"self": url, "next": None}, "data": list(data)}


def cluster_data(links: Links, controller: int | None) -> Json:
    """``KafkaCluster``; ``controller`` is a broker id (Yak's controller is the coordinator,
    not a broker: the relation is null, as Confluent's when no controller is known)."""
    return {
        **_resource("KafkaCluster", links.cluster, links.crn()),
        "cluster_id": links.cluster_id,
        "controller": None if controller is None else links.related("brokers", controller),
        "acls": links.related("acls"),
        "brokers": links.related("brokers"),
        "broker_configs": links.related("broker-configs"),
        "consumer_groups": links.related("consumer-groups"),
        "topics": links.related("topics"),
        "partition_reassignments": links.related("topics", "-", "partitions", "-", "reassignment"),
    }


def broker_data(links: Links, broker: BrokerRegistration) -> Json:
    """``KafkaBroker``: host and port of the broker's registered listener."""
    b = broker.broker_id
    return {
        **_resource("KafkaBroker", links.url("brokers", b), links.crn(("broker", b))),
        "cluster_id": links.cluster_id,
        "broker_id": b,
        "host": broker.host,
        "port": broker.port,
        "rack": broker.rack,
        "configs": links.related("brokers", b, "configs"),
        "partition_replicas": links.related("brokers", b, "partition-replicas"),
    }


def topic_data(links: Links, topic: TopicRecord) -> Json:
    """``KafkaTopic``; a topic whose name starts with ``__`` is internal, as in Kafka."""
    name = topic.name
    return {
        **_resource("KafkaTopic", links.url("topics", name), links.crn(("topic", name))),
        "cluster_id": links.cluster_id,
        "topic_name": name,
        "is_internal": name.startswith("__"),
        "replication_factor": topic.replication_factor,
        "partitions_count": topic.partitions,
        "partitions": links.related("topics", name, "partitions"),
        "configs": links.related("topics", name, "configs"),
        "partition_reassignments": links.related("topics", name, "partitions", "-", "reassignment"),
        "authorized_operations": [],
    }


def partition_data(links: Links, state: PartitionState) -> Json:
    """``KafkaPartition``: the leader relation is null while the partition has none."""
    topic, p = state.topic, state.partition
    replicas = ("topics", topic, "partitions", p, "replicas")
    return {
        **_resource(
            "KafkaPartition",
            links.url("topics", topic, "partitions", p),
            links.crn(("topic", topic), ("partition", p)),
        ),
        "cluster_id": links.cluster_id,
        "topic_name": topic,
        "partition_id": p,
        "leader": None if state.leader < 0 else links.related(*replicas, state.leader),
        "replicas": links.related(*replicas),
        "reassignment": links.related("topics", topic, "partitions", p, "reassignment"),
    }


def config_data(links: Links, topic: str, name: str, overrides: Mapping[str, str]) -> Json:
    """``KafkaTopicConfig``: an override is ``DYNAMIC_TOPIC_CONFIG`` (with the default as its
    synonym), anything else Yak's ``DEFAULT_CONFIG``; nothing is read-only or sensitive."""
    default = CATALOGUE[name].default
    synonyms = [{"name": name, "value": default, "source": "DEFAULT_CONFIG"}]
    overridden = name in overrides
    if overridden:
        override = {"name": name, "value": overrides[name], "source": "DYNAMIC_TOPIC_CONFIG"}
        synonyms.insert(0, override)
    return {
        **_resource(
            "KafkaTopicConfig",
            links.url("topics", topic, "configs", name),
            links.crn(("topic", topic), ("config", name)),
        ),
        "cluster_id": links.cluster_id,
        "topic_name": topic,
        "name": name,
        "value": overrides[name] if overridden else default,
        "is_default": not overridden,
        "is_read_only": False,
        "is_sensitive": False,
        "source": "DYNAMIC_TOPIC_CONFIG" if overridden else "DEFAULT_CONFIG",
        "synonyms": synonyms,
    }


def group_state(state: str) -> str:
    """Kafka's state name (``PreparingRebalance``) as Confluent's enum (``PREPARING_REBALANCE``)."""
    known = {
        "Stable": "STABLE",
        "Empty": "EMPTY",
        "Dead": "DEAD",
        "PreparingRebalance": "PREPARING_REBALANCE",
        "CompletingRebalance": "COMPLETING_REBALANCE",
        "Assigning": "ASSIGNING",
        "Reconciling": "RECONCILING",
    }
    return known.get(state, "UNKNOWN")


def group_data(links: Links, group_id: str, state: str, assignor: str) -> Json:
    """``KafkaConsumerGroup``: Yak's groups are consumer groups assigned server-side (KIP-848's
    ``CONSUMER`` type), never simple; the coordinator relation is null (it is not a broker)."""
    return {
        **_resource(
            "KafkaConsumerGroup",
            links.url("consumer-groups", group_id),
            links.crn(("consumer-group", group_id)),
        ),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "is_simple": False,
        "partition_assignor": assignor,
        "state": group_state(state),
        "type": "CONSUMER",
        "is_mixed_consumer_group": False,
        "coordinator": None,
        "consumers": links.related("consumer-groups", group_id, "consumers"),
        "lag_summary": links.related("consumer-groups", group_id, "lag-summary"),
    }


def consumer_data(links: Links, group_id: str, member: MemberDescription) -> Json:
    """``KafkaConsumer``: the member id serves as consumer and client id."""
    where = ("consumer-groups", group_id, "consumers", member.member_id)
    return {
        **_resource(
            "KafkaConsumer",
            links.url(*where),
            links.crn(("consumer-group", group_id), ("consumer", member.member_id)),
        ),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "consumer_id": member.member_id,
        "instance_id": None,
        "client_id": member.member_id,
        "assignments": links.related(*where, "assignments"),
    }


def lag_data(links: Links, group_id: str, lag: PartitionLag) -> Json:
    """``KafkaConsumerLag``: ``current_offset`` is the committed offset (0 when none), the
    consumer the partition's owner ("" when nobody owns it)."""
    where = ("consumer-groups", group_id, "lags", lag.topic, "partitions", lag.partition)
    owner = lag.owner or ""
    return {
        **_resource(
            "KafkaConsumerLag",
            links.url(*where),
            links.crn(
                ("consumer-group", group_id), ("lag", lag.topic), ("partition", lag.partition)
            ),
        ),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "topic_name": lag.topic,
        "partition_id": lag.partition,
        "current_offset": lag.committed_offset or 0,
        "log_end_offset": lag.end_offset,
        "lag": lag.lag,
        "consumer_id": owner,
        "instance_id": None,
        "client_id": owner,
    }


def lag_summary_data(links: Links, group: GroupDescription) -> Json:
    """``KafkaConsumerGroupLagSummary``: the partition with the largest lag (the first in
    topic and partition order on a tie) and the group's total; an empty group reports a lag
    of 0 on no partition (``max_lag_topic_name`` "" and ``max_lag_partition_id`` -1)."""
    group_id = group.group_id
    top = max(group.partitions, key=lambda lag: lag.lag, default=None)
    owner = "" if top is None else top.owner or ""
    return {
        **_resource(
            "KafkaConsumerGroupLagSummary",
            links.url("consumer-groups", group_id, "lag-summary"),
            links.crn(("consumer-group", group_id), ("lag-summary", "")),
        ),
        "cluster_id": links.cluster_id,
        "consumer_group_id": group_id,
        "max_lag_consumer_id": owner,
        "max_lag_instance_id": None,
        "max_lag_client_id": owner,
        "max_lag_topic_name": "" if top is None else top.topic,
        "max_lag_partition_id": -1 if top is None else top.partition,
        "max_lag": 0 if top is None else top.lag,
        "total_lag": group.total_lag,
        "max_lag_consumer": None
        if not owner
        else links.related("consumer-groups", group_id, "consumers", owner),
        "max_lag_partition": None
        if top is None
        else links.related("topics", top.topic, "partitions", top.partition),
    }
