"""The etcd keyspace: every key Yak stores, built and parsed in one place.

All keys live under ``/yak/<cluster-id>/`` (DESIGN.md §4)::

    brokers/<broker-id>                       BrokerRegistration   on the broker's lease
    broker-records/<broker-id>                BrokerRecord         (controller) kept after it leaves
    decommissions/<broker-id>                 BrokerDecommission   (admin API: drain a broker)
    controller                                ControllerRecord     on the coordinator's lease
    topics/<topic>                            TopicRecord
    partitions/<topic>/<partition>            PartitionState
    groups/<group>/members/<member>           GroupMember          on the member's session lease
    groups/<group>/state                      GroupState
    groups/<group>/positions/<member>         GroupPositions
    groups/<group>/classic                    ClassicGroupMarker   on its broker's lease
    offsets/<group>/<topic>/<partition>       CommittedOffset
    share-groups/<group>                      ShareGroupRecord     (admin API) a share group
    producers/next-id                         ProducerIdBlock
    security/principals/<name>                Principal
    security/acls/<acl-id>                    AclEntry

``broker-records/<id>`` is every broker the cluster has known: written by the active controller
when a registration appears or vanishes, deleted only when the broker is forgotten
(``yak brokers forget``); see ``BrokerRecord``.

Topic and group names are validated before they become keys (``yak.names``), so they never
contain ``/`` and splitting a key on ``/`` is unambiguous. Member ids, principal and ACL ids
follow the same character rule. Partition numbers and broker ids are decimal integers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from yak.names import validate_group_id, validate_topic_name

__all__ = ["KeyKind", "Keyspace", "ParsedKey", "validate_cluster_id", "validate_member_id"]

_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def validate_cluster_id(cluster_id: str) -> str:
    """Cluster ids become the key prefix; same character rule as topic names."""
    if not _ID.fullmatch(cluster_id) or cluster_id in (".", ".."):
        raise ValueError(f"invalid cluster id {cluster_id!r}: use 1-249 of [a-zA-Z0-9._-]")
    return cluster_id


def validate_member_id(member_id: str) -> str:
    """Member, principal and ACL ids become key segments: 1-249 of ``[a-zA-Z0-9._-]``."""
    if not _ID.fullmatch(member_id) or member_id in (".", ".."):
        raise ValueError(f"invalid id {member_id!r}: use 1-249 of [a-zA-Z0-9._-]")
    return member_id


class KeyKind(StrEnum):
    """What a key holds."""

    BROKER = "broker"
    BROKER_RECORD = "broker_record"
    DECOMMISSION = "decommission"
    CONTROLLER = "controller"
    TOPIC = "topic"
    PARTITION = "partition"
    GROUP_MEMBER = "group_member"
    GROUP_STATE = "group_state"
    GROUP_POSITIONS = "group_positions"
    GROUP_CLASSIC = "group_classic"
    COMMITTED_OFFSET = "committed_offset"
    PRODUCER_ID_BLOCK = "producer_id_block"
    PRINCIPAL = "principal"
    ACL = "acl"
    SHARE_GROUP = "share_group"


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A key taken apart: its kind and the names in it (unused parts are None)."""

    kind: KeyKind
    broker_id: int | None = None
    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    member: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Keyspace:
    """Key builders and the parser for one cluster's prefix ``/yak/<cluster-id>/``."""

    cluster_id: str = "local"

    def __post_init__(self) -> None:
        validate_cluster_id(self.cluster_id)

    @property
    def root(self) -> str:
        return f"/yak/{self.cluster_id}/"

    # -- prefixes (for range reads and watches) ------------------------------------------------

    @property
    def brokers_prefix(self) -> str:
        return f"{self.root}brokers/"

    @property
    def broker_records_prefix(self) -> str:
        return f"{self.root}broker-records/"

    @property
    def decommissions_prefix(self) -> str:
        return f"{self.root}decommissions/"

    @property
    def topics_prefix(self) -> str:
        return f"{self.root}topics/"

    @property
    def partitions_prefix(self) -> str:
        return f"{self.root}partitions/"

    @property
    def groups_prefix(self) -> str:
        return f"{self.root}groups/"

    @property
    def offsets_prefix(self) -> str:
        return f"{self.root}offsets/"

    @property
    def share_groups_prefix(self) -> str:
        return f"{self.root}share-groups/"

    @property
    def security_prefix(self) -> str:
        return f"{self.root}security/"

    def topic_partitions_prefix(self, topic: str) -> str:
        return f"{self.partitions_prefix}{validate_topic_name(topic)}/"

    def group_prefix(self, group: str) -> str:
        return f"{self.groups_prefix}{validate_group_id(group)}/"

    def group_members_prefix(self, group: str) -> str:
        return f"{self.group_prefix(group)}members/"

    def group_offsets_prefix(self, group: str) -> str:
        return f"{self.offsets_prefix}{validate_group_id(group)}/"

    # -- keys ---------------------------------------------------------------------------------

    def broker(self, broker_id: int) -> str:
        return f"{self.brokers_prefix}{_non_negative(broker_id, 'broker id')}"

    def broker_record(self, broker_id: int) -> str:
        return f"{self.broker_records_prefix}{_non_negative(broker_id, 'broker id')}"

    def decommission(self, broker_id: int) -> str:
        return f"{self.decommissions_prefix}{_non_negative(broker_id, 'broker id')}"

    @property
    def controller(self) -> str:
        return f"{self.root}controller"

    def topic(self, topic: str) -> str:
        return f"{self.topics_prefix}{validate_topic_name(topic)}"

    def partition(self, topic: str, partition: int) -> str:
        return f"{self.topic_partitions_prefix(topic)}{_non_negative(partition, 'partition')}"

    def group_member(self, group: str, member: str) -> str:
        return f"{self.group_members_prefix(group)}{validate_member_id(member)}"

    def group_state(self, group: str) -> str:
        return f"{self.group_prefix(group)}state"

    def group_positions(self, group: str, member: str) -> str:
        return f"{self.group_prefix(group)}positions/{validate_member_id(member)}"

    def group_classic(self, group: str) -> str:
        """The marker of a Kafka classic group (docs/decisions.md, "Kafka classic groups")."""
        return f"{self.group_prefix(group)}classic"

    def committed_offset(self, group: str, topic: str, partition: int) -> str:
        topic = validate_topic_name(topic)
        return f"{self.group_offsets_prefix(group)}{topic}/{_non_negative(partition, 'partition')}"

    def share_group(self, group: str) -> str:
        return f"{self.share_groups_prefix}{validate_group_id(group)}"

    @property
    def producer_id_block(self) -> str:
        return f"{self.root}producers/next-id"

    def principal(self, name: str) -> str:
        return f"{self.security_prefix}principals/{validate_member_id(name)}"

    def acl(self, acl_id: str) -> str:
        return f"{self.security_prefix}acls/{validate_member_id(acl_id)}"

    # -- parsing --------------------------------------------------------------------------------

    def parse(self, key: str | bytes) -> ParsedKey | None:
        """Take a key of this cluster apart; None for keys outside the known layout."""
        text = key.decode() if isinstance(key, bytes) else key
        if not text.startswith(self.root):
            return None
        parts = text[len(self.root) :].split("/")
        try:
            return _parse_parts(parts)
        except ValueError:
            return None


