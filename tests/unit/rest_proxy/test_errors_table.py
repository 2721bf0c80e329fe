import pytest

from yak.errors import (
    ConsumerInstanceExistsError,
    FencedMemberEpochError,
    InvalidRequestError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotAcceptableError,
    UnknownMemberIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedMediaTypeError,
    YakError,
)
from yak_rest_proxy.http.errors import v2_error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (UnknownTopicOrPartitionError("t", topic="t"), (404, 40401)),
        (UnknownTopicOrPartitionError("p", topic="t", partition=3), (404, 40402)),
        (UnknownMemberIdError("gone"), (404, 40403)),
        (NotAcceptableError("no"), (406, 40601)),
        (ConsumerInstanceExistsError("dup"), (409, 40902)),
        (FencedMemberEpochError("fenced"), (409, 40903)),
        (MessageTooLargeError("big"), (413, 41301)),
        (UnsupportedMediaTypeError("type"), (415, 41501)),
        (InvalidRequestError("json", kind="malformed_json"), (400, 400)),
        (InvalidRequestError("b64", kind="invalid_data"), (422, 42205)),
        (InvalidRequestError("range", kind="config_constraint"), (400, 40001)),
        (InvalidRequestError("shape"), (422, 422)),
        (KafkaTimeoutError("slow"), (500, 50003)),
        (UnknownServerError("bug"), (500, 50002)),
    ],
)
def test_v2_codes(error: YakError, expected: tuple[int, int]) -> None:
    assert v2_error(error) == expected
