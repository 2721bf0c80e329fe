"""DescribeCluster (api key 60, v0-v2): the cluster id, the controller id and the brokers, as
Metadata answers them (``kafka.metadata``: live brokers with a Kafka listener, at their
advertised Kafka address; the controller id is the lowest of them). Kafka's admin clients
(``describeCluster``) ask it instead of Metadata when the broker lists it.

v1's ``endpoint_type``: brokers (1) are answered; controllers (2) are
``MISMATCHED_ENDPOINT_TYPE``, as a Kafka broker answers (Yak's controller speaks no Kafka),
any other value ``UNSUPPORTED_ENDPOINT_TYPE``. v2's fenced brokers: a registered broker is never
fenced (one that is not registered is not listed). Authorized operations keep Kafka's "not
asked" value. Single event loop.
"""

from __future__ import annotations

from typing import Any

from yak.protocol.broker_wire import Buffer
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.metadata import kafka_brokers
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_describe_cluster"]

API_DESCRIBE_CLUSTER = 60
BROKERS, CONTROLLERS = 1, 2
_MISMATCHED_ENDPOINT_TYPE = 114
_UNSUPPORTED_ENDPOINT_TYPE = 115


async def handle_describe_cluster(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_DESCRIBE_CLUSTER, request.api_version, request.body)
    endpoint_type = int(getattr(parsed, "endpoint_type", BROKERS))
    values: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": request.server.broker.settings.cluster_id,
        "controller_id": -1,
        "brokers": [],
    }
    if endpoint_type == CONTROLLERS:
        values.update(
            error_code=_MISMATCHED_ENDPOINT_TYPE,
            error_message="Yak's controller speaks no Kafka: ask for brokers",
        )
    elif endpoint_type != BROKERS:
        values.update(
            error_code=_UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"unknown endpoint type {endpoint_type}",
        )
    else:
        snapshot = request.server.broker.snapshot()
        brokers = kafka_brokers(snapshot)
        values["controller_id"] = min(brokers, default=-1)
        values["brokers"] = [
            {
                "broker_id": b,
                "host": host,
                "port": port,
                "rack": snapshot.brokers[b].rack,
                "is_fenced": False,
            }
            for b, (host, port) in brokers.items()
        ]
    return write_response(API_DESCRIBE_CLUSTER, request.api_version, request.correlation_id, values)
