"""``Allow`` on a 405 names every method of every route serving the path."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from yak.web.errors import install_error_handlers


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/things/{name}")
    async def get_thing(name: str) -> str:
        return name

    @app.delete("/things/{name}")
    async def delete_thing(name: str) -> str:
        return name

    @app.post("/things")
    async def create_thing() -> str:
        return "made"

    return app


def test_a_405_allows_the_methods_of_every_route_of_the_path() -> None:
    with TestClient(_app()) as client:
        answer = client.put("/things/a")

    assert answer.status_code == 405
    assert answer.json()["code"] == "METHOD_NOT_ALLOWED"
    assert answer.headers["allow"] == "DELETE, GET"


def test_a_405_on_another_path_allows_only_its_own_methods() -> None:
    with TestClient(_app()) as client:
        answer = client.options("/things")

    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
