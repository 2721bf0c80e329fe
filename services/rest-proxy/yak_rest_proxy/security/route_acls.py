"""What every route of the proxy needs: ONE table from (method, path template) to ACL checks.

Each entry lists the checks a request must pass; each check names a resource type, where the
resource's name comes from, and the operation (Kafka's choices for the matching Kafka request:
Produce is TOPIC WRITE, Fetch TOPIC READ, OffsetCommit GROUP READ + TOPIC READ, OffsetFetch
GROUP DESCRIBE + TOPIC DESCRIBE, CreateTopics TOPIC CREATE or CLUSTER CREATE, DescribeConfigs
and AlterConfigs, DescribeLogDirs CLUSTER DESCRIBE, CreateAcls CLUSTER ALTER ...). ``None``
marks the public routes; an empty tuple routes that only need a valid credential.

``missing_routes(app)`` lists the app's routes the table does not cover: the app refuses to
start with security on while there are any, and a unit test keeps the list empty, so a new
route cannot slip through unguarded. ``Check``, ``Source`` and the guard that enforces the table
are every service's (``yak.web.route_acls``, ``yak.web.route_guard``).
"""

from __future__ import annotations

from fastapi import FastAPI

from yak.security.acl import Operation, ResourceType
from yak.web import route_acls
from yak.web.route_acls import AUTHENTICATED, PUBLIC, Check, RouteKey, Source, app_routes

__all__ = ["AUDITED", "PATH_PARAMS", "ROUTE_ACLS", "app_routes", "missing_routes"]


T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
O = Operation  # noqa: E741

_CLUSTER_DESCRIBE = (Check(C, Source.CLUSTER, O.DESCRIBE),)
_CLUSTER_ALTER = (Check(C, Source.CLUSTER, O.ALTER),)
_TOPIC = {op: (Check(T, Source.PATH, op),) for op in O}
_GROUP_READ = (Check(G, Source.PATH, O.READ),)
_GROUP_READ_TOPICS = (*_GROUP_READ, Check(T, Source.BODY, O.READ))
_GROUP_FETCH = (*_GROUP_READ, Check(T, Source.FETCHED, O.READ))
_INSTANCE = "/consumers/{group}/instances/{instance}"
_MEMBER = "/api/v1/groups/{group}/members/{member}"
_SHARE = "/api/v1/share-groups/{group}"
_SECURITY = "/api/v1/security"
_SCHEDULED = "/api/v1/topics/{topic}/partitions/{partition}/scheduled"
_V3 = "/v3/clusters/{cluster_id}"
_V3_TOPIC = f"{_V3}/topics/{{topic}}"
_V3_GROUP = f"{_V3}/consumer-groups/{{group}}"
_GROUP_DESCRIBE = (Check(G, Source.PATH, O.DESCRIBE),)

