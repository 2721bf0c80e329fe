"""Latency benchmark (issue 18): idle produce latency, end-to-end latency at fixed rates and
CPU per record, Yak next to Redis Streams and next to a baseline build of itself, in one run on
one machine. Run with ``python -m loadtest.bench_latency`` (``make bench-latency``); the method
is described in ``docs/performance.md``.

1. **Idle one-record produce latency** (the peers' 1 KiB JSON payload as the value, one request
   at a time on one connection, ``--warmup`` unmeasured then ``--samples`` measured, 2 ms
   apart; exact p50/p90/p99):

   - ``broker``: ``BrokerClient.produce`` to the partition's leader (found from the
     coordinator), topics of replication factor 1 and 3, acks 0, 1 and -1; in a process of its
     own running the measured build's client (``loadtest.latency.probe``);
   - ``proxy``: the rest-proxy's ``POST /api/v1/topics/{t}/records?acks=0|1|all``, RF 1 and 3;
   - ``redis``: ``XADD`` from ``redis.asyncio`` with hiredis (``loadtest.peers.servers``'
     redis-server: AOF, fsync every second).

2. **End-to-end latency** at each ``--rates`` (default 1,000 and 10,000 msg/s), measured by
   the peers harness's ``Runner``: 1 KiB records carrying ``time.monotonic_ns()``, one topic of
   16 partitions (RF 3, ``min.insync.replicas`` 2, acks=all, native produce route), batches
   paced every 5 ms, one native group member long-polling ``GET …/records``; Redis the same
   with pipelined XADD and ``XREADGROUP BLOCK`` + ``XACK``. ``--e2e-warmup`` then
   ``--e2e-duration`` measured; p50/p99/p99.9 (HDR).

3. **CPU per record**: ``--cpu-records`` records (default 400,000) through the native produce
   route as fast as 8 concurrent clients of 500 records a request get them acknowledged
   (acks=all, RF 3, 16 partitions); user + system CPU seconds of the rest-proxy and the three
   brokers from ``/proc/<pid>/stat`` after minus before, per acknowledged record.

4. **Budget per hop** (the current build only): the stage histograms of the rest-proxy's and
   every broker's ``/metrics`` (``yak_proxy_produce_stage_seconds``,
   ``yak_proxy_poll_stage_seconds``, ``yak_broker_produce_stage_seconds``,
   ``yak_broker_fetch_stage_seconds``) scraped just before and just after the measured requests
   of the idle proxy rows RF 3 acks=1 and acks=all and the measured part of the end-to-end run
   at 1,000 msg/s (the lowest rate when 1,000 is not among ``--rates``); the bucket counts
   diffed and summed over the brokers, each stage's p50/p99 as Prometheus'
   ``histogram_quantile`` computes it (``loadtest.latency.histograms``). The baseline build gets
   the same tables (``budget_before``) when it exports these metrics (``--baseline`` of a commit
   of issue 18 or later; 5db3bf7 does not); a failed scrape leaves that table out.

**Baseline**: ``--baseline REF`` (default ``5db3bf7``, the code before the speed work; ``--no-
baseline`` skips it) is checked out with ``git worktree add --detach`` in a temporary folder
and a second cluster runs its code (its ``shared`` and ``services/*`` first on the services'
``PYTHONPATH``, ``loadtest.local_cluster``'s ``python_path``; each process logs the files it
imported and the run stops if they are not the worktree's). Each build's cluster is measured
in the same order on fresh topics: idle latencies, end-to-end latencies (``--no-baseline-e2e``
skips the baseline's) and, last, the CPU phase, whose 400 MB (1.2 GB replicated) burst and
the writeback after it would otherwise weigh on whatever came next. One cluster runs at a
time; Redis is measured first, alone. The worktree is removed at the end.
Each build's services are imported once before it is measured (``preflight``): a tree that
cannot start fails the run at once, not minutes into it.

Output: ``loadtest/results/latency.json`` (``--results``): the headline keys
(``proxy_acks1_p50_ms``, ``proxy_acksall_p50_ms`` — RF 3 —, ``redis_xadd_p50_ms``,
``e2e_p99_1k_ms``, ``e2e_p99_10k_ms``, ``redis_e2e_p99_10k_ms``, ``cpu_us_per_record``,
``cpu_us_per_record_before`` and more, see ``loadtest.latency.results.headline``), the goals,
every row and CPU phase, the budget per hop, the machine, the load and the git revisions;
tables on the terminal; and the generated blocks of ``docs/performance.md``, the results and
the budget per hop (``--doc``; ``--no-doc`` leaves it alone; ``--report-only`` rewrites them
from ``--results`` without measuring).
Every process started is stopped at the end, also on errors, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from redis.utils import HIREDIS_AVAILABLE

from loadtest.latency.baseline import (
    check_origins,
    code_origins,
    current_origins,
    preflight,
    resolve,
    revision,
    worktree,
)
from loadtest.latency.budget import Budget
from loadtest.latency.cluster import LOGS, yak_cluster
from loadtest.latency.cpu import CpuPhase
from loadtest.latency.measure import IdleSettings
from loadtest.latency.options import DEFAULT_BASELINE, DOC, RESULTS, Options
from loadtest.latency.page import page
from loadtest.latency.results import document
from loadtest.latency.rows import Row
from loadtest.latency.systems import measure_redis, measure_yak
from loadtest.latency.terminal import console, print_report
from loadtest.local_cluster import code_path
from loadtest.peers.environment import machine_description
from loadtest.peers.servers import redis_server, server_versions

__all__ = ["main", "parse"]


def _rates(text: str) -> tuple[int, ...]:
    rates = tuple(int(part) for part in text.split(",") if part.strip())
    if not rates or any(rate <= 0 for rate in rates):
        raise argparse.ArgumentTypeError(f"rates are positive msg/s, comma-separated: {text!r}")
    return rates


def parse(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.bench_latency",
        description=(__doc__ or "").partition("\n\n")[0],
    )
    add = parser.add_argument
    add("--samples", type=int, default=300, help="measured requests per idle row")
    add("--warmup", type=int, default=50, help="unmeasured requests before each idle row")
    add("--rates", type=_rates, default=(1_000, 10_000), help="e2e rates, msg/s (1000,10000)")
    add("--e2e-warmup", type=float, default=5.0, help="seconds before each e2e measurement")
    add("--e2e-duration", type=float, default=10.0, help="seconds measured per e2e rate")
    add("--cpu-records", type=int, default=400_000, help="records of the CPU phase")
    add("--cpu-warmup-requests", type=int, default=40, help="requests before the CPU phase")
    add("--baseline", default=DEFAULT_BASELINE, help="the commit to compare with (5db3bf7)")
    add("--no-baseline", action="store_true", help="measure the current code only")
    add("--no-baseline-e2e", action="store_true", help="no e2e rows for the baseline")
    add("--results", type=Path, default=RESULTS, help="the JSON document")
    add("--doc", type=Path, default=DOC, help="the page whose results block is rewritten")
    add("--no-doc", action="store_true", help="leave docs/performance.md alone")
    add(
        "--report-only",
        action="store_true",
        help="measure nothing: rewrite the page's results block from --results",
    )
    args = parser.parse_args(argv)
    if args.samples < 1 or args.warmup < 0 or args.cpu_records < 1:
        parser.error("--samples and --cpu-records must be ≥ 1, --warmup ≥ 0")
    shown = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    return Options(
        idle=IdleSettings(samples=args.samples, warmup=args.warmup),
        rates=args.rates,
        e2e_warmup_s=args.e2e_warmup,
        e2e_duration_s=args.e2e_duration,
        cpu_records=args.cpu_records,
        cpu_warmup_requests=args.cpu_warmup_requests,
        baseline=None if args.no_baseline else args.baseline,
        baseline_e2e=not args.no_baseline_e2e,
        results=args.results,
        doc=None if args.no_doc else args.doc,
        report_only=args.report_only,
        command=f"python -m loadtest.bench_latency {shown}".strip(),
    )


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: every process gets stopped


_SYSTEM_ORDER = {"yak": 0, "yak-before": 1, "redis": 2}
_PATH_ORDER = {
    "broker": 0,
    "proxy": 1,
    "proxy_httpx": 2,
    "xadd": 3,
    "proxy_b2b": 4,
    "xadd_b2b": 5,
    "e2e": 6,
    "e2e_httpx": 7,
}
_ACKS_ORDER = {"0": 0, "1": 1, "all": 2, None: 3}


def _ordered(rows: Sequence[Row]) -> list[Row]:
    return sorted(
        rows,
        key=lambda r: (
            _PATH_ORDER.get(r.path, 9),
            r.rate or 0,
            r.rf or 0,
            _ACKS_ORDER.get(r.acks, 9),
            _SYSTEM_ORDER.get(r.system, 9),
        ),
    )


def environment(options: Options, baseline_commit: str | None) -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    versions = server_versions()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": options.command,
        "machine": machine_description(),
        "load": f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min) at start",
        "revision": revision(),
        "baseline": baseline_commit[:12] if baseline_commit else None,
        "versions": {
            "python": versions["python"],
            "redis-server": versions["redis-server"],
            "redis-py hiredis parser": HIREDIS_AVAILABLE,
        },
    }


@contextmanager
def _stage(name: str, failures: dict[str, str]) -> Iterator[None]:
    """Run a stage; an error in it is printed and kept in ``failures``, and the run goes on
    (what the other stages measured is still written)."""
    try:
        yield
    except Exception as exc:  # reported with the results, not lost with them
        failures[name] = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]{name} failed[/] (logs in {LOGS}):")
        console.print_exception(max_frames=8)


def run(options: Options) -> dict[str, Any]:
    """Every measurement (see the module docstring); the results document."""
    started = time.monotonic()
    preflight()
    baseline_commit = resolve(options.baseline) if options.baseline else None
    env = environment(options, baseline_commit)
    rows: list[Row] = []
    cpu: list[CpuPhase] = []
    origins: dict[str, dict[str, str]] = {}
    failures: dict[str, str] = {}
    with _stage("redis", failures), redis_server() as url:
        rows += asyncio.run(measure_redis(url, options))
    before_budget = Budget(())
    if options.baseline:
        with _stage("baseline", failures), worktree(options.baseline) as tree:
            preflight(code_path(tree))
            console.log(f"[bold]yak-before[/]: starting a cluster on {tree}")
            with yak_cluster("baseline", code_path(tree)) as yak:
                brokers = tuple(yak.cluster.broker_url(b) for b in sorted(yak.cluster.brokers))
                before_budget = Budget(
                    (yak.proxy_url, *brokers, yak.cluster.coordinator_url), yak.pids
                )
                processes = {p.spec.name: p for p in yak.cluster.supervisor.processes}
                origins["baseline"] = code_origins(processes)
                check_origins(origins["baseline"], tree)
                found, phase, probe_code = asyncio.run(
                    measure_yak(
                        yak, "yak-before", "baseline", options,
                        e2e=options.baseline_e2e, budget=before_budget,
                    )
                )  # fmt: skip
                origins["baseline"]["broker probe"] = probe_code
                check_origins(origins["baseline"], tree)
                rows += found
                cpu.append(phase)
    console.log("[bold]yak[/]: starting a cluster on this checkout")
    budget = Budget(())
    with _stage("current", failures), yak_cluster("current", ()) as yak:
        brokers = tuple(yak.cluster.broker_url(b) for b in sorted(yak.cluster.brokers))
        budget = Budget((yak.proxy_url, *brokers, yak.cluster.coordinator_url), yak.pids)
        found, phase, probe_code = asyncio.run(
            measure_yak(yak, "yak", "current", options, e2e=True, budget=budget)
        )
        origins["current"] = {**current_origins(), "broker probe": probe_code}
        rows += found
        cpu.insert(0, phase)
    one, five, fifteen = os.getloadavg()
    env["load_at_end"] = f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} at the end"
    env["code"] = origins
    env["failures"] = failures
    rows = _ordered(rows)
    doc = document(rows, cpu, env, options.settings(), budget.found, budget.gc, before_budget.gc)
    doc["cpu_waits"] = {key: [w.to_json() for w in waits] for key, waits in budget.cpu.items()}
    doc["cpu_waits_before"] = {
        key: [w.to_json() for w in waits] for key, waits in before_budget.cpu.items()
    }
    doc["budget_before"] = {
        key: [f.to_json() for f in stages] for key, stages in before_budget.found.items() if stages
    }
    doc["wall_s"] = round(time.monotonic() - started, 1)
    print_report(doc, rows, cpu)
    for name, failure in failures.items():
        console.print(f"[red]{name} failed:[/] {failure}")
    return doc


def write(doc: dict[str, Any], options: Options) -> None:
    options.results.parent.mkdir(parents=True, exist_ok=True)
    options.results.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    console.print(f"written to {options.results} ({doc['wall_s']:.0f} s)")
    if options.doc is None:
        return
    if doc["failures"]:
        console.print(f"[yellow]{options.doc} not updated: a stage failed[/]")
        return
    try:
        options.doc.write_text(page(options.doc.read_text(), doc))
    except (OSError, ValueError) as exc:
        console.print(f"[yellow]{options.doc} not updated: {exc}[/]")
        return
    console.print(f"results and budget blocks of {options.doc} rewritten")


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(argv)
    if options.report_only:
        if options.doc is not None:
            doc = json.loads(options.results.read_text())
            options.doc.write_text(page(options.doc.read_text(), doc))
            console.print(
                f"results and budget blocks of {options.doc} rewritten from {options.results}"
            )
        return 0
    signal.signal(signal.SIGTERM, _interrupt)
    doc = run(options)
    write(doc, options)
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
