"""``Schemas``: ids and inline schemas looked up once, misses shared, registry failures typed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from yak_rest_proxy.schemas import (
    InvalidSchemaError,
    RecordDeserializationError,
    RegistryClient,
    SchemaRegistryNotConfiguredError,
    SchemaRegistryUnavailableError,
    Schemas,
    SchemaType,
)
from yak_rest_proxy.schemas.wire import frame

AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
JSON = json.dumps({"type": "object"})


class FakeRegistry:
    """Confluent's API for three calls, counting them."""

    def __init__(self) -> None:
        self.schemas: dict[int, tuple[str, str]] = {1: ("AVRO", AVRO), 2: ("JSON", JSON)}
        self.calls: list[str] = []
        self.down = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            return httpx.Response(503, text="down")
        parts = request.url.path.strip("/").split("/")
        if parts[:2] == ["schemas", "ids"]:
            found = self.schemas.get(int(parts[2]))
            if found is None:
                return httpx.Response(
                    404, json={"error_code": 40403, "message": "Schema not found"}
                )
            return httpx.Response(200, json=self._body(*found))
        if parts[0] == "subjects" and request.method == "POST":
            body = json.loads(request.content)
            if body["schema"] == "bad":
                return httpx.Response(422, json={"error_code": 42201, "message": "Invalid schema"})
            schema_id = len(self.schemas) + 1
            self.schemas[schema_id] = (body.get("schemaType", "AVRO"), body["schema"])
            return httpx.Response(200, json={"id": schema_id})
        if parts[0] == "subjects":
            return httpx.Response(200, json={"id": 1, **self._body(*self.schemas[1])})
        return httpx.Response(404, json={"error_code": 404, "message": "no"})

    @staticmethod
    def _body(kind: str, text: str) -> dict[str, str]:
        return {"schema": text} if kind == "AVRO" else {"schema": text, "schemaType": kind}


def schemas_of(fake: FakeRegistry) -> Schemas:
    return Schemas(RegistryClient("http://registry", transport=httpx.MockTransport(fake)))


async def test_an_id_is_fetched_once() -> None:
    fake = FakeRegistry()
    schemas = schemas_of(fake)
    serde = await schemas.by_id(1, SchemaType.AVRO)
    assert await schemas.by_id(1) is serde
    assert schemas.cached(1) is serde
    assert fake.calls == ["GET /schemas/ids/1"]
    assert serde.encode({"a": 1}, "v") == frame(1, b"\x02")
    await schemas.aclose()


async def test_concurrent_misses_share_one_call() -> None:
    fake = FakeRegistry()
    fake.gate = asyncio.Event()
    schemas = schemas_of(fake)
    waiting = [asyncio.create_task(schemas.by_id(2)) for _ in range(5)]
    await asyncio.sleep(0)  # let every task reach the shared future
    fake.gate.set()
    found = await asyncio.gather(*waiting)
    assert all(serde is found[0] for serde in found)
    assert fake.calls == ["GET /schemas/ids/2"]
    await schemas.aclose()


async def test_an_inline_schema_is_registered_once_under_its_subject() -> None:
    fake = FakeRegistry()
    schemas = schemas_of(fake)
    assert schemas.cached_schema("t-value", SchemaType.JSON, JSON) is None
    serde = await schemas.by_schema("t-value", SchemaType.JSON, JSON)
    assert serde.schema_id == 3
    assert await schemas.by_schema("t-value", SchemaType.JSON, JSON) is serde
    assert schemas.cached_schema("t-value", SchemaType.JSON, JSON) is serde
    assert fake.calls == ["POST /subjects/t-value/versions"]
    assert fake.schemas[3] == ("JSON", JSON)
    await schemas.aclose()


async def test_latest_is_asked_every_time_and_a_version_once() -> None:
    fake = FakeRegistry()
    schemas = schemas_of(fake)
    await schemas.by_version("t-value", None)
    await schemas.by_version("t-value", None)
    await schemas.by_version("t-value", 1)
    await schemas.by_version("t-value", 1)
    assert fake.calls == ["GET /subjects/t-value/versions/latest"] * 2 + [
        "GET /subjects/t-value/versions/1"
    ]
    await schemas.aclose()


async def test_registry_failures_are_typed() -> None:
    fake = FakeRegistry()
    schemas = schemas_of(fake)
    with pytest.raises(InvalidSchemaError, match="Schema not found"):
        await schemas.by_id(99)
    with pytest.raises(InvalidSchemaError, match="Invalid schema"):
        await schemas.by_schema("t-value", SchemaType.AVRO, "bad")
    with pytest.raises(InvalidSchemaError, match="is a JSON schema, not AVRO"):
        await schemas.by_id(2, SchemaType.AVRO)
    fake.down = True
    with pytest.raises(SchemaRegistryUnavailableError, match="503"):
        await schemas.by_id(1)
    await schemas.aclose()


async def test_an_unreachable_registry_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    schemas = Schemas(RegistryClient("http://registry", transport=httpx.MockTransport(refuse)))
    with pytest.raises(SchemaRegistryUnavailableError, match="did not answer"):
        await schemas.by_id(1)
    await schemas.aclose()


async def test_without_a_registry_every_lookup_says_so() -> None:
    schemas = Schemas(None)
    assert not schemas.enabled
    with pytest.raises(SchemaRegistryNotConfiguredError, match="YAK_SCHEMA_REGISTRY_URL"):
        await schemas.by_id(1)
    with pytest.raises(SchemaRegistryNotConfiguredError):
        await schemas.by_schema("s", SchemaType.AVRO, AVRO)


async def test_decoding_loads_the_ids_it_meets() -> None:
    fake = FakeRegistry()
    schemas = schemas_of(fake)
    records = [frame(1, b"\x04"), None, b"not framed", frame(1, b"\x06")]
    await schemas.load(records)
    assert fake.calls == ["GET /schemas/ids/1"]
    assert schemas.decode_cached(frame(1, b"\x04"), SchemaType.AVRO) == {"a": 2}
    with pytest.raises(RecordDeserializationError, match="wire format"):
        schemas.decode_cached(b"not framed", SchemaType.AVRO)
    with pytest.raises(RecordDeserializationError, match="not a JSON schema"):
        schemas.decode_cached(frame(1, b"\x04"), SchemaType.JSON)
    with pytest.raises(RecordDeserializationError, match="cannot read"):
        schemas.decode_cached(frame(1, b"\x80"), SchemaType.AVRO)  # a cut varint
    with pytest.raises(RecordDeserializationError, match="not loaded"):
        schemas.decode_cached(frame(7, b""), SchemaType.AVRO)
    await schemas.aclose()
