"""The floor of the back-to-back produce row (issue 34): what a request costs through processes
that do nothing, on this machine, so that ``proxy_b2b_acks1_p50_ms`` can be read against it.

Yak's back-to-back row (``loadtest.latency.back_to_back``) sends one 1 KiB record per request,
on one keep-alive connection, with no pause, through the rest-proxy to an RF 1 leader at
acks=1: the client, the proxy and the broker each wake in turn (four wake-ups a request).
This benchmark keeps the path and removes the work, with the same client and request bytes:

- **one hop**: the client → a raw ASGI app on uvicorn (httptools, uvloop: the proxy's server
  stack), which reads the body and answers a small JSON document at once;
- **two hops**: the same app, which first sends the body as one length-prefixed frame to a
  *do-nothing broker* (an ``asyncio.Protocol`` on uvloop, in a process of its own, answering
  an 8-byte frame per frame) over one persistent connection and waits for the answer — the
  proxy → leader hop of a produce, with no parsing, appending, replication or metrics.

Each row is measured ``--rounds`` times (``--warmup`` unmeasured requests, then ``--samples``
measured; exact percentiles) and reported with its median round. Nothing here is Yak's code:
the difference between Yak's row and the two-hop floor is the work Yak does per request
(docs/performance.md, "The back-to-back row against its floor"). Run with ``python -m
loadtest.bench_floor``; it writes ``loadtest/results/floor.json`` (``--out``) and stops every
process it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import orjson

from loadtest.latency.lean_http import LeanConnection, LeanPool
from loadtest.peers.drivers.base import make_payload
from loadtest.peers.drivers.yak_rest import produce_body
from yak.etcd_server import free_ports

__all__ = ["app", "measure", "serve_broker"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "loadtest" / "results" / "floor.json"
VALUE_BYTES = 1024
#: The proxy app's environment variable naming the do-nothing broker's port (unset: one hop).
BROKER_PORT_ENV = "YAK_FLOOR_BROKER_PORT"
_FRAME = struct.Struct(">ii")  # length, correlation id
_ANSWER = orjson.dumps({"results": [{"partition": 0, "offset": 1, "error": None}]})
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(_ANSWER)).encode()),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


# --- the do-nothing broker ------------------------------------------------------------------


class _Framed(asyncio.Protocol):
    """A connection with a receive buffer (both ends of the broker hop)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass


class _BrokerProtocol(_Framed):
    """Frames in (``length, correlation id, payload``), ``length 8, correlation id, 0`` out."""

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= _FRAME.size:
            length, correlation = _FRAME.unpack_from(buffer)
            if len(buffer) < 4 + length:
                return
            del buffer[: 4 + length]
            assert self._transport is not None
            self._transport.write(_FRAME.pack(8, correlation) + b"\0\0\0\0")


async def serve_broker(port: int) -> None:
    """Serve the do-nothing broker on 127.0.0.1:``port`` until cancelled."""
    server = await asyncio.get_running_loop().create_server(_BrokerProtocol, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


# --- the do-nothing proxy -------------------------------------------------------------------


class _BrokerLink(_Framed):
    """The proxy's one connection to the broker: a future per frame in flight."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._next = 0

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= 12:
            _, correlation = _FRAME.unpack_from(buffer)
            del buffer[:12]
            self._waiting.pop(correlation).set_result(None)

    async def call(self, body: bytes) -> None:
        self._next += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        assert self._transport is not None
        self._transport.writelines([_FRAME.pack(len(body) + 4, self._next), body])
        await future


_link: _BrokerLink | None = None


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The do-nothing proxy (an ASGI app; see the module docstring)."""
    global _link
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                port = os.environ.get(BROKER_PORT_ENV)
                if port:
                    loop = asyncio.get_running_loop()
                    _, _link = await loop.create_connection(_BrokerLink, "127.0.0.1", int(port))
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if _link is not None:
        await _link.call(body)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _ANSWER})


# --- measuring ------------------------------------------------------------------------------


