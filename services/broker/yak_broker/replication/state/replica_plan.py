"""Which partition replicas this broker should host: a pure function of the cluster metadata.

``plan_replicas(snapshot, broker_id, local)`` compares what etcd says (topics, partition states)
with the logs on disk (``local``: partition → topic id recorded in its folder) and returns:

- ``host``: every partition whose ``replicas`` include this broker, of a live topic (present,
  not ``deleting``), with its topic id, log config and state — created if missing, else its
  config and state are refreshed;
- ``delete``: local logs to remove, each with the reason —
  the topic is gone or ``deleting``; the folder's topic id differs from the topic's (the topic
  was deleted and re-created under the same name: the old data must never be served); or the
  partition state exists and no longer lists this broker (reassigned away).

A local log whose topic exists but whose partition state is not written yet is left alone
(a topic being created). A folder without a recorded id is adopted by the current topic.

``plan_changes(snapshot, broker_id, local, partitions, topics)`` is the same plan restricted to
what a batch of metadata events touched (issue 19: work proportional to the change): the
partitions named, every partition of the topics named (a topic's configs, its deletion or
re-creation), and the local logs of those topics. Its ``host`` lists only those partitions;
its ``considered`` set says which were looked at, so a caller can stop serving a considered
partition that is no longer hosted.

``log_config_of`` and ``min_insync_replicas_of`` read a topic's string configs: the broker's
``LogConfig`` takes only storage settings, so other topic configs (``min.insync.replicas``,
``unclean.leader.election.enable`` ...) are filtered out first; an invalid value (the admin API
validates, so this means a newer writer) is logged and the defaults are used.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import NamedTuple

from yak.errors import InvalidConfigError
from yak.metadata.models import PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak.types import TopicPartition
from yak_broker.storage.log_config import LogConfig

__all__ = [
    "DesiredReplica",
    "ReplicaPlan",
    "log_config_of",
    "min_insync_replicas_of",
    "plan_changes",
    "plan_replicas",
]

_log = logging.getLogger(__name__)
_LOG_CONFIG_NAMES = frozenset(LogConfig().to_dict())
_MIN_INSYNC = "min.insync.replicas"


class DesiredReplica(NamedTuple):
    """A partition replica this broker must host, as the metadata describes it."""

    tp: TopicPartition
    topic_id: str
    config: LogConfig
    min_insync_replicas: int
    state: PartitionState


class ReplicaPlan(NamedTuple):
    """What to host and which local logs to delete (with why)."""

    host: tuple[DesiredReplica, ...]
    delete: tuple[tuple[TopicPartition, str], ...]
    #: The partitions this plan decided on (None: every partition, a full plan).
    considered: frozenset[TopicPartition] | None = None


def plan_replicas(
    snapshot: ClusterSnapshot, broker_id: int, local: Mapping[TopicPartition, str | None]
) -> ReplicaPlan:
    """See the module doc."""
    host = []
    for (topic, partition), state in sorted(snapshot.partitions.items()):
        desired = _desired(snapshot, broker_id, topic, partition, state)
        if desired is not None:
            host.append(desired)
    delete = []
    for tp, local_id in sorted(local.items()):
        reason = _delete_reason(snapshot, broker_id, tp, local_id)
        if reason is not None:
            delete.append((tp, reason))
    return ReplicaPlan(tuple(host), tuple(delete))


def plan_changes(
    snapshot: ClusterSnapshot,
    broker_id: int,
    local: Mapping[TopicPartition, str | None],
    partitions: Iterable[tuple[str, int]],
    topics: Iterable[str],
) -> ReplicaPlan:
    """``plan_replicas`` for what changed only (see the module doc)."""
    considered = {TopicPartition(topic, partition) for topic, partition in partitions}
    changed_topics = set(topics)
    for topic in changed_topics:
        record = snapshot.topics.get(topic)
        if record is not None:
            considered.update(TopicPartition(topic, p) for p in range(record.partitions))
    if changed_topics:
        considered.update(tp for tp in local if tp.topic in changed_topics)
    host, delete = [], []
    for tp in sorted(considered):
        state = snapshot.partitions.get((tp.topic, tp.partition))
        if state is not None:
            desired = _desired(snapshot, broker_id, tp.topic, tp.partition, state)
            if desired is not None:
                host.append(desired)
        if tp in local:
            reason = _delete_reason(snapshot, broker_id, tp, local[tp])
            if reason is not None:
                delete.append((tp, reason))
    return ReplicaPlan(tuple(host), tuple(delete), frozenset(considered))


def _desired(
    snapshot: ClusterSnapshot, broker_id: int, topic: str, partition: int, state: PartitionState
) -> DesiredReplica | None:
    record = snapshot.topics.get(topic)
    if record is None or record.deleting or broker_id not in state.replicas:
        return None
    return DesiredReplica(
        TopicPartition(topic, partition),
        record.topic_id,
        log_config_of(record.configs),
        min_insync_replicas_of(record.configs),
        state,
    )


def _delete_reason(
    snapshot: ClusterSnapshot, broker_id: int, tp: TopicPartition, local_id: str | None
) -> str | None:
    record = snapshot.topics.get(tp.topic)
    if record is None:
        return "the topic does not exist"
    if record.deleting:
        return "the topic is being deleted"
    if local_id is not None and local_id != record.topic_id:
        return f"the folder holds topic id {local_id}, the topic is now {record.topic_id}"
    state = snapshot.partitions.get((tp.topic, tp.partition))
    if state is not None and broker_id not in state.replicas:
        return f"the replicas {list(state.replicas)} no longer include broker {broker_id}"
    return None


def log_config_of(configs: Mapping[str, str]) -> LogConfig:
    """The storage settings among a topic's configs (defaults if they do not parse); parsed
    once per distinct set of settings (topics mostly share a handful)."""
    storage = tuple(sorted((n, v) for n, v in configs.items() if n in _LOG_CONFIG_NAMES))
    return _parsed_log_config(storage)


@lru_cache(maxsize=4096)
def _parsed_log_config(storage: tuple[tuple[str, str], ...]) -> LogConfig:
    try:
        return LogConfig.from_dict(dict(storage))
    except InvalidConfigError as exc:
        _log.error("ignoring invalid topic configs %s: %s", dict(storage), exc.message)
        return LogConfig()


def min_insync_replicas_of(configs: Mapping[str, str]) -> int:
    """``min.insync.replicas`` (default 1)."""
    try:
        return max(int(configs.get(_MIN_INSYNC, "1")), 1)
    except ValueError:
        _log.error("ignoring invalid %s=%r", _MIN_INSYNC, configs.get(_MIN_INSYNC))
        return 1
