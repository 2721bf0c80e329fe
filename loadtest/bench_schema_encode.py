"""The Avro encode path of a v2 produce request, in-process, against the JSON one (issue 33).

``make bench-schema`` measures the whole proxy; this measures the one step where Avro and JSON
produce differ — turning a request's 200 values into record bytes — on the same records
(``loadtest.bench_schema.event``): the JSON format's ``from_embedded`` per value, the Avro
format's ``AvroSerde.encode_many``, and, with ``--baseline FILE``, the ``AvroSerde`` of
another version of ``avro_serde.py`` (``git show REV:path > FILE``), so a change is measured
against the code before it in the same sitting. Rounds interleave the cases and time
this thread's CPU; the best round counts (the machine is shared), the median is printed beside
it. ``--profile`` prints
cProfile's top functions of the current Avro path. Nothing is written.

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

import orjson

from loadtest.bench_schema import RECORDS_PER_REQUEST, SCHEMA, event
from yak_rest_proxy.api.v2.embedded import from_embedded
from yak_rest_proxy.http.content import EmbeddedFormat
from yak_rest_proxy.schemas.avro_serde import AvroSerde

ROUNDS = 15
CALLS_PER_ROUND = 50


def _where(index: int) -> str:
    return f"records[{index}].value"


def _baseline(path: Path) -> Callable[[list[Any]], object]:
    spec = importlib.util.spec_from_file_location("avro_serde_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    serde = module.AvroSerde(1, orjson.dumps(SCHEMA).decode())
    return lambda values: serde.encode_many(values, _where)


def cases(baseline: Path | None) -> dict[str, Callable[[list[Any]], object]]:
    serde = AvroSerde(1, orjson.dumps(SCHEMA).decode())
    found: dict[str, Callable[[list[Any]], object]] = {
        "json from_embedded": lambda values: [
            from_embedded(v, EmbeddedFormat.JSON, i, "value") for i, v in enumerate(values)
        ],
        "avro encode_many": lambda values: serde.encode_many(values, _where),
    }
    if baseline is not None:
        found["avro encode_many (baseline)"] = _baseline(baseline)
    return found


def measure(work: dict[str, Callable[[list[Any]], object]]) -> dict[str, list[float]]:
    """CPU µs per record of each case, one figure per round (this thread's CPU time: a
    neighbour's load shows less in it than in wall time)."""
    values = [event(i) for i in range(RECORDS_PER_REQUEST)]
    for encode in work.values():
        encode(values)  # warm up
    rounds: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(ROUNDS):
        for name, encode in work.items():
            started = time.thread_time()
            for _ in range(CALLS_PER_ROUND):
                encode(values)
            elapsed = time.thread_time() - started
            rounds[name].append(elapsed * 1e6 / (CALLS_PER_ROUND * RECORDS_PER_REQUEST))
    return rounds


def profile() -> None:
    serde = AvroSerde(1, orjson.dumps(SCHEMA).decode())
    values = [event(i) for i in range(RECORDS_PER_REQUEST)]
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(CALLS_PER_ROUND):
        serde.encode_many(values, _where)
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
