"""What every route of the coordinator's admin API needs: ONE table from (method, path
template) to ACL checks, as the rest-proxy's ``route_acls`` does for the public API (the
machinery, ``Check`` and ``Source``, is ``yak.web.route_acls``).

Kafka's choices for the matching requests: CreateTopics is TOPIC CREATE (or CLUSTER CREATE),
DeleteTopics TOPIC DELETE, AlterConfigs TOPIC ALTER_CONFIGS, CreatePartitions TOPIC ALTER,
Metadata and DescribeGroups DESCRIBE, AlterPartitionReassignments and
ListPartitionReassignments CLUSTER ALTER / DESCRIBE, ElectLeaders CLUSTER ALTER, DescribeCluster
CLUSTER DESCRIBE, UnregisterBroker (``yak brokers forget``) CLUSTER ALTER; Yak's broker
decommission is CLUSTER ALTER (its status DESCRIBE). Share groups are GROUP resources:
DescribeShareGroups and ListGroups are DESCRIBE, DeleteShareGroups DELETE, and a group's
settings are group configs (IncrementalAlterConfigs on a GROUP: ALTER_CONFIGS), so creating one
with its settings and altering them are ALTER_CONFIGS. ``None``
marks the public routes (health). ``missing_routes(app)`` lists the routes the table does not
cover: the app refuses to start with security on while there are any, and a unit test keeps
the list empty. Every change the admin API makes is audited when allowed (``AUDITED``).
"""

from __future__ import annotations

from fastapi import FastAPI

from yak.api.admin import ADMIN_PREFIX
from yak.security.acl import Operation, ResourceType
from yak.web import route_acls
from yak.web.route_acls import Check, RouteKey, Source, app_routes

__all__ = ["AUDITED", "PATH_PARAMS", "ROUTE_ACLS", "app_routes", "missing_routes"]

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
O = Operation  # noqa: E741
_A = ADMIN_PREFIX
_TOPIC = {op: (Check(T, Source.PATH, op),) for op in O}
_CLUSTER_ALTER = (Check(C, Source.CLUSTER, O.ALTER),)
_SECURITY_WRITES = (
    ("POST", "/users"),
    ("DELETE", "/users/{user}"),
    ("POST", "/users/{user}/keys"),
    ("DELETE", "/users/{user}/keys/{key_id}"),
    ("PUT", "/users/{user}/password"),
    ("POST", "/acls"),
    ("DELETE", "/acls"),
    ("PUT", "/quotas/{principal}"),
    ("DELETE", "/quotas/{principal}"),
)

ROUTE_ACLS: dict[RouteKey, tuple[Check, ...] | None] = {
    ("GET", "/healthz"): None,
    ("GET", "/readyz"): None,
    ("GET", f"{_A}/cluster"): (Check(C, Source.CLUSTER, O.DESCRIBE),),
    ("GET", f"{_A}/partitions"): (Check(C, Source.CLUSTER, O.DESCRIBE),),
    ("GET", f"{_A}/topics"): (Check(T, Source.LISTED, O.DESCRIBE),),
    ("POST", f"{_A}/topics"): (Check(T, Source.BODY_NAME, O.CREATE),),
    ("GET", f"{_A}/topics/{{name}}"): _TOPIC[O.DESCRIBE],
    ("DELETE", f"{_A}/topics/{{name}}"): _TOPIC[O.DELETE],
    ("PATCH", f"{_A}/topics/{{name}}/configs"): _TOPIC[O.ALTER_CONFIGS],
    ("POST", f"{_A}/topics/{{name}}/partitions"): _TOPIC[O.ALTER],
    ("PUT", f"{_A}/topics/{{name}}/partitions/{{partition}}/reassignment"): (
        Check(C, Source.CLUSTER, O.ALTER),
    ),
    ("DELETE", f"{_A}/topics/{{name}}/partitions/{{partition}}/reassignment"): (
        Check(C, Source.CLUSTER, O.ALTER),
    ),
    ("GET", f"{_A}/reassignments"): (Check(C, Source.CLUSTER, O.DESCRIBE),),
    # Kafka's ElectLeaders is CLUSTER ALTER; decommission moves replicas like a reassignment.
    ("POST", f"{_A}/elect-leaders"): (Check(C, Source.CLUSTER, O.ALTER),),
    ("PUT", f"{_A}/brokers/{{broker_id}}/decommission"): (Check(C, Source.CLUSTER, O.ALTER),),
    ("DELETE", f"{_A}/brokers/{{broker_id}}/decommission"): (Check(C, Source.CLUSTER, O.ALTER),),
    ("GET", f"{_A}/decommissions"): (Check(C, Source.CLUSTER, O.DESCRIBE),),
    # Kafka's UnregisterBroker is CLUSTER ALTER.
    ("DELETE", f"{_A}/brokers/{{broker_id}}"): (Check(C, Source.CLUSTER, O.ALTER),),
    ("GET", f"{_A}/groups"): (Check(G, Source.LISTED, O.DESCRIBE),),
    ("GET", f"{_A}/groups/{{group_id}}"): (Check(G, Source.PATH, O.DESCRIBE),),
    ("GET", f"{_A}/share-groups"): (Check(G, Source.LISTED, O.DESCRIBE),),
    ("POST", f"{_A}/share-groups"): (Check(G, Source.BODY_NAME, O.ALTER_CONFIGS),),
    ("GET", f"{_A}/share-groups/{{group_id}}"): (Check(G, Source.PATH, O.DESCRIBE),),
    ("PATCH", f"{_A}/share-groups/{{group_id}}"): (Check(G, Source.PATH, O.ALTER_CONFIGS),),
    ("DELETE", f"{_A}/share-groups/{{group_id}}"): (Check(G, Source.PATH, O.DELETE),),
    # The security writes a rest-proxy sends on (``admin_routes``): CLUSTER ALTER, as on the
    # proxy (Kafka: CreateAcls, DeleteAcls, AlterUserScramCredentials, AlterClientQuotas).
    **{(method, f"{_A}/security{path}"): _CLUSTER_ALTER for method, path in _SECURITY_WRITES},
}


#: Allowed requests written to the audit log: every change the admin API makes.
AUDITED = frozenset(key for key in ROUTE_ACLS if key[0] in ("POST", "PUT", "PATCH", "DELETE"))
#: The path parameter naming each resource type (``Source.PATH``).
PATH_PARAMS = {ResourceType.TOPIC: "name", ResourceType.GROUP: "group_id"}


def missing_routes(app: FastAPI) -> list[RouteKey]:
    """The app's routes without an entry in ``ROUTE_ACLS`` (must be none)."""
    return route_acls.missing_routes(app, ROUTE_ACLS)