async def measure(port: int, samples: int, warmup: int) -> list[float]:
    """Back-to-back requests to 127.0.0.1:``port``, as the b2b row sends them; ms, sorted."""
    pool = LeanPool(f"http://127.0.0.1:{port}")
    head = pool.head("POST", "/api/v1/topics/floor/records?acks=1", "application/json")
    body = produce_body([(None, make_payload(VALUE_BYTES, time.monotonic_ns()))])
    connection = await LeanConnection.open(pool.host, pool.port)
    measured: list[float] = []
    try:
        for index in range(warmup + samples):
            started = time.perf_counter_ns()
            status, _ = await connection.request(head, body)
            elapsed_ms = (time.perf_counter_ns() - started) / 1e6
            if status != 200:
                raise RuntimeError(f"the floor proxy answered {status}")
            if index >= warmup:
                measured.append(elapsed_ms)
    finally:
        connection.close()
    return sorted(measured)


def _percentile(ordered: list[float], share: float) -> float:
    return ordered[min(int(len(ordered) * share), len(ordered) - 1)]


async def _until_up(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)  # a process starting: nothing to wait on but its port
            continue
        writer.close()
        await writer.wait_closed()
        return


@contextmanager
def _processes(broker_port: int, one_hop: int, two_hops: int) -> Iterator[None]:
    python = sys.executable
    uvicorn = (python, "-m", "uvicorn", "loadtest.bench_floor:app", "--host", "127.0.0.1")
    server = ("--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argvs = [
        ((python, "-m", "loadtest.bench_floor", "--broker", str(broker_port)), env),
        ((*uvicorn, "--port", str(one_hop), *server, "warning"), env),
        (
            (*uvicorn, "--port", str(two_hops), *server, "warning"),
            {**env, BROKER_PORT_ENV: str(broker_port)},
        ),
    ]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for argv, environment in argvs:
            started.append(subprocess.Popen(argv, env=environment, cwd=ROOT))
            if argv[-2:] == ("--broker", str(broker_port)):
                asyncio.run(_until_up(broker_port))
        yield
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run(rounds: int, samples: int, warmup: int) -> dict[str, Any]:
    """Both rows, ``rounds`` times each, alternating; the figures as ``floor.json`` holds them."""
    broker_port, one_hop, two_hops = free_ports(3)
    rows: dict[str, list[dict[str, float]]] = {"one_hop": [], "two_hops": []}
    with _processes(broker_port, one_hop, two_hops):

        async def measure_all() -> None:
            await _until_up(one_hop)
            await _until_up(two_hops)
            for _ in range(rounds):
                for name, port in (("one_hop", one_hop), ("two_hops", two_hops)):
                    ordered = await measure(port, samples, warmup)
                    rows[name].append(
                        {
                            "p50_ms": round(_percentile(ordered, 0.5), 3),
                            "p99_ms": round(_percentile(ordered, 0.99), 3),
                        }
                    )

        asyncio.run(measure_all())
    result: dict[str, Any] = {
        "benchmark": "floor",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": os.getloadavg()[0],
        "samples": samples,
        "warmup": warmup,
        "rounds": rows,
    }
    for name, measured in rows.items():
        result[f"{name}_p50_ms"] = statistics.median(r["p50_ms"] for r in measured)
        result[f"{name}_p99_ms"] = statistics.median(r["p99_ms"] for r in measured)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="measurements of each row")
    parser.add_argument("--samples", type=int, default=3000, help="measured requests a round")
    parser.add_argument("--warmup", type=int, default=300, help="unmeasured requests a round")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON results")
    parser.add_argument("--broker", type=int, help=argparse.SUPPRESS)  # the broker process
    args = parser.parse_args(argv)
    if args.broker is not None:
        import uvloop

        uvloop.run(serve_broker(args.broker))
        return
    # A SIGTERM (a smoke test's timeout) unwinds like an error: the processes are stopped.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    if args.rounds < 1 or args.samples < 1 or args.warmup < 0:
        parser.error("--rounds and --samples must be at least 1, --warmup at least 0")
    result = run(args.rounds, args.samples, args.warmup)
    result["command"] = " ".join(["python -m loadtest.bench_floor", *(argv or sys.argv[1:])])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name in ("one_hop", "two_hops"):
        print(
            f"{name}: p50 {result[f'{name}_p50_ms']:.3f} ms, p99 {result[f'{name}_p99_ms']:.3f} ms"
        )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
