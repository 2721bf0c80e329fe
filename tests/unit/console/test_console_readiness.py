"""The console's ``/readyz``: ready once the sampler reached the public API."""

from __future__ import annotations

import httpx

from yak_console.runtime import ConsoleRuntime
from yak_console.settings import ConsoleSettings


def _runtime(handler: httpx.MockTransport) -> ConsoleRuntime:
    return ConsoleRuntime(ConsoleSettings(sample_interval_ms=60_000), transport=handler)


async def test_not_ready_until_sampled_and_while_the_api_is_unreachable() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    runtime = _runtime(httpx.MockTransport(down))
    assert await runtime.readiness() == "the public API has not been sampled yet"
    await runtime.sampler.refresh()
    reason = await runtime.readiness()
    assert reason is not None
    assert "is unreachable" in reason
    await runtime.stop()


async def test_an_api_that_answers_even_with_a_refusal_is_ready() -> None:
    def refuses(request: httpx.Request) -> httpx.Response:
        body = {"code": "UNAUTHENTICATED", "message": "no credential", "details": {}}
        return httpx.Response(401, json=body)

    runtime = _runtime(httpx.MockTransport(refuses))
    await runtime.sampler.refresh()
    assert runtime.sampler.latest is not None
    assert runtime.sampler.latest.errors
    assert await runtime.readiness() is None
    await runtime.stop()
