"""The Avro encode path of a v2 produce request, in-process, against the JSON one (issue 33).

``make bench-schema`` measures the whole proxy; this measures the step where Avro and JSON
produce differ: a request body of the bench's 200 records (``loadtest.bench_schema.event``)
parsed (``parse_produce_request``, the same for both) and its values turned into record
bytes. Cases: the JSON format's ``from_embedded`` per value; the Avro format's
``encode_column`` (``AvroSerde.encode_many``); fastavro's writer with no validation at all
(the floor under any check on top of it); and, with ``--baseline FILE``, the ``AvroSerde`` of
another version of ``avro_serde.py`` (``git show REV:path > FILE``), so a change is measured
against the code before it in the same sitting. Rounds interleave the cases and time this
thread's CPU (a neighbour's load shows less in it than in wall time); the best round counts,
the median is printed beside it. ``--profile`` prints cProfile's top functions of the Avro
path. Nothing is written.

Run ``python -m loadtest.bench_schema_encode [--baseline FILE] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import orjson

from loadtest.bench_schema import RECORDS_PER_REQUEST, SCHEMA, event
from yak_rest_proxy.api.v2.embedded import from_embedded
from yak_rest_proxy.api.v2.produce_body import parse_produce_request
from yak_rest_proxy.api.v2.schema_records import encode_column
from yak_rest_proxy.http.content import EmbeddedFormat
from yak_rest_proxy.schemas.avro_calls import WRITE_OPTIONS, write_into
from yak_rest_proxy.schemas.avro_serde import AvroSerde
from yak_rest_proxy.schemas.serde import Serde

ROUNDS = 15
CALLS_PER_ROUND = 50


Encode = Callable[[bytes], object]


def _json(body: bytes) -> object:
    items = parse_produce_request(body).records
    return [from_embedded(v, EmbeddedFormat.JSON, i, "value") for i, (_, v, _) in enumerate(items)]


def _avro(serde: Serde) -> Encode:
    def encode(body: bytes) -> object:
        items = parse_produce_request(body).records
        return encode_column(serde, [v for _, v, _ in items], "value")

    return encode


def _baseline(path: Path) -> Serde:
    spec = importlib.util.spec_from_file_location("avro_serde_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    serde: Serde = module.AvroSerde(1, orjson.dumps(SCHEMA).decode())
    return serde


def _writer_alone(body: bytes) -> object:
    """fastavro's writer with no validation at all: what no check can go below."""
    items = parse_produce_request(body).records
    out = bytearray()
    for _, value, _ in items:
        write_into(out, value, _PARSED, _NAMED, "", WRITE_OPTIONS)
    return out


_NAMED: dict[str, Any] = {}
_PARSED = fastavro.parse_schema(SCHEMA, _NAMED)


def cases(baseline: Path | None) -> dict[str, Encode]:
    found = {
        "json": _json,
        "avro": _avro(AvroSerde(1, orjson.dumps(SCHEMA).decode())),
        "avro writer alone (floor)": _writer_alone,
    }
    if baseline is not None:
        found["avro (baseline)"] = _avro(_baseline(baseline))
    return found


def body() -> bytes:
    """The bench's request body (parsed afresh by every call, as the proxy does)."""
    return orjson.dumps({"records": [{"value": event(i)} for i in range(RECORDS_PER_REQUEST)]})


def measure(work: dict[str, Encode]) -> dict[str, list[float]]:
    """CPU µs per record of each case, one figure per round (this thread's CPU time: a
    neighbour's load shows less in it than in wall time)."""
    raw = body()
    for encode in work.values():
        encode(raw)  # warm up
    rounds: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(ROUNDS):
        for name, encode in work.items():
            started = time.thread_time()
            for _ in range(CALLS_PER_ROUND):
                encode(raw)
            elapsed = time.thread_time() - started
            rounds[name].append(elapsed * 1e6 / (CALLS_PER_ROUND * RECORDS_PER_REQUEST))
    return rounds


def profile() -> None:
    encode, raw = _avro(AvroSerde(1, orjson.dumps(SCHEMA).decode())), body()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(CALLS_PER_ROUND):
        encode(raw)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another avro_serde.py to compare with")
    parser.add_argument("--profile", action="store_true", help="cProfile the Avro path")
    args = parser.parse_args()
    if args.profile:
        profile()
        return
    rounds = measure(cases(args.baseline))
    print(f"{'case':32} {'best CPU µs/rec':>16} {'median':>8}")
    for name, figures in rounds.items():
        print(f"{name:32} {min(figures):16.2f} {statistics.median(figures):8.2f}")


if __name__ == "__main__":
    main()
