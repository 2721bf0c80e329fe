"""A broker's live state of one share group: ``GET /v1/share-groups/{group}`` on the broker's
JSON endpoints (``yak.api.share_groups.ShareGroupLeaderState``), asked by the rest-proxy of
every broker for ``GET /api/v1/share-groups/{group}``.

A function over ``BrokerClient`` rather than a method of it: it rides the client's HTTP
plumbing (cluster secret, TLS, request ids, typed errors), and the broker client's module
stays the data plane's. Errors as ``BrokerClient`` raises them: ``GroupIdNotFoundError`` for a
group the broker does not know, ``NetworkError``/``KafkaTimeoutError`` for an unreachable one.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from yak.api.share_groups import ShareGroupLeaderState
from yak.clients._http import error_from_response, segment
from yak.clients.broker import BrokerClient

__all__ = ["share_group_state"]


async def share_group_state(
    broker: BrokerClient, group: str, topics: Sequence[str] = ()
) -> ShareGroupLeaderState:
    """``group``'s share-partitions led by ``broker`` (and its led partitions of ``topics``,
    reported not loaded) and its counters there."""
    params = httpx.QueryParams([("topic", t) for t in topics]) if topics else None
    response = await broker._send("GET", f"/v1/share-groups/{segment(group)}", params=params)
    if response.is_error:
        raise error_from_response(response)
    return ShareGroupLeaderState.model_validate_json(response.content)
