"""The share-group pages ("Queues"): ``/queues`` (every share group with its settings and
what its partitions' leaders hold now) and ``/queues/{group}`` (the totals — in flight,
available, acquired, acknowledged, dead-lettered, lag, oldest unacked record's age — one row
per share-partition and the counters per topic).

Share groups are not in the sampler's picture: a share group's live state is asked of every
broker by the rest-proxy (``GET /api/v1/share-groups/{group}``), which costs one request per
broker, so the pages ask it when they are looked at rather than every sample for every
group. The list shows each group's settings from one ``GET /share-groups``; its figures come
from the group's own page. Both stay live without polling of their own: on each ``yak:metrics``
event (the sampler's beat) the live part asks again with the digest of what it shows
(``?since=``), answered ``204`` while nothing changed. A group deleted while its page is open
says so in place.

Counters (acknowledged, dead-lettered) count since the brokers started, as ``/metrics`` does.
"""

from __future__ import annotations

import hashlib

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from yak.api.share_groups import ShareGroupDescription
from yak.errors import GroupIdNotFoundError
from yak_console.pages.common import Pages

__all__ = ["digest", "router"]


def digest(text: str) -> str:
    """What a live part shows, hashed for its ``?since=`` (8 bytes of blake2b)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _live_digest(group: ShareGroupDescription) -> str:
    return digest(group.model_dump_json())


def router(pages: Pages) -> APIRouter:
    routes = APIRouter()

    @routes.get("/queues", response_class=HTMLResponse, include_in_schema=False)
    async def queues(request: Request, since: str | None = None) -> Response:
        listed = (await pages.api(request).admin.list_share_groups()).share_groups
        groups = sorted(listed, key=lambda g: g.name)
        shown = digest("\0".join(g.model_dump_json() for g in groups))
        if since is not None:
            if since == shown:
                return Response(status_code=204)
            return pages.render(request, "_queues_table.html", groups=groups, digest=shown)
        return pages.render(
            request, "queues.html", nav="queues", title="Queues", groups=groups, digest=shown
        )

    @routes.get("/queues/{group}", response_class=HTMLResponse, include_in_schema=False)
    async def queue(request: Request, group: str, since: str | None = None) -> Response:
        admin = pages.api(request).admin
        if since is None:
            found = await admin.describe_share_group(group)
            return pages.render(
                request,
                "queue.html",
                nav="queues",
                title=f"Queue {group}",
                group=found,
                digest=_live_digest(found),
            )
        try:
            found = await admin.describe_share_group(group)
        except GroupIdNotFoundError:  # deleted while the page was open: say so in place
            return pages.render(request, "_queue_gone.html", name=group)
        shown = _live_digest(found)
        if since == shown:
            return Response(status_code=204)
        return pages.render(request, "_queue_live.html", group=found, digest=shown)

    return routes
