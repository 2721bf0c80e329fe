"""A raw Kafka connection for the listener's tests: requests written with kio (Kafka's own
schemas, independent of the broker's code paths), responses read with kio, frames by hand."""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from yak_broker.kafka.listener import KafkaListener
from yak_broker.server.broker import Broker

__all__ = ["KafkaTestConnection", "kafka_port", "request_frame"]


def kafka_port(broker: Broker) -> int:
    listener = broker.kafka_listener
    assert isinstance(listener, KafkaListener)
    return listener.port


def _bytes(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def request_frame(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A whole request frame: kio's header (v2 for flexible versions, else v1) and body."""
    try:
        flexible = load_request_schema(api_key, version).__flexible__
    except KioIndexError:  # below kio's range (Produce v0-v2): never flexible
        flexible = False
    header_type = RequestHeaderV2 if flexible else RequestHeaderV1
    header = header_type(
        request_api_key=api_key,  # type: ignore[arg-type]
        request_api_version=version,  # type: ignore[arg-type]
        correlation_id=correlation_id,  # type: ignore[arg-type]
        client_id="test",
    )
    payload = _bytes(header) + (body if isinstance(body, bytes) else _bytes(body))
    return struct.pack(">i", len(payload)) + payload


class KafkaTestConnection:
    """One TCP connection to a Kafka listener."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._next = 0

    @classmethod
    async def open(cls, port: int) -> KafkaTestConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    def send(self, api_key: int, version: int, body: Any) -> int:
        """Write a request without waiting; its correlation id."""
        self._next += 1
        self.writer.write(request_frame(api_key, version, self._next, body))
        return self._next

    async def read_frame(self, timeout_s: float = 5) -> bytes:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout_s))
        return await asyncio.wait_for(self.reader.readexactly(size[0]), timeout_s)

    async def receive(self, api_key: int, version: int, timeout_s: float = 5) -> tuple[int, Any]:
        """The next response frame: its correlation id and kio's parsed body."""
        data = await self.read_frame(timeout_s)
        schema = load_response_schema(api_key, version)
        (correlation_id,) = struct.unpack_from(">i", data)
        start = 5 if schema.__flexible__ and api_key != 18 else 4
        body, size = entity_reader(schema)(data, start)
        assert start + size == len(data)
        return correlation_id, body

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        correlation_id = self.send(api_key, version, body)
        answered, parsed = await self.receive(api_key, version)
        assert answered == correlation_id
        return parsed

    async def closed_by_peer(self, timeout_s: float = 5) -> bool:
        """Whether the broker closes the connection (EOF) within ``timeout_s``."""
        try:
            data = await asyncio.wait_for(self.reader.read(), timeout_s)
        except ConnectionResetError:
            return True
        return data == b""
