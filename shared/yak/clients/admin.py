"""``AdminClient``: the typed async client of the coordinator's admin API (``/admin/v1``).

Every method sends one request and returns the response model of ``yak.api.admin``. An error
body ``{"code", "message", "details"}`` is raised as the typed error of that code
(``yak.errors.error_for_code``: ``TopicAlreadyExistsError``, ``InvalidConfigError`` ...); a
coordinator that cannot be reached raises ``NetworkError``, a timeout ``KafkaTimeoutError``.
Any coordinator will do: standbys forward admin requests to the active controller.

The ``*_user``, ``*_key``, ``*_acls`` and ``*_quota`` methods are the security writes a
rest-proxy sends on (``/admin/v1/security``; ``yak.api.security_admin``): each answer carries
the etcd revision of the write, for the proxy's read-your-writes wait.

Use as ``async with AdminClient(url) as admin``; one client may serve concurrent tasks.
``auth`` (an ``httpx.Auth``) adds a user's credential for a coordinator with security on.
``on_behalf_of`` (a principal, ``User:<name>``) is a service's way instead: a broker's Kafka
listener acts for a SASL principal with the cluster secret and ``Yak-On-Behalf-Of``, which the
coordinator accepts only with the secret (``yak.security.cluster_secret``).

Security: ``https://`` URLs are verified with ``tls`` (default: ``ClientTls.from_env()``), and
requests carry the cluster secret (default: ``load_cluster_secret()``) when one is configured,
as services calling each other do (``yak.security.cluster_secret``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
from pydantic import BaseModel

from yak.api.admin import (
    ADMIN_PREFIX,
    AlterConfigsRequest,
    BrokerForgotten,
    ClusterInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    DecommissionList,
    DecommissionStatus,
    ElectLeadersRequest,
    ElectLeadersResult,
    GroupDescription,
    GroupList,
    PartitionHealthList,
    PartitionInfo,
    ReassignmentList,
    ReassignmentRequest,
    TopicDeleted,
    TopicDescription,
    TopicList,
    TopicPartitionRef,
)
from yak.api.security import (
    AclBody,
    AclList,
    CreateApiKeyRequest,
    CreateUserRequest,
    PasswordRequest,
    QuotaBody,
)
from yak.api.security_admin import AclsWritten, KeyWritten, SecurityWritten, UserWritten
from yak.api.share_groups import (
    AlterShareGroupRequest,
    CreateShareGroupRequest,
    ShareGroupDeleted,
    ShareGroupDescription,
    ShareGroupList,
)
from yak.clients._http import error_from_response, segment
from yak.clients.tls import ClientTls, default_context
from yak.closing import AsyncClosing
from yak.errors import KafkaTimeoutError, NetworkError
from yak.observability.request_id import propagate_request_id
from yak.security.acl import AclBinding, AclFilter
from yak.security.cluster_secret import (
    CLUSTER_SECRET_HEADER,
    ON_BEHALF_OF_HEADER,
    load_cluster_secret,
)

__all__ = ["AdminClient"]

_M = TypeVar("_M", bound=BaseModel)


class AdminClient(AsyncClosing):
    """Talks to one coordinator at ``base_url`` (e.g. ``http://127.0.0.1:9410``)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        auth: httpx.Auth | None = None,
        tls: ClientTls | None = None,
        cluster_secret: str | None = None,
        on_behalf_of: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        tls = tls if tls is not None else ClientTls.from_env()
        secret = cluster_secret if cluster_secret is not None else load_cluster_secret()
        headers = {CLUSTER_SECRET_HEADER: secret} if secret else {}
        if on_behalf_of is not None:
            headers[ON_BEHALF_OF_HEADER] = on_behalf_of
        self._http = httpx.AsyncClient(
            base_url=f"{self.base_url}{ADMIN_PREFIX}",
            timeout=timeout_s,
            transport=transport,
            auth=auth,
            headers=headers,
            verify=tls.ssl_context() if tls.configured else default_context(),
            event_hooks={"request": [propagate_request_id]},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def cluster(self) -> ClusterInfo:
        return await self._call("GET", "/cluster", ClusterInfo)

    async def reassign_partition(
        self, topic: str, partition: int, replicas: Sequence[int]
    ) -> PartitionInfo:
        """Start moving a partition to ``replicas`` (see the coordinator's TopicAdmin)."""
        body = ReassignmentRequest(replicas=list(replicas))
        path = f"/topics/{segment(topic)}/partitions/{partition}/reassignment"
        return await self._call("PUT", path, PartitionInfo, body)

    async def cancel_reassignment(self, topic: str, partition: int) -> PartitionInfo:
        path = f"/topics/{segment(topic)}/partitions/{partition}/reassignment"
        return await self._call("DELETE", path, PartitionInfo)

    async def reassignments(self) -> ReassignmentList:
        return await self._call("GET", "/reassignments", ReassignmentList)

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> ElectLeadersResult:
        """Move leadership to the preferred replica of ``partitions`` (None: every one)."""
        refs = (
            None
            if partitions is None
            else [TopicPartitionRef(topic=t, partition=p) for t, p in partitions]
        )
        return await self._call(
            "POST", "/elect-leaders", ElectLeadersResult, ElectLeadersRequest(partitions=refs)
        )

    async def decommission_broker(self, broker_id: int) -> DecommissionStatus:
        """Start draining ``broker_id`` (idempotent); its progress so far."""
        path = f"/brokers/{broker_id}/decommission"
        return await self._call("PUT", path, DecommissionStatus)

    async def recommission_broker(self, broker_id: int) -> DecommissionStatus:
        """Stop draining ``broker_id`` (idempotent)."""
        path = f"/brokers/{broker_id}/decommission"
        return await self._call("DELETE", path, DecommissionStatus)

    async def forget_broker(self, broker_id: int) -> BrokerForgotten:
        """Delete the record of a broker that is gone for good (``BrokerStillRegisteredError``
        while it runs, ``BrokerHasReplicasError`` while partitions list it,
        ``BrokerIdNotRegisteredError`` for an id the cluster does not know)."""
        return await self._call("DELETE", f"/brokers/{broker_id}", BrokerForgotten)

    async def decommissions(self) -> DecommissionList:
        """Every broker being drained, with its progress."""
        return await self._call("GET", "/decommissions", DecommissionList)

    async def partitions(self, state: str = "unhealthy") -> PartitionHealthList:
        """Partitions by health: offline, under-replicated, under-min-isr, unhealthy, all."""
        return await self._call("GET", f"/partitions?state={state}", PartitionHealthList)

    async def list_topics(self) -> TopicList:
        return await self._call("GET", "/topics", TopicList)

    async def describe_topic(self, name: str) -> TopicDescription:
        return await self._call("GET", f"/topics/{segment(name)}", TopicDescription)

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        body = CreateTopicRequest(
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            configs=dict(configs or {}),
        )
        return await self._call("POST", "/topics", TopicDescription, body)

    async def delete_topic(self, name: str) -> TopicDeleted:
        return await self._call("DELETE", f"/topics/{segment(name)}", TopicDeleted)

    async def alter_topic_configs(
        self,
        name: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
    ) -> TopicDescription:
        body = AlterConfigsRequest(set=dict(set_configs or {}), delete=list(delete_configs))
        return await self._call("PATCH", f"/topics/{segment(name)}/configs", TopicDescription, body)

    async def create_partitions(self, name: str, count: int) -> TopicDescription:
        body = CreatePartitionsRequest(count=count)
        return await self._call(
            "POST", f"/topics/{segment(name)}/partitions", TopicDescription, body
        )

    async def list_groups(self) -> GroupList:
        """Every consumer group with its state and member count."""
        return await self._call("GET", "/groups", GroupList)

    async def describe_group(self, group_id: str) -> GroupDescription:
        """A group's state, epochs and members (``GroupIdNotFoundError`` if none exists)."""
        return await self._call("GET", f"/groups/{segment(group_id)}", GroupDescription)

    # -- share groups (``yak.api.share_groups``) ----------------------------------------------

    async def list_share_groups(self) -> ShareGroupList:
        return await self._call("GET", "/share-groups", ShareGroupList)

    async def describe_share_group(self, name: str) -> ShareGroupDescription:
        """A share group's settings (``GroupIdNotFoundError`` if none exists)."""
        return await self._call("GET", f"/share-groups/{segment(name)}", ShareGroupDescription)

    async def create_share_group(self, body: CreateShareGroupRequest) -> ShareGroupDescription:
        """Create a share group (``DuplicateResourceError`` if the name is taken)."""
        return await self._call("POST", "/share-groups", ShareGroupDescription, body)

    async def alter_share_group(
        self, name: str, body: AlterShareGroupRequest
    ) -> ShareGroupDescription:
        """Change the settings present in ``body``; the others stay."""
        path = f"/share-groups/{segment(name)}"
        return await self._call("PATCH", path, ShareGroupDescription, body, exclude_unset=True)

    async def delete_share_group(self, name: str) -> ShareGroupDeleted:
        return await self._call("DELETE", f"/share-groups/{segment(name)}", ShareGroupDeleted)

    # -- security writes (a proxy's admin API sends them here) ---------------------------

    async def create_user(
        self, name: str, *, password: str | None = None, api_key: bool = True
    ) -> UserWritten:
        """Create a user (``DuplicateResourceError`` if it exists), with a first key if asked."""
        body = CreateUserRequest(name=name, password=password, api_key=api_key)
        return await self._call("POST", "/security/users", UserWritten, body)

    async def delete_user(self, name: str) -> SecurityWritten:
        return await self._call("DELETE", f"/security/users/{segment(name)}", SecurityWritten)

    async def add_key(self, user: str, description: str = "") -> KeyWritten:
        """A new API key for ``user``: its token is in this answer only."""
        body = CreateApiKeyRequest(description=description)
        return await self._call("POST", f"/security/users/{segment(user)}/keys", KeyWritten, body)

    async def revoke_key(self, user: str, key_id: str) -> SecurityWritten:
        path = f"/security/users/{segment(user)}/keys/{segment(key_id)}"
        return await self._call("DELETE", path, SecurityWritten)

    async def set_password(self, user: str, password: str | None) -> SecurityWritten:
        """Set (None: remove) the user's HTTP Basic password."""
        path = f"/security/users/{segment(user)}/password"
        return await self._call("PUT", path, SecurityWritten, PasswordRequest(password=password))

    async def add_acls(self, acls: Sequence[AclBinding]) -> AclsWritten:
        body = AclList(acls=[AclBody.of(acl) for acl in acls])
        return await self._call("POST", "/security/acls", AclsWritten, body)

    async def remove_acls(self, selected: AclFilter) -> AclsWritten:
        """Remove every binding ``selected`` matches (an empty filter: all); list them."""
        fields = {
            "principal": selected.principal,
            "resource_type": selected.resource_type,
            "resource_name": selected.resource_name,
            "pattern_type": selected.pattern_type,
            "operation": selected.operation,
            "permission": selected.permission,
        }
        query = urlencode({k: str(v) for k, v in fields.items() if v is not None})
        path = f"/security/acls?{query}" if query else "/security/acls"
        return await self._call("DELETE", path, AclsWritten)

    async def set_quota(
        self, principal: str, produce_bytes_per_s: int | None, fetch_bytes_per_s: int | None
    ) -> SecurityWritten:
        body = QuotaBody(
            produce_bytes_per_s=produce_bytes_per_s, fetch_bytes_per_s=fetch_bytes_per_s
        )
        path = f"/security/quotas/{segment(principal)}"
        return await self._call("PUT", path, SecurityWritten, body)

    async def delete_quota(self, principal: str) -> SecurityWritten:
        path = f"/security/quotas/{segment(principal)}"
        return await self._call("DELETE", path, SecurityWritten)

    async def _call(
        self,
        method: str,
        path: str,
        model: type[_M],
        body: BaseModel | None = None,
        *,
        exclude_unset: bool = False,
    ) -> _M:
        kwargs: dict[str, Any] = {}
        if body is not None:
            kwargs["json"] = body.model_dump(mode="json", exclude_unset=exclude_unset)
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise KafkaTimeoutError(f"{method} {self.base_url}{path} timed out") from exc
        except httpx.TransportError as exc:
            raise NetworkError(
                f"cannot reach the coordinator at {self.base_url}: {exc or type(exc).__name__}"
            ) from exc
        if response.is_error:
            raise error_from_response(response)
        return model.model_validate_json(response.content)
