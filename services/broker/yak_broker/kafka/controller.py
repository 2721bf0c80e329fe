"""The Kafka admin APIs' way to the controller: the coordinator's admin API, never etcd.

Kafka's admin requests (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs
...) go "through the controller": in Yak that is the active coordinator, reached over the same
admin API the ``yak`` CLI and the REST admin use (``yak.clients.admin.AdminClient``), so one
validation and one etcd transaction serve every door. A broker never writes a topic record.

``ControllerAdmin`` is the part of ``AdminClient`` the handlers call (a test hands a fake one
to ``KafkaServer.open_admin``). ``controller_admin`` opens one for the controller the broker's
metadata names, for the length of one request: admin requests are rare, so no connection pool
outlives them and nothing needs closing when the listener stops. With no active controller the
call raises ``NotControllerError`` (Kafka's ``NOT_CONTROLLER``: clients refresh metadata and
retry). The client acts for the connection's principal (the SASL user, ``User:ANONYMOUS``
without SASL): the cluster secret and ``Yak-On-Behalf-Of``, so a coordinator with security on
checks the same ACLs again for that principal and audits it as a REST call (docs/security.md;
SCRAM never reveals a password a broker could forward). The coordinator's refusal of the
broker itself (401: no or another cluster secret) is answered ``CLUSTER_AUTHORIZATION_FAILED``
naming the cause; its ACL denials keep their own codes. ``require`` checks the connection's
principal against the ACLs as
Kafka's admin requests do (``kafka.authorize``; a denial is audited and raised as Kafka's
``TOPIC_``/``CLUSTER_AUTHORIZATION_FAILED``), ``made`` audits a change that passed.
``failure`` is an admin answer's error fields for a typed error; ``await_metadata``
waits until this broker's own metadata shows a change (Kafka's controller answers once the
change is in the brokers' metadata). Single event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from yak.errors import (
    AuthenticationError,
    ClusterAuthorizationError,
    NotControllerError,
    TopicAuthorizationError,
    YakError,
)
from yak.metadata.snapshot import ClusterSnapshot
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import audit_allowed, authorize
from yak_broker.kafka.controller_admin import ControllerAdmin, OpenAdmin

if TYPE_CHECKING:
    from yak_broker.kafka.context import KafkaRequest
    from yak_broker.server.broker import Broker

__all__ = [
    "ControllerAdmin",
    "OpenAdmin",
    "await_metadata",
    "controller_admin",
    "failure",
    "made",
    "require",
]


@asynccontextmanager
async def controller_admin(
    request: KafkaRequest, snapshot: ClusterSnapshot | None = None
) -> AsyncIterator[ControllerAdmin]:
    """A client of the active controller named by ``snapshot`` (default: the broker's
    metadata now), acting for the request's principal; closed on exit."""
    server = request.server
    controller = (snapshot or server.broker.snapshot()).controller
    if controller is None:
        raise NotControllerError("no coordinator is the active controller right now")
    admin = server.open_admin(controller.url, on_behalf_of=request.principal)
    try:
        yield admin
    except AuthenticationError as exc:
        # The coordinator refused the broker, not the client's login (which succeeded here):
        # a cluster secret missing or different on one side, as the message says.
        raise ClusterAuthorizationError(
            "the coordinator refused this broker's service credential (the cluster secret, "
            f"YAK_CLUSTER_SECRET[_FILE], must be the same on both): {exc.message}"
        ) from exc
    finally:
        await admin.aclose()


def failure(exc: YakError) -> dict[str, object]:
    """A per-resource answer's error fields for ``exc`` (Kafka's number and the message)."""
    return {"error_code": exc.kafka_code, "error_message": exc.message}


async def await_metadata(
    broker: Broker, predicate: Callable[[ClusterSnapshot], bool], timeout_ms: int
) -> bool:
    """Wait (at most ``timeout_ms``) until this broker's metadata satisfies ``predicate``, so a
    client's next request to this broker sees what the controller just did; whether it does."""
    if predicate(broker.snapshot()):
        return True
    if timeout_ms <= 0:
        return False
    try:
        await broker.wait_for_metadata(predicate, timeout_ms / 1000)
    except TimeoutError:
        return False
    return True


def require(
    request: KafkaRequest, operation: Operation, resource_type: ResourceType, name: str
) -> None:
    """Raise Kafka's ``*_AUTHORIZATION_FAILED`` unless the principal may (denials audited)."""
    if authorize(request, operation, resource_type, name):
        return
    error = (
        ClusterAuthorizationError
        if resource_type is ResourceType.CLUSTER
        else TopicAuthorizationError
    )
    raise error(f"{request.principal} may not {operation} {resource_type}:{name}")


def made(
    request: KafkaRequest, operation: Operation, resource_type: ResourceType, name: str
) -> None:
    """Audit an administrative change that passed its checks."""
    audit_allowed(request, [f"{resource_type}:{name}"], operation)
