"""The admin handlers' test bench: an in-process broker (``BrokerHarness``), an active
controller record in its metadata, and ``FakeController`` standing in for the coordinator's
admin API — it records each call and makes the change as the coordinator's reconciler would
(topic and partition keys in the in-memory store), or raises the error a test gives it.

``AdminBench.call`` sends one kio-encoded request straight to a handler and parses the
answer with kio (Kafka's own schemas), so the handlers are checked against an independent
codec without a socket."""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tests.unit.broker.broker_harness import BrokerHarness
from yak.api.admin import TopicDeleted, TopicDescription
from yak.errors import YakError
from yak.metadata.describe import topic_description
from yak.metadata.models import ControllerRecord, TopicRecord
from yak.metadata.producer_ids import ProducerIds
from yak.security.acl import AclBinding
from yak.security.authorizer import Authorizer
from yak_broker.kafka.context import Handler, KafkaRequest, KafkaServer
from yak_broker.kafka.controller import ControllerAdmin
from yak_broker.kafka.sasl import SaslSession

__all__ = ["AdminBench", "FakeController", "encode", "make", "with_controller"]

CONTROLLER_URL = "http://127.0.0.1:9410"


def make(entity: Any, **fields: Any) -> Any:
    """A kio entity from plain values (kio's phantom int types are plain ints at run time)."""
    return entity(**fields)


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


async def with_controller(harness: BrokerHarness) -> None:
    """Record an active controller (the coordinator the admin APIs reach) in the metadata."""
    record = ControllerRecord(
        coordinator_id="c0", host="127.0.0.1", port=9410, epoch=1, elected_at_ms=0
    )
    revision = await harness.store.put(harness.keyspace.controller, record.encode())
    await harness.sync(revision)


@dataclass
class FakeController:
    """The coordinator's admin API, as far as the Kafka admin APIs use it."""

    harness: BrokerHarness
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    #: (URL, principal acted for) of every client opened.
    opened: list[tuple[str, str | None]] = field(default_factory=list)
    closed: int = 0
    #: Raised by the next write instead of making it (the coordinator's refusal).
    refuse: YakError | None = None
    default_replication_factor: int = 1

    def open(self, url: str, /, *, on_behalf_of: str | None = None) -> ControllerAdmin:
        self.opened.append((url, on_behalf_of))
        return self

    def _check(self) -> None:
        refusal, self.refuse = self.refuse, None
        if refusal is not None:
            raise refusal

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicDescription:
        self.calls.append(("create", name, partitions, replication_factor, dict(configs or {})))
        self._check()
        factor = replication_factor or self.default_replication_factor
        replicas = tuple(range(factor))
        await self.harness.create_topic(
            name, partitions, replicas=replicas, configs=dict(configs or {})
        )
        return self._described(name)

    async def delete_topic(self, name: str) -> TopicDeleted:
        self.calls.append(("delete", name))
        self._check()
        store, keyspace = self.harness.store, self.harness.keyspace
        record = self._record(name)
        for p in range(record.partitions):
            await store.delete(keyspace.partition(name, p))
        await store.delete(keyspace.topic(name))
        broker = self.harness.broker
        await broker.wait_for_metadata(lambda s: name not in s.topics, 5)
        await broker.replicas.apply(broker.snapshot())
        return TopicDeleted(name=name, deleted=True)

    async def create_partitions(self, name: str, count: int) -> TopicDescription:
        self.calls.append(("partitions", name, count))
        self._check()
        record = self._record(name)
        grown = record.model_copy(update={"partitions": count})
        await self.harness.store.put(self.harness.keyspace.topic(name), grown.encode())
        for p in range(record.partitions, count):
            await self.harness.set_partition(name, p)
        return self._described(name)

    async def alter_topic_configs(
        self,
        name: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
    ) -> TopicDescription:
        self.calls.append(("alter", name, dict(set_configs or {}), list(delete_configs)))
        self._check()
        record = self._record(name)
        configs = {k: v for k, v in record.configs.items() if k not in delete_configs}
        configs.update(set_configs or {})
        changed = record.model_copy(update={"configs": configs})
        revision = await self.harness.store.put(self.harness.keyspace.topic(name), changed.encode())
        await self.harness.sync(revision)
        return self._described(name)

    async def aclose(self) -> None:
        self.closed += 1

    def _record(self, name: str) -> TopicRecord:
        return self.harness.broker.snapshot().topics[name]

    def _described(self, name: str) -> TopicDescription:
        snapshot = self.harness.broker.snapshot()
        return topic_description(snapshot.topics[name], snapshot.partitions_of(name))


@dataclass
class AdminBench:
    harness: BrokerHarness
    controller: FakeController
    server: KafkaServer
    #: The connection's authentication (None: a listener without SASL; every check passes).
    session: SaslSession | None = None

    def secure(self, principal: str, *acls: AclBinding) -> None:
        """From now on, requests come from ``principal`` on a SASL listener with ``acls``."""
        security: Any = SimpleNamespace(cache=SimpleNamespace(authorizer=Authorizer(acls)))
        self.server = dataclasses.replace(self.server, security=security)
        self.session = SaslSession(security, "127.0.0.1:1")
        self.session.principal = principal

    @classmethod
    async def open(cls, harness: BrokerHarness) -> AdminBench:
        await with_controller(harness)
        controller = FakeController(harness)
        broker = harness.broker
        ids = ProducerIds(lambda: broker.metadata_store, broker.keyspace)
        return cls(harness, controller, KafkaServer(broker, ids, open_admin=controller.open))

    async def call(self, handler: Handler, api_key: int, version: int, body: Any) -> Any:
        """Send ``body`` (a kio request entity of ``version``) to ``handler``; kio's parse of
        the answer."""
        assert type(body) is load_request_schema(api_key, version)
        raw = memoryview(encode(body))
        request = KafkaRequest(self.server, api_key, version, 7, "test", raw, self.session)
        answer = await handler(request)
        assert answer is not None
        frame = b"".join(bytes(part) for part in answer)
        (size, correlation_id) = struct.unpack_from(">ii", frame)
        assert (size, correlation_id) == (len(frame) - 4, 7)
        schema = load_response_schema(api_key, version)
        start = 9 if schema.__flexible__ else 8
        parsed, used = entity_reader(schema)(frame, start)
        assert start + used == len(frame)
        return parsed
