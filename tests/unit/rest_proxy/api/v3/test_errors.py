import httpx
import pytest
from fastapi import APIRouter, FastAPI

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
    V3Route,
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


async def test_routes_answer_in_the_v3_dialect() -> None:
    router = APIRouter(route_class=V3Route)

    @router.get("/v3/missing")
    async def missing() -> None:
        raise UnknownTopicOrPartitionError("topic 'x' not found", topic="x")

    @router.get("/v3/typed/{number}")
    async def typed(number: int) -> dict[str, int]:
        return {"number": number}

    @router.get("/v3/auth")
    async def auth() -> None:
        raise AuthenticationError("no credential")

    app = FastAPI()
    app.include_router(router)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
        missing_answer = await client.get("/v3/missing")
        invalid = await client.get("/v3/typed/abc")
        valid = await client.get("/v3/typed/7")
        challenged = await client.get("/v3/auth")
    assert missing_answer.status_code == 404
    assert missing_answer.json() == {"error_code": 40403, "message": "topic 'x' not found"}
    assert invalid.status_code == 422
    assert invalid.json()["error_code"] == 422
    assert "number" in invalid.json()["message"]
    assert valid.json() == {"number": 7}
    assert challenged.status_code == 401
    assert challenged.json()["error_code"] == 40101
    assert "www-authenticate" in challenged.headers
