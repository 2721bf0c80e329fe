import httpx
from fastapi import FastAPI
from pydantic import BaseModel, Field

from yak.clients._http import segment
from yak.errors import NotLeaderOrFollowerError, TopicAlreadyExistsError
from yak.web.errors import install_error_handlers


class Body(BaseModel):
    partitions: int = Field(ge=1)


def make_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/topics")
    async def create(body: Body) -> dict[str, int]:
        raise TopicAlreadyExistsError("topic 'orders' already exists", topic="orders")

    @app.get("/leader")
    async def leader() -> None:
        raise NotLeaderOrFollowerError("not the leader", leader=2, leader_epoch=7)

    @app.get("/crash")
    async def crash() -> None:
        raise RuntimeError("secret internals")

    return app


async def test_typed_errors_map_to_status_code_and_body() -> None:
    transport = httpx.ASGITransport(app=make_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        exists = await client.post("/topics", json={"partitions": 3})
        invalid = await client.post("/topics", json={"partitions": 0})
        leader = await client.get("/leader")
        crash = await client.get("/crash")
    assert exists.status_code == 409
    assert exists.json() == {
        "code": "TOPIC_ALREADY_EXISTS",
        "message": "topic 'orders' already exists",
        "details": {"topic": "orders"},
    }
    assert invalid.status_code == 400
    assert invalid.json()["code"] == "INVALID_REQUEST"
    assert "partitions" in invalid.json()["message"]
    assert leader.status_code == 421
    assert leader.json()["details"] == {"leader": 2, "leader_epoch": 7}
    assert crash.status_code == 500
    assert crash.json()["code"] == "UNKNOWN_SERVER_ERROR"
    assert "secret" not in crash.text


async def test_unrouted_paths_answer_in_the_same_shape() -> None:
    transport = httpx.ASGITransport(app=make_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        missing = await client.get("/topics/a/b")
        wrong_method = await client.delete("/leader")
    assert missing.status_code == 404
    assert missing.json()["code"] == "NOT_FOUND"
    assert wrong_method.status_code == 405
    assert wrong_method.json()["code"] == "METHOD_NOT_ALLOWED"


def test_a_name_is_one_path_segment() -> None:
    assert segment("orders-1.v2_x") == "orders-1.v2_x"
    assert segment("../x") == "..%2Fx"
    assert segment("..") == "%2E%2E"
    assert segment(".") == "%2E"
    assert segment("a\x00b") == "a%00b"
    assert segment("User:alice") == "User%3Aalice"
    assert segment(3) == "3"
