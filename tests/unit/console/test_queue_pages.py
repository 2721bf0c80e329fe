"""The queue pages in process (the console app over a mock public API): the list of share
groups, a group's page with its totals, share-partitions (loaded or not) and counters, the
live part answering 204 while nothing changed and saying so when the group is gone."""

from __future__ import annotations

from typing import Any

import httpx

from yak_console.app import create_app
from yak_console.settings import ConsoleSettings

GROUP: dict[str, Any] = {
    "name": "workers",
    "created_at_ms": 1,
    "dead_letter_topic": "jobs-dlq",
    "max_delivery_attempts": 5,
    "lock_duration_ms": 30000,
    "offset_reset": "earliest",
}
LIVE: dict[str, Any] = {
    "totals": {"in_flight": 4, "available": 1, "acquired": 3, "acknowledged": 17, "lag": 4},
    "partitions": [
        {
            "topic": "jobs",
            "partition": 0,
            "leader_id": 2,
            "leader_epoch": 0,
            "loaded": True,
            "high_watermark": 21,
            "start_offset": 17,
            "scan_offset": 21,
            "in_flight": 4,
            "available": 1,
            "acquired": 3,
            "lag": 4,
            "acquired_by_member": {"m-1": 3},
            "delivery_counts": {"1": 3, "2": 1},
        },
        {
            "topic": "jobs",
            "partition": 1,
            "leader_id": 3,
            "leader_epoch": 0,
            "loaded": False,
            "high_watermark": 0,
        },
    ],
    "topics": [{"topic": "jobs", "acquired": 20, "accepted": 17}],
}


class Api:
    """The public API's share-group answers; ``live`` changes what a describe says."""

    def __init__(self) -> None:
        self.live: dict[str, Any] | None = LIVE
        self.gone = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/share-groups":
            return httpx.Response(200, json={"share_groups": [GROUP]})
        if path == "/api/v1/share-groups/workers" and not self.gone:
            return httpx.Response(200, json={**GROUP, "live": self.live})
        body = {"code": "GROUP_ID_NOT_FOUND", "message": "no such share group", "details": {}}
        return httpx.Response(404, json=body)


def _client(api: Api) -> httpx.AsyncClient:
    app = create_app(ConsoleSettings(), transport=httpx.MockTransport(api))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console")


async def test_the_list_links_each_share_group() -> None:
    async with _client(Api()) as console:
        page = await console.get("/queues")
    assert page.status_code == 200
    assert 'href="/queues/workers"' in page.text
    assert "jobs-dlq" in page.text
    assert 'aria-current="page">Queues' in page.text


async def test_a_group_page_shows_its_figures() -> None:
    async with _client(Api()) as console:
        page = await console.get("/queues/workers")
    assert page.status_code == 200
    text = page.text
    assert 'data-testid="queue-acquired">3<' in text
    assert 'data-testid="queue-acknowledged" title="Accepted since the brokers started">17<' in text
    assert 'data-testid="partition-acquired">3<' in text
    assert "not loaded" in text
    assert "m-1" in text
    assert "2\u00d7: 1" in text  # delivered twice: one record


async def test_the_live_part_is_204_until_something_changes_then_gone() -> None:
    api = Api()
    async with _client(api) as console:
        first = await console.get("/queues/workers")
        since = first.text.split("/queues/workers?since=", 1)[1].split('"', 1)[0]
        same = await console.get("/queues/workers", params={"since": since})
        assert same.status_code == 204
        api.live = {**LIVE, "totals": {**LIVE["totals"], "acquired": 0, "acknowledged": 20}}
        moved = await console.get("/queues/workers", params={"since": since})
        assert moved.status_code == 200
        assert 'data-testid="queue-acquired">0<' in moved.text
        assert "<html" not in moved.text
        api.gone = True
        gone = await console.get("/queues/workers", params={"since": since})
        assert 'data-testid="queue-gone"' in gone.text
        missing = await console.get("/queues/nobody")
        assert missing.status_code == 404
