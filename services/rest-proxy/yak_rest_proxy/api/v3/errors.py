"""Typed errors to Confluent v3 answers: ``{"error_code": <int>, "message": "..."}``.

Confluent's v3 API answers most errors with the plain HTTP status as ``error_code`` (400, 404,
413, 422, 500) and keeps a few Kafka codes from its exception mapper: 40403 for an unknown
topic (Kafka's ``UnknownTopicOrPartitionException``), 40402 for a partition the topic lacks,
40002 for Kafka's bad requests (topic exists, invalid replication factor, invalid config,
policy), 40101 / 40301 for authentication and authorization, 42901 for a quota, 50003 for a
retriable Kafka error and 50002 for any other. ``v3_error`` is that table;
``v3_route.V3Route`` applies it to every route of a router (so the app-wide handlers, which
speak v2 outside ``/api/``, never see a v3 error), and the records route uses it for each
record's report.

A resource the admin routes look up and do not find (a topic, partition, broker, group or
consumer named in the path) is ``ResourceMissingError``: 404 with ``error_code`` 404, as
Confluent's ``NotFoundException``. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from yak.errors import InvalidRequestError, YakError

__all__ = ["ResourceMissingError", "UnsupportedFormatError", "v3_error", "v3_error_body"]


class ResourceMissingError(YakError):
    """A v3 resource named in the path does not exist (Confluent: 404 / 404)."""

    code = "NOT_FOUND"
    http_status = 404


class UnsupportedFormatError(YakError):
    """A schema-registry embedded format (AVRO, JSONSCHEMA, PROTOBUF), not served yet."""

    code = "UNSUPPORTED_FORMAT"
    http_status = 422


_BY_CODE: dict[str, tuple[int, int]] = {
    "UNKNOWN_TOPIC_OR_PARTITION": (404, 40403),
    "NOT_FOUND": (404, 404),
    "GROUP_ID_NOT_FOUND": (404, 404),
    "TOPIC_ALREADY_EXISTS": (400, 40002),
    "INVALID_TOPIC_EXCEPTION": (400, 40002),
    "INVALID_PARTITIONS": (400, 40002),
    "INVALID_REPLICATION_FACTOR": (400, 40002),
    "INVALID_REPLICA_ASSIGNMENT": (400, 40002),
    "INVALID_CONFIG": (400, 40002),
    "POLICY_VIOLATION": (400, 40002),
    "INVALID_GROUP_ID": (400, 40002),
    "UNAUTHENTICATED": (401, 40101),
    "TOPIC_AUTHORIZATION_FAILED": (403, 40301),
    "GROUP_AUTHORIZATION_FAILED": (403, 40301),
    "CLUSTER_AUTHORIZATION_FAILED": (403, 40301),
    "AUTHORIZATION_FAILED": (403, 40301),
    "THROTTLING_QUOTA_EXCEEDED": (429, 42901),
    "AUTHENTICATION_THROTTLED": (429, 42901),
    "UNSUPPORTED_FORMAT": (422, 422),
    # The schema formats (``yak_rest_proxy.schemas.errors``).
    "SCHEMA_REGISTRY_NOT_CONFIGURED": (422, 422),
    "SCHEMA_REGISTRY_UNAVAILABLE": (408, 40801),
    "INVALID_SCHEMA": (422, 42205),
    "SCHEMA_MISSING": (422, 422),
    "RECORD_CONVERSION_FAILED": (400, 400),
}

#: ``InvalidRequestError`` by its ``kind``: malformed JSON and bad data are 400 (Confluent's
#: Jackson parse errors and "data=... is not a base64 string"); a wrong shape is 422.
_INVALID_REQUEST: dict[str, tuple[int, int]] = {
    "malformed_json": (400, 400),
    "invalid_data": (400, 400),
    "invalid_body": (422, 422),
    "empty_payload": (422, 42206),
}


def v3_error(error: YakError) -> tuple[int, int]:
    """(HTTP status, Confluent v3 ``error_code``) of a typed error."""
    if error.code == "UNKNOWN_TOPIC_OR_PARTITION" and "partition" in error.details:
        return 404, 40402  # Confluent's partitionNotFoundException
    found = _BY_CODE.get(error.code)
    if found is not None:
        return found
    if isinstance(error, InvalidRequestError):
        return _INVALID_REQUEST.get(str(error.details.get("kind")), (400, 400))
    if error.http_status < 500:
        return error.http_status, error.http_status
    return (500, 50003) if error.retriable else (500, 50002)


def v3_error_body(error: YakError) -> dict[str, Any]:
    """The ``{"error_code", "message"}`` body of ``error``."""
    return {"error_code": v3_error(error)[1], "message": error.message}
