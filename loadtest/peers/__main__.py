"""``python -m loadtest.peers``: the whole comparison in one go (``make bench-peers``).

For each system in turn — Yak (REST, SDK and Kafka-listener drivers on one local 3-broker
cluster), Redis, NATS — start it (``servers``), run every chosen workload with a progress bar,
stop it. Then
write ``loadtest/results/peers.json``, the plots under ``docs/benchmarks/`` and
``docs/benchmarks.md`` (the hand-written ``intro.md``, the generated results, and the
hand-written closing ``notes.md``); ``--report-only`` writes the docs again from
``peers.json`` without running anything (after editing the notes).

``--quick`` is a smoke run (a tenth of every duration and backlog, short search steps) that
writes ``loadtest/results/peers-quick.json`` only; ``--scale`` (or ``YAK_PEERS_SCALE``) shrinks
a full run the same way. ``--profile DIR`` samples the rest-proxy with py-spy during the
measured phase of the Yak REST max-rate workload and prints its hot spots.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from loadtest.peers.drivers.base import Driver
from loadtest.peers.drivers.nats_jetstream import NatsJetStreamDriver
from loadtest.peers.drivers.redis_streams import RedisStreamsDriver
from loadtest.peers.drivers.yak_kafka import YakKafkaDriver
from loadtest.peers.drivers.yak_rest import YakRestDriver, YakRestRf1Driver
from loadtest.peers.drivers.yak_sdk import YakSdkDriver
from loadtest.peers.environment import environment
from loadtest.peers.plots import plot_workloads
from loadtest.peers.profiling import hot_spots, py_spy
from loadtest.peers.report import PRODUCE_WORKLOAD, document, markdown, write_json
from loadtest.peers.result import RunResult
from loadtest.peers.runner import MeasureHook, Runner, no_hook
from loadtest.peers.servers import nats_server, redis_server, yak_server
from loadtest.peers.workload import Workload, bundled_workloads

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "loadtest" / "results"
DOCS = ROOT / "docs"
INTRO = Path(__file__).with_name("intro.md")
NOTES = Path(__file__).with_name("notes.md")
DRIVERS = ("yak-rest", "yak-rest-rf1", "yak-sdk", "yak-kafka", "redis", "nats")
console = Console()


@contextmanager
def _yak() -> Iterator[tuple[str, int]]:
    with yak_server() as yak:
        yield yak.url, yak.proxy_pid


@contextmanager
def _peer(server: Callable[[], AbstractContextManager[str]]) -> Iterator[tuple[str, int]]:
    with server() as url:
        yield url, 0


SYSTEMS: dict[str, tuple[Callable[[], AbstractContextManager[tuple[str, int]]], list[str]]] = {
    "yak": (_yak, ["yak-rest", "yak-rest-rf1", "yak-sdk", "yak-kafka"]),
    "redis": (lambda: _peer(redis_server), ["redis"]),
    "nats": (lambda: _peer(nats_server), ["nats"]),
}
FACTORIES: dict[str, Callable[[str], Driver]] = {
    "yak-rest": YakRestDriver,
    "yak-rest-rf1": YakRestRf1Driver,
    "yak-sdk": YakSdkDriver,
    "yak-kafka": YakKafkaDriver,
    "redis": RedisStreamsDriver,
    "nats": NatsJetStreamDriver,
}


async def _run(
    driver: Driver, workloads: list[Workload], args: argparse.Namespace, pid: int
) -> list[RunResult]:
    results = []
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        try:
            for workload in workloads:
                hook: MeasureHook = no_hook
                if args.profile and driver.name == "yak-rest" and workload.name == PRODUCE_WORKLOAD:
                    hook = py_spy(pid, args.profile / "rest-proxy-max-rate.txt")
                runner = Runner(
                    driver,
                    workload,
                    step_s=2.0 if args.quick else 5.0,
                    max_steps=4 if args.quick else 6,
                    progress=progress,
                    measure_hook=hook,
                )
                result = await runner.run()
                results.append(result)
                console.print(
                    f"{driver.name:9} {workload.name:42} "
                    f"publish {result.publish_rate:>9,.0f}/s "
                    f"consume {result.consume_rate:>9,.0f}/s "
                    f"e2e p99 {result.e2e_latency.p99:>8,.1f} ms errors {result.errors}",
                    soft_wrap=True,
                )
        finally:
            await driver.aclose()
    return results


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (no docs)")
    parser.add_argument("--workloads", help="comma-separated workload names (default: all)")
    parser.add_argument("--drivers", help=f"comma-separated, of {', '.join(DRIVERS)}")
    parser.add_argument("--scale", type=float, default=float(os.environ.get("YAK_PEERS_SCALE", 1)))
    parser.add_argument("--profile", type=Path, help="py-spy the proxy into this folder")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: write docs/benchmarks.md again from loadtest/results/peers.json",
    )
    return parser.parse_args()


#: Where the sections other benchmarks write begin (``make bench-queue``, ``bench-kafka``).
OTHER_BENCHMARKS = "<!-- bench-"


def kept_sections(page: str) -> str:
    """What ``page`` holds from the first section another benchmark wrote on (their blocks
    and the readings after them): the peers' run rewrites only what comes before."""
    at = page.find(OTHER_BENCHMARKS)
    return page[at:].rstrip() if at >= 0 else ""


