import httpx
from fastapi import APIRouter, FastAPI

from yak.errors import AuthenticationError, UnknownTopicOrPartitionError
from yak_rest_proxy.api.v3.v3_route import V3Route


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