#: (METHOD, path template) -> the checks (None: public).
ROUTE_ACLS: dict[RouteKey, tuple[Check, ...] | None] = {
    # Liveness and readiness answer load balancers and orchestrators, which hold no key.
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    # -- Confluent v2 ---------------------------------------------------------------------
    ("GET", "/"): AUTHENTICATED,
    ("POST", "/"): AUTHENTICATED,
    ("GET", "/brokers"): _CLUSTER_DESCRIBE,
    ("GET", "/topics"): (Check(T, Source.LISTED, O.DESCRIBE),),
    ("GET", "/topics/{topic}"): _TOPIC[O.DESCRIBE],
    ("GET", "/topics/{topic}/partitions"): _TOPIC[O.DESCRIBE],
    ("GET", "/topics/{topic}/partitions/{partition}"): _TOPIC[O.DESCRIBE],
    ("GET", "/topics/{topic}/partitions/{partition}/offsets"): _TOPIC[O.DESCRIBE],
    ("POST", "/topics/{topic}"): _TOPIC[O.WRITE],
    ("POST", "/topics/{topic}/partitions/{partition}"): _TOPIC[O.WRITE],
    ("POST", "/consumers/{group}"): _GROUP_READ,
    ("DELETE", _INSTANCE): _GROUP_READ,
    ("POST", f"{_INSTANCE}/subscription"): _GROUP_READ_TOPICS,
    ("GET", f"{_INSTANCE}/subscription"): _GROUP_READ,
    ("DELETE", f"{_INSTANCE}/subscription"): _GROUP_READ,
    ("POST", f"{_INSTANCE}/assignments"): _GROUP_READ_TOPICS,
    ("GET", f"{_INSTANCE}/assignments"): _GROUP_READ,
    ("POST", f"{_INSTANCE}/positions"): _GROUP_READ_TOPICS,
    ("POST", f"{_INSTANCE}/positions/beginning"): _GROUP_READ_TOPICS,
    ("POST", f"{_INSTANCE}/positions/end"): _GROUP_READ_TOPICS,
    ("GET", f"{_INSTANCE}/records"): _GROUP_FETCH,
    ("POST", f"{_INSTANCE}/offsets"): _GROUP_READ_TOPICS,
    ("GET", f"{_INSTANCE}/offsets"): (
        Check(G, Source.PATH, O.DESCRIBE),
        Check(T, Source.BODY, O.DESCRIBE),
    ),
    # -- native: records and producers ----------------------------------------------------
    ("POST", "/api/v1/topics/{topic}/records"): _TOPIC[O.WRITE],
    ("POST", "/api/v1/topics/{topic}/partitions/{partition}/batches"): _TOPIC[O.WRITE],
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/records"): _TOPIC[O.READ],
    # A producer id alone writes nothing; each batch it stamps is checked as a WRITE.
    ("POST", "/api/v1/producers"): AUTHENTICATED,
    # -- native: group members --------------------------------------------------------------
    ("POST", "/api/v1/groups/{group}/members"): _GROUP_READ_TOPICS,
    ("GET", _MEMBER): (Check(G, Source.PATH, O.DESCRIBE),),
    ("DELETE", _MEMBER): _GROUP_READ,
    ("GET", f"{_MEMBER}/records"): _GROUP_FETCH,
    ("GET", f"{_MEMBER}/stream"): _GROUP_FETCH,
    ("WEBSOCKET", f"{_MEMBER}/ws"): _GROUP_FETCH,
    ("POST", f"{_MEMBER}/commit"): _GROUP_READ_TOPICS,
    ("POST", f"{_MEMBER}/seek"): _GROUP_READ_TOPICS,
    # -- native: share-group records (a share group is a GROUP resource, as in Kafka; the
    # topics are checked as they are read or acknowledged) ----------------------------------
    ("POST", f"{_SHARE}/acquire"): _GROUP_FETCH,
    ("POST", f"{_SHARE}/acknowledgements"): _GROUP_FETCH,
    ("GET", f"{_SHARE}/stream"): _GROUP_FETCH,
    ("WEBSOCKET", f"{_SHARE}/ws"): _GROUP_FETCH,
    # -- native: admin ----------------------------------------------------------------------
    ("GET", "/api/v1/cluster"): _CLUSTER_DESCRIBE,
    ("GET", "/api/v1/brokers"): _CLUSTER_DESCRIBE,
    ("GET", "/api/v1/log-dirs"): _CLUSTER_DESCRIBE,
    ("GET", "/api/v1/log-dirs/topics"): _CLUSTER_DESCRIBE,
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/offsets"): _TOPIC[O.DESCRIBE],
    # Scheduled records: listing shows offsets and due times only (as offsets do); a cancel
    # appends to the partition (a control batch), as a produce writes.
    ("GET", _SCHEDULED): _TOPIC[O.DESCRIBE],
    ("DELETE", f"{_SCHEDULED}/{{offset}}"): _TOPIC[O.WRITE],
    ("GET", "/api/v1/topics"): (Check(T, Source.LISTED, O.DESCRIBE),),
    # CLUSTER CREATE also allows it (the guard's one special case, as in Kafka).
    ("POST", "/api/v1/topics"): (Check(T, Source.BODY_NAME, O.CREATE),),
    ("GET", "/api/v1/topics/{topic}"): _TOPIC[O.DESCRIBE],
    ("GET", "/api/v1/topic-descriptions"): (Check(T, Source.LISTED, O.DESCRIBE),),
    ("DELETE", "/api/v1/topics/{topic}"): _TOPIC[O.DELETE],
    ("PATCH", "/api/v1/topics/{topic}/configs"): _TOPIC[O.ALTER_CONFIGS],
    ("POST", "/api/v1/topics/{topic}/partitions"): _TOPIC[O.ALTER],
    ("GET", "/api/v1/groups"): (Check(G, Source.LISTED, O.DESCRIBE),),
    ("GET", "/api/v1/groups/{group}"): (Check(G, Source.PATH, O.DESCRIBE),),
    ("DELETE", "/api/v1/groups/{group}"): (Check(G, Source.PATH, O.DELETE),),
    ("POST", "/api/v1/groups/{group}/offsets/reset"): _GROUP_READ_TOPICS,
    # Share groups are GROUP resources (the coordinator's table says why these operations).
    ("GET", "/api/v1/share-groups"): (Check(G, Source.LISTED, O.DESCRIBE),),
    ("POST", "/api/v1/share-groups"): (Check(G, Source.BODY_NAME, O.ALTER_CONFIGS),),
    ("GET", "/api/v1/share-groups/{group}"): (Check(G, Source.PATH, O.DESCRIBE),),
    ("PATCH", "/api/v1/share-groups/{group}"): (Check(G, Source.PATH, O.ALTER_CONFIGS),),
    ("DELETE", "/api/v1/share-groups/{group}"): (Check(G, Source.PATH, O.DELETE),),
    # -- native: security admin (Kafka: DescribeAcls is CLUSTER DESCRIBE, the rest ALTER) ----
    ("GET", f"{_SECURITY}/whoami"): AUTHENTICATED,
    ("GET", f"{_SECURITY}/users"): _CLUSTER_DESCRIBE,
    ("POST", f"{_SECURITY}/users"): _CLUSTER_ALTER,
    ("DELETE", f"{_SECURITY}/users/{{user}}"): _CLUSTER_ALTER,
    ("POST", f"{_SECURITY}/users/{{user}}/keys"): _CLUSTER_ALTER,
    ("DELETE", f"{_SECURITY}/users/{{user}}/keys/{{key_id}}"): _CLUSTER_ALTER,
    ("PUT", f"{_SECURITY}/users/{{user}}/password"): _CLUSTER_ALTER,
    ("GET", f"{_SECURITY}/acls"): _CLUSTER_DESCRIBE,
    ("POST", f"{_SECURITY}/acls"): _CLUSTER_ALTER,
    ("DELETE", f"{_SECURITY}/acls"): _CLUSTER_ALTER,
    # Kafka: DescribeClientQuotas is CLUSTER DESCRIBE_CONFIGS, AlterClientQuotas CLUSTER
    # ALTER_CONFIGS; Yak keeps quotas with users and ACLs: DESCRIBE / ALTER.
    ("GET", f"{_SECURITY}/quotas"): _CLUSTER_DESCRIBE,
    ("GET", f"{_SECURITY}/quotas/{{principal}}"): _CLUSTER_DESCRIBE,
    ("PUT", f"{_SECURITY}/quotas/{{principal}}"): _CLUSTER_ALTER,
    ("DELETE", f"{_SECURITY}/quotas/{{principal}}"): _CLUSTER_ALTER,
    # -- Confluent v3 (api/v3): creating a topic needs CLUSTER CREATE (the name is in the body)
    ("GET", "/v3/clusters"): _CLUSTER_DESCRIBE,
    ("GET", _V3): _CLUSTER_DESCRIBE,
    ("GET", f"{_V3}/brokers"): _CLUSTER_DESCRIBE,
    ("GET", f"{_V3}/brokers/{{broker_id}}"): _CLUSTER_DESCRIBE,
    ("GET", f"{_V3}/topics"): (Check(T, Source.LISTED, O.DESCRIBE),),
    ("POST", f"{_V3}/topics"): (Check(C, Source.CLUSTER, O.CREATE),),
    ("GET", _V3_TOPIC): _TOPIC[O.DESCRIBE],
    ("DELETE", _V3_TOPIC): _TOPIC[O.DELETE],
    ("GET", f"{_V3_TOPIC}/partitions"): _TOPIC[O.DESCRIBE],
    ("GET", f"{_V3_TOPIC}/partitions/{{partition_id}}"): _TOPIC[O.DESCRIBE],
    ("GET", f"{_V3_TOPIC}/configs"): _TOPIC[O.DESCRIBE_CONFIGS],
    ("GET", f"{_V3_TOPIC}/configs/{{name}}"): _TOPIC[O.DESCRIBE_CONFIGS],
    ("PUT", f"{_V3_TOPIC}/configs/{{name}}"): _TOPIC[O.ALTER_CONFIGS],
    ("DELETE", f"{_V3_TOPIC}/configs/{{name}}"): _TOPIC[O.ALTER_CONFIGS],
    ("POST", f"{_V3_TOPIC}/configs:alter"): _TOPIC[O.ALTER_CONFIGS],
    ("POST", f"{_V3_TOPIC}/records"): _TOPIC[O.WRITE],
    ("GET", f"{_V3}/consumer-groups"): (Check(G, Source.LISTED, O.DESCRIBE),),
    ("GET", _V3_GROUP): _GROUP_DESCRIBE,
    ("GET", f"{_V3_GROUP}/consumers"): _GROUP_DESCRIBE,
    ("GET", f"{_V3_GROUP}/consumers/{{consumer_id}}"): _GROUP_DESCRIBE,
    ("GET", f"{_V3_GROUP}/lags"): _GROUP_DESCRIBE,
    ("GET", f"{_V3_GROUP}/lags/{{topic}}/partitions/{{partition_id}}"): _GROUP_DESCRIBE,
    ("GET", f"{_V3_GROUP}/lag-summary"): _GROUP_DESCRIBE,
}

#: Administrative changes: written to the audit log when allowed (denials always are).
AUDITED: frozenset[RouteKey] = frozenset(
    key
    for key in ROUTE_ACLS
    if key[0] in ("POST", "PUT", "PATCH", "DELETE")
    and key[1].startswith(
        ("/api/v1/topics", "/api/v1/groups/{group}", "/api/v1/share-groups", _SECURITY, _V3)
    )
    and not key[1].endswith(("/records", "/batches"))
    and "/members" not in key[1]
)

#: The path parameter naming each resource type (``Source.PATH``).
PATH_PARAMS = {ResourceType.TOPIC: "topic", ResourceType.GROUP: "group"}


def missing_routes(app: FastAPI) -> list[RouteKey]:
    """The app's routes that have no entry in ``ROUTE_ACLS`` (must be none)."""
    return route_acls.missing_routes(app, ROUTE_ACLS)
