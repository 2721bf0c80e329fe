"""The APIs the Kafka listener serves: one table, ``api key -> (versions, handler)``.

``APIS`` is the single place an API is added (later increments: admin, groups, SASL): its name,
the versions served (advertised as they are in ApiVersions) and its handler
(``context.Handler``). Every version in a range must have a kio schema, but for those an API
names ``without_kio`` (Produce v0-v2) — checked when this module is imported, which also
derives the first flexible version of each API (the request header is v2 from there, v1
below).

ApiVersions is served here because its answer is this table. A request for an API or version
outside the table is ``unsupported``: ApiVersions gets Kafka's answer — a v0 response with
``UNSUPPORTED_VERSION`` and the table, so the client retries with a version it finds in it;
anything else closes the connection (the listener's part), as Kafka does.
Pure table and pure answers (the handlers it names are the async part).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from yak.protocol.broker_wire import Buffer
from yak_broker.kafka.admin_configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from yak_broker.kafka.admin_topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from yak_broker.kafka.context import Handler, KafkaRequest
from yak_broker.kafka.delete_records import handle_delete_records
from yak_broker.kafka.describe_cluster import handle_describe_cluster
from yak_broker.kafka.fetch import handle_fetch
from yak_broker.kafka.find_coordinator import handle_find_coordinator
from yak_broker.kafka.group_admin_apis import (
    handle_delete_groups,
    handle_describe_groups,
    handle_list_groups,
)
from yak_broker.kafka.group_apis import (
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_sync_group,
)
from yak_broker.kafka.list_offsets import handle_list_offsets, handle_offset_for_leader_epoch
from yak_broker.kafka.metadata import handle_metadata
from yak_broker.kafka.offset_apis import handle_offset_commit, handle_offset_fetch
from yak_broker.kafka.produce import handle_init_producer_id, handle_produce
from yak_broker.kafka.produce_legacy import LEGACY_VERSIONS
from yak_broker.kafka.sasl import handle_sasl_authenticate, handle_sasl_handshake
from yak_broker.kafka.schemas import (
    API_VERSIONS_KEY,
    read_request,
    request_is_flexible,
    write_response,
)

__all__ = ["APIS", "Api", "api_versions_values", "lookup", "unsupported_version_answer"]

_UNSUPPORTED_VERSION = 35


class Api(NamedTuple):
    name: str
    min_version: int
    max_version: int
    handler: Handler
    #: Versions served without a kio schema (their handler parses them; never flexible).
    without_kio: frozenset[int] = frozenset()
    #: The first flexible request version (request header v2 from there); derived from kio.
    first_flexible: int = 1 << 15


async def _handle_api_versions(request: KafkaRequest) -> list[Buffer]:
    read_request(API_VERSIONS_KEY, request.api_version, request.body)
    return write_response(
        API_VERSIONS_KEY, request.api_version, request.correlation_id, api_versions_values(0)
    )


def _table(apis: Mapping[int, Api]) -> dict[int, Api]:
    checked = {}
    for key, api in sorted(apis.items()):
        flexible = [
            v
            for v in range(api.min_version, api.max_version + 1)
            if v not in api.without_kio and request_is_flexible(key, v)
        ]
        checked[key] = api._replace(first_flexible=min(flexible, default=1 << 15))
    return checked


APIS: Mapping[int, Api] = _table(
    {
        0: Api("Produce", 0, 9, handle_produce, without_kio=LEGACY_VERSIONS),
        1: Api("Fetch", 4, 12, handle_fetch),
        2: Api("ListOffsets", 1, 7, handle_list_offsets),
        3: Api("Metadata", 1, 12, handle_metadata),
        8: Api("OffsetCommit", 2, 8, handle_offset_commit),
        9: Api("OffsetFetch", 1, 8, handle_offset_fetch),
        10: Api("FindCoordinator", 0, 4, handle_find_coordinator),
        11: Api("JoinGroup", 0, 9, handle_join_group),
        12: Api("Heartbeat", 0, 4, handle_heartbeat),
        13: Api("LeaveGroup", 0, 5, handle_leave_group),
        14: Api("SyncGroup", 0, 5, handle_sync_group),
        15: Api("DescribeGroups", 0, 5, handle_describe_groups),
        16: Api("ListGroups", 0, 5, handle_list_groups),
        17: Api("SaslHandshake", 0, 1, handle_sasl_handshake),
        API_VERSIONS_KEY: Api("ApiVersions", 0, 3, _handle_api_versions),
        19: Api("CreateTopics", 2, 7, handle_create_topics),
        20: Api("DeleteTopics", 1, 6, handle_delete_topics),
        21: Api("DeleteRecords", 0, 2, handle_delete_records),
        22: Api("InitProducerId", 0, 4, handle_init_producer_id),
        23: Api("OffsetForLeaderEpoch", 2, 4, handle_offset_for_leader_epoch),
        32: Api("DescribeConfigs", 1, 4, handle_describe_configs),
        33: Api("AlterConfigs", 0, 2, handle_alter_configs),
        36: Api("SaslAuthenticate", 0, 2, handle_sasl_authenticate),
        37: Api("CreatePartitions", 0, 3, handle_create_partitions),
        42: Api("DeleteGroups", 0, 2, handle_delete_groups),
        44: Api("IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
        60: Api("DescribeCluster", 0, 2, handle_describe_cluster),
    }
)


def lookup(api_key: int, api_version: int) -> Api | None:
    """The API serving this key and version, or None when it is unsupported."""
    api = APIS.get(api_key)
    if api is None or not api.min_version <= api_version <= api.max_version:
        return None
    return api


def api_versions_values(error_code: int) -> dict[str, object]:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": key, "min_version": api.min_version, "max_version": api.max_version}
            for key, api in APIS.items()
        ],
        "throttle_time": 0,
    }


def unsupported_version_answer(correlation_id: int) -> list[Buffer]:
    """ApiVersions of an unsupported version: a v0 answer with UNSUPPORTED_VERSION."""
    return write_response(
        API_VERSIONS_KEY, 0, correlation_id, api_versions_values(_UNSUPPORTED_VERSION)
    )
