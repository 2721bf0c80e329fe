"""ACL checks for the Kafka listener's handlers: the REST routes' ACLs, answered Kafka's way.

Every handler asks here before it acts, for the connection's principal
(``KafkaRequest.principal``) against the ACLs of the listener's ``KafkaSecurity`` (the same
``Authorizer`` the rest-proxy and the coordinator use: super-users, DENY wins, READ/WRITE/
DELETE/ALTER imply DESCRIBE ...). On a listener without SASL (``PLAINTEXT``/``SSL``, only
allowed with security off) every check passes, as every REST route does with security off.

- ``authorize(request, operation, resource_type, name)``: whether the principal may; a denial
  is audited (``denied``, as the REST guard audits it) — answer it with ``denied_code``.
- ``authorized(request, operation, resource_type, names)``: the names it may, each denial
  audited once — for per-topic/per-partition answers.
- ``visible(request, operation, resource_type, names)``: the names it may, without auditing
  — for listings that leave the others out (Metadata of all topics, ListGroups), as Kafka's.
- ``audit_allowed(request, resources)``: the audit line of an administrative change that
  passed its checks (CreateTopics, DeleteGroups ...), as the REST side writes for its admin
  routes.

Error codes (``denied_code``): TOPIC_AUTHORIZATION_FAILED 29, GROUP_AUTHORIZATION_FAILED 30,
CLUSTER_AUTHORIZATION_FAILED 31 — per topic or partition where the response has room, else
for the whole request. Pure reads of the current ACLs; single event loop.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.index import KioIndexError, load_request_schema

from yak.security.acl import Operation, ResourceType
from yak.security.audit import audit
from yak.security.authorizer import Authorizer
from yak_broker.kafka.context import KafkaRequest

__all__ = [
    "CLUSTER_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "TOPIC_AUTHORIZATION_FAILED",
    "audit_allowed",
    "authorize",
    "authorized",
    "denied_code",
    "visible",
]

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
_CODES = {
    ResourceType.TOPIC: TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: CLUSTER_AUTHORIZATION_FAILED,
}


def denied_code(resource_type: ResourceType) -> int:
    """Kafka's ``*_AUTHORIZATION_FAILED`` error code for a denial on ``resource_type``."""
    return _CODES[resource_type]


def _authorizer(request: KafkaRequest) -> Authorizer | None:
    security = request.server.security
    return None if security is None else security.cache.authorizer


def authorize(
    request: KafkaRequest, operation: Operation, resource_type: ResourceType, name: str
) -> bool:
    """Whether the request's principal may ``operation`` the resource (a denial is audited)."""
    authorizer = _authorizer(request)
    if authorizer is None:
        return True
    if authorizer.authorize(request.principal, resource_type, name, operation):
        return True
    _audit(request, "denied", f"{resource_type}:{name}", operation)
    return False


def authorized(
    request: KafkaRequest,
    operation: Operation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """The names among ``names`` the principal may ``operation`` (each denial audited once)."""
    if request.server.security is None:  # the hot path without SASL: no check to make
        return set(names)
    return {
        name for name in dict.fromkeys(names) if authorize(request, operation, resource_type, name)
    }


def visible(
    request: KafkaRequest,
    operation: Operation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> list[str]:
    """The names the principal may ``operation``, in order, without auditing (listings)."""
    authorizer = _authorizer(request)
    if authorizer is None:
        return list(names)
    return authorizer.filter(request.principal, resource_type, names, operation)


def audit_allowed(request: KafkaRequest, resources: Iterable[str], operation: str = "") -> None:
    """Audit an administrative change that passed its checks (``resources``: ``TYPE:name``)."""
    if request.server.security is not None:
        _audit(request, "allowed", ",".join(resources), operation)


def _audit(request: KafkaRequest, result: str, resource: str, operation: str) -> None:
    session = request.session
    audit(
        principal=request.principal,
        action=f"Kafka {_api_name(request)}",
        result=result,
        resource=resource,
        operation=operation,
        remote=session.peer if session is not None else "",
    )


def _api_name(request: KafkaRequest) -> str:
    try:
        name = load_request_schema(request.api_key, request.api_version).__name__
    except KioIndexError:  # a version kio has no schema of (Produce v0-v2)
        return f"api {request.api_key} v{request.api_version}"
    return f"{name.removesuffix('Request')} v{request.api_version}"
