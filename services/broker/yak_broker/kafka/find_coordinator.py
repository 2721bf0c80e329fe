"""FindCoordinator (api key 10, v0-v4): no group or transaction coordinator is served yet.

Every key gets ``COORDINATOR_NOT_AVAILABLE`` (retriable), so a client that only uses
``assign`` — or librdkafka, which asks FindCoordinator's presence in ApiVersions before it
compresses with lz4 — works, and a group member keeps retrying until the classic-group
increment (``kafka/groups``) answers with a broker. v4 batches keys; v0-v3 ask one.
"""

from __future__ import annotations

from typing import Any

from yak.protocol.broker_wire import Buffer
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_find_coordinator"]

API_FIND_COORDINATOR = 10
_COORDINATOR_NOT_AVAILABLE = 15
_MESSAGE = "Yak's Kafka listener has no group coordinator yet"


async def handle_find_coordinator(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_FIND_COORDINATOR, request.api_version, request.body)
    refusal: dict[str, Any] = {
        "error_code": _COORDINATOR_NOT_AVAILABLE,
        "error_message": _MESSAGE,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    keys = getattr(parsed, "coordinator_keys", None)
    values: dict[str, Any] = {"throttle_time": 0, **refusal}
    if keys is not None:
        values["coordinators"] = [{"key": key, **refusal} for key in keys]
    return write_response(API_FIND_COORDINATOR, request.api_version, request.correlation_id, values)