def _non_negative(value: int, what: str) -> int:
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


def _int(text: str) -> int:
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


def _parse_parts(parts: list[str]) -> ParsedKey | None:
    match parts:
        case ["brokers", broker_id]:
            return ParsedKey(KeyKind.BROKER, broker_id=_int(broker_id))
        case ["broker-records", broker_id]:
            return ParsedKey(KeyKind.BROKER_RECORD, broker_id=_int(broker_id))
        case ["decommissions", broker_id]:
            return ParsedKey(KeyKind.DECOMMISSION, broker_id=_int(broker_id))
        case ["controller"]:
            return ParsedKey(KeyKind.CONTROLLER)
        case ["topics", topic]:
            return ParsedKey(KeyKind.TOPIC, topic=topic)
        case ["partitions", topic, partition]:
            return ParsedKey(KeyKind.PARTITION, topic=topic, partition=_int(partition))
        case ["groups", group, "members", member]:
            return ParsedKey(KeyKind.GROUP_MEMBER, group=group, member=member)
        case ["groups", group, "state"]:
            return ParsedKey(KeyKind.GROUP_STATE, group=group)
        case ["groups", group, "classic"]:
            return ParsedKey(KeyKind.GROUP_CLASSIC, group=group)
        case ["groups", group, "positions", member]:
            return ParsedKey(KeyKind.GROUP_POSITIONS, group=group, member=member)
        case ["offsets", group, topic, partition]:
            return ParsedKey(
                KeyKind.COMMITTED_OFFSET, group=group, topic=topic, partition=_int(partition)
            )
        case ["share-groups", group]:
            return ParsedKey(KeyKind.SHARE_GROUP, group=group)
        case ["producers", "next-id"]:
            return ParsedKey(KeyKind.PRODUCER_ID_BLOCK)
        case ["security", "principals", name]:
            return ParsedKey(KeyKind.PRINCIPAL, name=name)
        case ["security", "acls", acl_id]:
            return ParsedKey(KeyKind.ACL, name=acl_id)
    return None
