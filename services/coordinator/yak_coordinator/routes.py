"""The admin API routes (``/admin/v1``): validate, call one ``TopicAdmin`` method, answer.

Bodies are the models of ``yak.api.admin``; errors are typed ``YakError``s turned into
``{"code", "message", "details"}`` by ``yak.web.errors``. Reaching the active controller from a
standby is the job of ``forwarding.ControllerForwarding``, not of these handlers.
"""

from __future__ import annotations

from fastapi import APIRouter, status

from yak.api.admin import (
    ADMIN_PREFIX,
    AlterConfigsRequest,
    BrokerForgotten,
    ClusterInfo,
    ControllerInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    DecommissionList,
    DecommissionStatus,
    ElectLeadersRequest,
    ElectLeadersResult,
    PartitionHealthList,
    PartitionInfo,
    PartitionReassignment,
    ReassignmentList,
    ReassignmentRequest,
    TopicDeleted,
    TopicDescription,
    TopicList,
    TopicSummary,
)
from yak.errors import InvalidRequestError
from yak.metadata.describe import broker_listing, partition_info
from yak.metadata.describe import topic_description as describe_topic
from yak.metadata.models import PartitionState
from yak.metadata.snapshot import ClusterSnapshot
from yak.security.acl import ResourceType
from yak_coordinator.decisions.partition_health import (
    HealthCounts,
    HealthFilter,
    health_counts,
    partition_health,
)
from yak_coordinator.forwarding import ADMIN_BODY_LIMIT
from yak_coordinator.security.guard import visible
from yak_coordinator.service import Coordinator
from yak_coordinator.topic_admin import TopicView

__all__ = ["admin_router", "cluster_info", "topic_description"]


def _partition(state: PartitionState) -> PartitionInfo:
    return partition_info(state)


def topic_description(view: TopicView) -> TopicDescription:
    """The wire form of a topic and its partitions."""
    return describe_topic(view.record, view.partitions)


def cluster_info(
    snapshot: ClusterSnapshot,
    cluster_id: str,
    coordinator_id: str,
    now_ms: int,
    counts: HealthCounts | None = None,
) -> ClusterInfo:
    """The wire form of the cluster overview (``counts``: ``health_counts(snapshot)``;
    ``now_ms``: the last-seen time of the registered brokers)."""
    controller = snapshot.controller
    health = counts if counts is not None else health_counts(snapshot)
    return ClusterInfo(
        cluster_id=cluster_id,
        coordinator_id=coordinator_id,
        controller=None
        if controller is None
        else ControllerInfo(
            coordinator_id=controller.coordinator_id, url=controller.url, epoch=controller.epoch
        ),
        brokers=broker_listing(snapshot, now_ms),
        topic_count=len(snapshot.topics),
        partition_count=len(snapshot.partitions),
        offline_partition_count=health.offline,
        under_replicated_partition_count=health.under_replicated,
        under_min_isr_partition_count=health.under_min_isr,
    )


