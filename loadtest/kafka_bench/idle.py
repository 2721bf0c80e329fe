"""Idle one-record produce latency on a broker's Kafka listener: one request at a time on one
connection, back to back (``gap_s`` apart: 0 by default, the issue's "back-to-back requests";
``PACED_GAP_S`` for the paced reference row), ``warmup`` unmeasured then ``samples`` measured.

- ``bare_socket``: a blocking socket (``TCP_NODELAY``) speaking Produce v9 with
  ``yak.protocol.kafka_wire`` — the headline, because it measures the broker: every request is
  encoded before the clock starts (one RecordBatch v2 of one record, no producer id, reused),
  and a sample is ``sendall`` of the request until the last byte of its response is read
  (``perf_counter_ns``); each response is decoded after the clock stopped and must carry no
  error and a base offset one past the previous one.
- ``confluent``: confluent-kafka with ``linger.ms`` 0, not idempotent, ``produce`` + ``flush``
  per record — what a librdkafka user sees, including librdkafka's queue hand-offs between
  the caller's thread and its broker thread.

Both write to partition ``partition`` of ``topic`` at ``address`` (the partition leader's
Kafka listener, ``host:port``) with the given ``acks``. Blocking: run them in a thread.
"""

from __future__ import annotations

import socket
import time

from confluent_kafka import Producer as ConfluentProducer

from loadtest.peers.drivers.base import make_payload
from yak.protocol.broker_wire import ProducePartition, ProduceRequest, ProduceResult
from yak.protocol.kafka_wire import (
    decode_produce_response,
    decode_response_header,
    encode_produce_request,
)
from yak.record import RecordInput, encode_batch

__all__ = ["PACED_GAP_S", "RETRIABLE", "bare_socket", "confluent"]

#: The pause between requests of the paced row: the machine idles between them, so the row
#: adds the wake-up of idle cores and processes (on this VM, about half a millisecond).
PACED_GAP_S = 0.002
VALUE_BYTES = 1024
READY_TIMEOUT_S = 30.0
#: Partition errors of a partition whose leadership is still being set up.
RETRIABLE = frozenset({"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS"})
_SIZE = 4


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _exchange(sock: socket.socket, frame: bytes, correlation_id: int) -> tuple[int, ProduceResult]:
    """Send one request frame; the nanoseconds to its whole response, and its one result."""
    started = time.perf_counter_ns()
    sock.sendall(frame)
    size = int.from_bytes(_read_exactly(sock, _SIZE), "big")
    body = _read_exactly(sock, size)
    elapsed = time.perf_counter_ns() - started
    header, rest = decode_response_header(body, is_flexible=True)
    if header.error is not None or header.correlation_id != correlation_id:
        raise RuntimeError(f"request {correlation_id}: {header}")
    (result,) = decode_produce_response(rest)
    return elapsed, result


def bare_socket(
    address: str,
    topic: str,
    partition: int,
    acks: int,
    warmup: int,
    samples: int,
    gap_s: float = 0.0,
) -> list[float]:
    """The measured request times in seconds (see the module docstring). During the warm-up
    a retriable partition error (a new topic's leader not ready yet, ``RETRIABLE``) is waited
    out for at most ``READY_TIMEOUT_S``; any error after it fails the run."""
    host, port = address.rsplit(":", 1)
    batch = encode_batch([RecordInput(value=make_payload(VALUE_BYTES, time.monotonic_ns()))])
    request = ProduceRequest((ProducePartition(topic, partition, batch),), acks, 30_000)
    frames = [
        b"".join(encode_produce_request(request, i, "bench-kafka")) for i in range(warmup + samples)
    ]
    measured: list[float] = []
    last_offset: int | None = None
    deadline = time.monotonic() + READY_TIMEOUT_S
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        i = 0
        while i < len(frames):
            elapsed, result = _exchange(sock, frames[i], i)
            error = result.error
            if error is not None and i == 0 and error.code in RETRIABLE:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not ready after {READY_TIMEOUT_S} s: {error}")
                time.sleep(0.1)  # the leader's state is another process's: nothing to await
                frames[0] = b"".join(encode_produce_request(request, 0, "bench-kafka"))
                continue
            if error is not None:
                raise RuntimeError(f"request {i}: {error}")
            if last_offset is not None and result.base_offset != last_offset + 1:
                raise RuntimeError(f"request {i}: offset {result.base_offset} after {last_offset}")
            last_offset = result.base_offset
            if i >= warmup:
                measured.append(elapsed / 1e9)
            i += 1
            if gap_s:
                time.sleep(gap_s)  # pacing between requests, not waiting for anything
    return measured


def confluent(
    address: str,
    topic: str,
    partition: int,
    acks: int,
    warmup: int,
    samples: int,
    gap_s: float = 0.0,
) -> list[float]:
    """The measured ``produce`` + ``flush`` times in seconds (see the module docstring)."""
    producer = ConfluentProducer(
        {"bootstrap.servers": address, "acks": acks, "linger.ms": 0, "enable.idempotence": False}
    )
    value = make_payload(VALUE_BYTES, time.monotonic_ns())
    errors: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            errors.append(error)

    measured: list[float] = []
    for i in range(warmup + samples):
        started = time.perf_counter_ns()
        producer.produce(topic, value, partition=partition, on_delivery=delivered)
        left = producer.flush(30)
        elapsed = time.perf_counter_ns() - started
        if left or errors:
            raise RuntimeError(f"record {i}: {errors or f'{left} not delivered'}")
        if i >= warmup:
            measured.append(elapsed / 1e9)
        if gap_s:
            time.sleep(gap_s)  # pacing between records, not waiting for anything
    return measured
