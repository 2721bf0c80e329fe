"""DescribeCluster (api key 60, v0): the cluster id, the controller id and the brokers, as
Metadata answers them (``kafka.metadata``: live brokers with a Kafka listener, at their
advertised Kafka address; the controller id is the lowest of them). Kafka's admin clients
(``describeCluster``) ask it instead of Metadata when the broker lists it. Authorized
operations keep Kafka's "not asked" value. Single event loop.
"""

from __future__ import annotations

from yak.protocol.broker_wire import Buffer
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.metadata import kafka_brokers
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_describe_cluster"]

API_DESCRIBE_CLUSTER = 60


async def handle_describe_cluster(request: KafkaRequest) -> list[Buffer]:
    read_request(API_DESCRIBE_CLUSTER, request.api_version, request.body)
    snapshot = request.server.broker.snapshot()
    brokers = kafka_brokers(snapshot)
    values = {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "cluster_id": request.server.broker.settings.cluster_id,
        "controller_id": min(brokers, default=-1),
        "brokers": [
            {"broker_id": b, "host": host, "port": port, "rack": snapshot.brokers[b].rack}
            for b, (host, port) in brokers.items()
        ],
    }
    return write_response(API_DESCRIBE_CLUSTER, request.api_version, request.correlation_id, values)