def admin_router(coordinator: Coordinator) -> APIRouter:
    """The admin routes of one coordinator."""
    router = APIRouter(prefix=ADMIN_PREFIX, tags=["admin"], max_body_size=ADMIN_BODY_LIMIT)

    @router.get("/cluster")
    async def get_cluster() -> ClusterInfo:
        settings = coordinator.settings
        snapshot = coordinator.admin.snapshot
        counts = coordinator.health_counts(snapshot)
        now = coordinator.clock.time_ms()
        return cluster_info(snapshot, settings.cluster_id, settings.node_id, now, counts)

    @router.get("/partitions")
    async def list_partitions(state: HealthFilter = HealthFilter.UNHEALTHY) -> PartitionHealthList:
        """Partitions by health: ``offline``, ``under-replicated``, ``under-min-isr``,
        ``unhealthy`` (any of them; the default) or ``all``."""
        return PartitionHealthList(partitions=partition_health(coordinator.admin.snapshot, state))

    @router.get("/topics")
    async def list_topics() -> TopicList:
        """The topics (with security on: those the caller may DESCRIBE)."""
        records = coordinator.admin.list_topics()
        shown = visible(ResourceType.TOPIC, [r.name for r in records])
        return TopicList(
            topics=[
                TopicSummary(
                    name=r.name,
                    partitions=r.partitions,
                    replication_factor=r.replication_factor,
                    deleting=r.deleting,
                )
                for r in records
                if r.name in shown
            ]
        )

    @router.post("/topics", status_code=status.HTTP_201_CREATED)
    async def create_topic(body: CreateTopicRequest) -> TopicDescription:
        view = await coordinator.admin.create_topic(
            body.name, body.partitions, body.replication_factor, body.configs
        )
        return topic_description(view)

    @router.get("/topics/{name}")
    async def describe_topic(name: str) -> TopicDescription:
        return topic_description(coordinator.admin.describe_topic(name))

    @router.delete("/topics/{name}")
    async def delete_topic(name: str) -> TopicDeleted:
        deleted = await coordinator.admin.delete_topic(name)
        return TopicDeleted(name=name, deleted=deleted)

    @router.patch("/topics/{name}/configs")
    async def alter_configs(name: str, body: AlterConfigsRequest) -> TopicDescription:
        view = await coordinator.admin.alter_configs(name, body.set, body.delete)
        return topic_description(view)

    @router.post("/topics/{name}/partitions")
    async def create_partitions(name: str, body: CreatePartitionsRequest) -> TopicDescription:
        view = await coordinator.admin.create_partitions(name, body.count)
        return topic_description(view)

    @router.put("/topics/{name}/partitions/{partition}/reassignment")
    async def reassign(name: str, partition: int, body: ReassignmentRequest) -> PartitionInfo:
        """Move a partition to ``replicas`` (completes once the new replicas are in sync)."""
        state = await coordinator.admin.reassign_partition(name, partition, body.replicas)
        return _partition(state)

    @router.delete("/topics/{name}/partitions/{partition}/reassignment")
    async def cancel_reassignment(name: str, partition: int) -> PartitionInfo:
        """Cancel a running move: back to the original replicas (none running: unchanged)."""
        state = await coordinator.admin.reassign_partition(name, partition, None)
        return _partition(state)

    @router.get("/reassignments")
    async def list_reassignments() -> ReassignmentList:
        states = coordinator.admin.reassignments()
        return ReassignmentList(
            reassignments=[
                PartitionReassignment(topic=s.topic, **_partition(s).model_dump()) for s in states
            ]
        )

    @router.post("/elect-leaders")
    async def elect_leaders(body: ElectLeadersRequest) -> ElectLeadersResult:
        """Move leadership to the preferred replica (Kafka's ElectLeaders, PREFERRED) of the
        partitions listed, or of every partition when none is."""
        wanted = (
            None if body.partitions is None else [(p.topic, p.partition) for p in body.partitions]
        )
        return ElectLeadersResult(results=await coordinator.cluster_admin.elect_leaders(wanted))

    @router.put("/brokers/{broker_id}/decommission")
    async def decommission(broker_id: int) -> DecommissionStatus:
        """Drain a broker: leadership and replicas move to the other brokers."""
        return await coordinator.cluster_admin.decommission(_broker_id(broker_id))

    @router.delete("/brokers/{broker_id}/decommission")
    async def recommission(broker_id: int) -> DecommissionStatus:
        """Stop draining a broker (what moved stays where it is)."""
        return await coordinator.cluster_admin.recommission(_broker_id(broker_id))

    @router.delete("/brokers/{broker_id}")
    async def forget_broker(broker_id: int) -> BrokerForgotten:
        """Forget a broker that is gone for good (Kafka's UnregisterBroker): its record and
        any decommission mark are deleted. 409 ``BROKER_STILL_REGISTERED`` while it runs,
        409 ``BROKER_HAS_REPLICAS`` while partitions list it, 404
        ``BROKER_ID_NOT_REGISTERED`` for an id the cluster has no record of."""
        return await coordinator.cluster_admin.forget_broker(_broker_id(broker_id))

    @router.get("/decommissions")
    async def list_decommissions() -> DecommissionList:
        return DecommissionList(brokers=coordinator.cluster_admin.decommissions())

    return router


def _broker_id(broker_id: int) -> int:
    if broker_id < 0:
        raise InvalidRequestError(f"a broker id is >= 0, got {broker_id}")
    return broker_id
