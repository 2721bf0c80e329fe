"""``AsyncClosing`` and ``Closing``: the block gets the client, leaving it closes the client.

Also pins that every client of ``yak.clients``, the SDK and Spark's ``YakHttp`` takes its
``with`` protocol from them, so no copy of the dunder methods grows back.
"""

from __future__ import annotations

import pytest

from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.closing import AsyncClosing, Closing
from yak.sdk import Admin, AsyncAdmin, AsyncConsumer, AsyncProducer, Consumer, Producer
from yak.sdk.reader import AsyncPartitionReader
from yak.spark.client import YakHttp


class _AsyncResource(AsyncClosing):
    def __init__(self) -> None:
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class _Resource(Closing):
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


async def test_async_with_yields_the_client_and_closes_it_once() -> None:
    resource = _AsyncResource()
    async with resource as entered:
        assert entered is resource
        assert resource.closed == 0
    assert resource.closed == 1


async def test_async_with_closes_on_an_error_and_lets_it_through() -> None:
    resource = _AsyncResource()
    with pytest.raises(LookupError):
        async with resource:
            raise LookupError("boom")
    assert resource.closed == 1


def test_with_yields_the_client_and_closes_it_on_the_way_out() -> None:
    resource = _Resource()
    with resource as entered:
        assert entered is resource
    assert resource.closed == 1
    with pytest.raises(LookupError), _Resource() as failing:
        raise LookupError("boom")
    assert failing.closed == 1


def test_a_client_without_its_close_cannot_be_made() -> None:
    class _NoClose(AsyncClosing):
        pass

    class _NoSyncClose(Closing):
        pass

    with pytest.raises(TypeError, match="aclose"):
        _NoClose()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="close"):
        _NoSyncClose()  # type: ignore[abstract]


@pytest.mark.parametrize(
    "client",
    [AdminClient, BrokerClient, AsyncAdmin, AsyncConsumer, AsyncProducer, AsyncPartitionReader],
)
def test_the_async_clients_use_async_closing(client: type[object]) -> None:
    assert issubclass(client, AsyncClosing)
    assert "__aexit__" not in vars(client)


@pytest.mark.parametrize("client", [Admin, Consumer, Producer, YakHttp])
def test_the_blocking_clients_use_closing(client: type[object]) -> None:
    assert issubclass(client, Closing)
    assert "__exit__" not in vars(client)
