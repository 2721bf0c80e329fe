"""FindCoordinator (api key 10, v0-v4): the broker that coordinates a group.

A group key (key type 0) is answered by the rendezvous hash over the live brokers that
advertise a Kafka listener (``kafka/groups/rendezvous.py``; docs/decisions.md, "Kafka classic
groups"): every broker gives the same answer from its metadata cache, with no write. With no
such broker the answer is COORDINATOR_NOT_AVAILABLE (retriable). Transaction keys (key type 1)
get COORDINATOR_NOT_AVAILABLE with a message: Yak does not support transactions. v4 batches
keys; v0-v3 ask one (v0 has no key type: a group). A group key needs DESCRIBE on the group
(``kafka.authorize``; else GROUP_AUTHORIZATION_FAILED), as Kafka's.
"""

from __future__ import annotations

from typing import Any

from yak.protocol.broker_wire import Buffer
from yak.protocol.kafka_errors import GroupErrorCode
from yak.security.acl import Operation, ResourceType
from yak_broker.kafka.authorize import authorize
from yak_broker.kafka.context import KafkaRequest
from yak_broker.kafka.metadata import kafka_endpoint
from yak_broker.kafka.schemas import read_request, write_response

__all__ = ["handle_find_coordinator"]

API_FIND_COORDINATOR = 10
_GROUP_KEY = 0
_NO_TRANSACTIONS = "Yak does not support Kafka transactions"
_NO_BROKER = "no live broker has a Kafka listener"


def _answer(request: KafkaRequest, key: str, key_type: int) -> dict[str, Any]:
    refusal: dict[str, Any] = {
        "key": key,
        "error_code": GroupErrorCode.COORDINATOR_NOT_AVAILABLE,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    if key_type != _GROUP_KEY:
        return {**refusal, "error_message": _NO_TRANSACTIONS}
    if not authorize(request, Operation.DESCRIBE, ResourceType.GROUP, key):
        return {**refusal, "error_code": GroupErrorCode.GROUP_AUTHORIZATION_FAILED}
    registration = request.server.groups.coordinator_of(key)
    endpoint = None if registration is None else kafka_endpoint(registration)
    if registration is None or endpoint is None:
        return {**refusal, "error_message": _NO_BROKER}
    host, port = endpoint
    return {
        "key": key,
        "error_code": GroupErrorCode.NONE,
        "error_message": None,
        "node_id": registration.broker_id,
        "host": host,
        "port": port,
    }


async def handle_find_coordinator(request: KafkaRequest) -> list[Buffer]:
    parsed = read_request(API_FIND_COORDINATOR, request.api_version, request.body)
    key_type = int(getattr(parsed, "key_type", _GROUP_KEY))
    keys = getattr(parsed, "coordinator_keys", None)
    values: dict[str, Any] = {"throttle_time": 0}
    if keys is not None:
        values["coordinators"] = [_answer(request, str(key), key_type) for key in keys]
    else:
        values.update(_answer(request, str(parsed.key), key_type))
    return write_response(API_FIND_COORDINATOR, request.api_version, request.correlation_id, values)
