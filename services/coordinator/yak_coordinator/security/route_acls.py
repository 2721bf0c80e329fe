"""What every route of the coordinator's admin API needs: ONE table from (method, path
template) to ACL checks, as the rest-proxy's ``route_acls`` does for the public API.

Kafka's choices for the matching requests: CreateTopics is TOPIC CREATE (or CLUSTER CREATE),
DeleteTopics TOPIC DELETE, AlterConfigs TOPIC ALTER_CONFIGS, CreatePartitions TOPIC ALTER,
Metadata and DescribeGroups DESCRIBE, AlterPartitionReassignments and
ListPartitionReassignments CLUSTER ALTER / DESCRIBE, ElectLeaders CLUSTER ALTER, DescribeCluster
CLUSTER DESCRIBE; Yak's broker decommission is CLUSTER ALTER (its status DESCRIBE). ``None``
marks the public routes (health). ``missing_routes(app)`` lists the routes the table does not
cover: the app refuses to start with security on while there are any, and a unit test keeps
the list empty.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from yak.api.admin import ADMIN_PREFIX
from yak.security.acl import Operation, ResourceType

__all__ = ["ROUTE_ACLS", "Check", "Source", "app_routes", "missing_routes"]


class Source(Enum):
    """Where a check finds the names of the resources it checks."""

    CLUSTER = "cluster"  # the one cluster resource
    PATH = "path"  # the path parameter ``name`` (a topic) or ``group_id``
    BODY_NAME = "body_name"  # the body's ``name`` (a topic to create)
    LISTED = "listed"  # a list answer keeps only the names the principal may DESCRIBE


class Check(NamedTuple):
    """One authorization a request must pass."""

    resource: ResourceType
    source: Source
    operation: Operation


T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
O = Operation  # noqa: E741
_A = ADMIN_PREFIX
_TOPIC = {op: (Check(T, Source.PATH, op),) for op in O}

ROUTE_ACLS: dict[tuple[str, str], tuple[Check, ...] | None] = {
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
    ("GET", f"{_A}/groups"): (Check(G, Source.LISTED, O.DESCRIBE),),
    ("GET", f"{_A}/groups/{{group_id}}"): (Check(G, Source.PATH, O.DESCRIBE),),
}


def app_routes(app: FastAPI) -> set[tuple[str, str]]:
    """(METHOD, path template) of every API route (not FastAPI's docs pages)."""
    found: set[tuple[str, str]] = set()
    for route in iter_route_contexts(app.routes):
        if not getattr(route.original_route, "include_in_schema", True):
            continue  # /openapi.json, the docs pages and /metrics: public, as on the rest-proxy
        path = route.path_format or route.path
        assert path is not None
        found.update((m, path) for m in route.methods or () if m != "HEAD")
    return found


def missing_routes(app: FastAPI) -> list[tuple[str, str]]:
    """The app's routes without an entry in ``ROUTE_ACLS`` (must be none)."""
    return sorted(app_routes(app) - ROUTE_ACLS.keys())