def write_docs(doc: dict[str, Any], results: list[RunResult]) -> None:
    """Plots under ``docs/benchmarks/`` and ``docs/benchmarks.md``: intro, results, notes,
    then the other benchmarks' sections as they were."""
    plots = plot_workloads(results, DOCS / "benchmarks")
    relative = {w: str(p.relative_to(DOCS)) for w, p in plots.items()}
    parts = [INTRO.read_text().rstrip(), markdown(doc, results, relative).rstrip()]
    if NOTES.exists():
        parts.append(NOTES.read_text().rstrip())
    page = DOCS / "benchmarks.md"
    kept = kept_sections(page.read_text()) if page.exists() else ""
    if kept:
        parts.append(kept)
    page.write_text("\n\n".join(parts) + "\n")


def _exit_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM (``timeout``, a CI runner) unwinds like Ctrl-C, so every ``with`` that started
    servers stops them: by default Python would die at once and leave the clusters running."""
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = _arguments()
    if args.report_only:
        doc = json.loads((RESULTS / "peers.json").read_text())
        write_docs(doc, [RunResult.from_json(r) for r in doc["results"]])
        return
    available = bundled_workloads()
    names = args.workloads.split(",") if args.workloads else list(available)
    chosen_drivers = args.drivers.split(",") if args.drivers else list(DRIVERS)
    unknown = [n for n in names if n not in available] + [
        d for d in chosen_drivers if d not in DRIVERS
    ]
    if unknown:
        sys.exit(f"unknown workload or driver: {', '.join(unknown)}")
    scale = 0.1 if args.quick else args.scale
    workloads = [available[n].scaled(scale) for n in names]
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    env = environment(args.quick, "python -m loadtest.peers " + " ".join(sys.argv[1:]))
    results: list[RunResult] = []
    descriptions: dict[str, str] = {}
    for start, drivers in SYSTEMS.values():
        drivers = [d for d in drivers if d in chosen_drivers]
        if not drivers:
            continue
        with start() as (url, pid):
            for name in drivers:
                driver = FACTORIES[name](url)
                descriptions[name] = driver.description
                results += asyncio.run(_run(driver, workloads, args, pid))
    doc = document(results, env, descriptions)
    doc["scale"] = scale
    write_json(RESULTS / ("peers-quick.json" if args.quick else "peers.json"), doc)
    if not args.quick:
        write_docs(doc, results)
    console.print(doc["ratios"], doc["ratios_rf1"], doc["ratios_sdk"], doc["ratios_kafka"])
    if args.profile and (args.profile / "rest-proxy-max-rate.txt").exists():
        for function, own, total in hot_spots(args.profile / "rest-proxy-max-rate.txt"):
            console.print(f"{own:6.1%} self {total:6.1%} total  {function}")


if __name__ == "__main__":
    main()
