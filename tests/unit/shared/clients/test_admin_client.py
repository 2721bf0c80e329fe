"""``AdminClient``'s credentials on the wire: the cluster secret, and the principal a service
acts for (``on_behalf_of``) only when asked."""

from __future__ import annotations

import httpx

from yak.clients.admin import AdminClient
from yak.security.cluster_secret import CLUSTER_SECRET_HEADER, ON_BEHALF_OF_HEADER

SECRET = "s3cret-of-the-cluster-0123456789"


async def _headers(on_behalf_of: str | None = None) -> httpx.Headers:
    seen: list[httpx.Request] = []

    def coordinator(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"topics": []})

    transport = httpx.MockTransport(coordinator)
    client = AdminClient(
        "http://c", transport=transport, cluster_secret=SECRET, on_behalf_of=on_behalf_of
    )
    async with client:
        await client.list_topics()
    (request,) = seen
    return request.headers


async def test_a_broker_sends_the_secret_and_the_principal_it_acts_for() -> None:
    headers = await _headers(on_behalf_of="User:alice")
    assert headers[CLUSTER_SECRET_HEADER] == SECRET
    assert headers[ON_BEHALF_OF_HEADER] == "User:alice"


async def test_without_on_behalf_of_no_principal_is_claimed() -> None:
    headers = await _headers()
    assert headers[CLUSTER_SECRET_HEADER] == SECRET
    assert ON_BEHALF_OF_HEADER not in headers
