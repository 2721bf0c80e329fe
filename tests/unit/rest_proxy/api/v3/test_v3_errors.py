import pytest

from yak.errors import (
    AuthenticationError,
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidRequestError,
    KafkaTimeoutError,
    MessageTooLargeError,
    ThrottlingQuotaExceededError,
    TopicAlreadyExistsError,
    TopicAuthorizationError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    YakError,
)
from yak_rest_proxy.api.v3.errors import (
    ResourceMissingError,
    UnsupportedFormatError,
    v3_error,
    v3_error_body,
)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (UnknownTopicOrPartitionError("t", topic="t"), (404, 40403)),
        (UnknownTopicOrPartitionError("p", topic="t", partition=3), (404, 40402)),
        (ResourceMissingError("no such topic"), (404, 404)),
        (GroupIdNotFoundError("g"), (404, 404)),
        (TopicAlreadyExistsError("dup"), (400, 40002)),
        (InvalidConfigError("bad"), (400, 40002)),
        (AuthenticationError("who"), (401, 40101)),
        (TopicAuthorizationError("no"), (403, 40301)),
        (ThrottlingQuotaExceededError("slow down"), (429, 42901)),
        (MessageTooLargeError("big"), (413, 413)),
        (UnsupportedFormatError("AVRO"), (422, 422)),
        (InvalidRequestError("json", kind="malformed_json"), (400, 400)),
        (InvalidRequestError("b64", kind="invalid_data"), (400, 400)),
        (InvalidRequestError("shape", kind="invalid_body"), (422, 422)),
        (InvalidRequestError("empty", kind="empty_payload"), (422, 42206)),
        (KafkaTimeoutError("slow"), (500, 50003)),
        (UnknownServerError("bug"), (500, 50002)),
    ],
)
def test_v3_codes(error: YakError, expected: tuple[int, int]) -> None:
    assert v3_error(error) == expected


def test_error_body() -> None:
    body = v3_error_body(UnknownTopicOrPartitionError("topic 'x' not found", topic="x"))
    assert body == {"error_code": 40403, "message": "topic 'x' not found"}
