"""``python -m loadtest.chaos`` (``make chaos``): see ``loadtest/chaos/__init__.py`` and
``docs/chaos.md``. Exit code 0 when nothing was lost, duplicated, reordered or moved."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import FrameType

from loadtest.chaos.cluster import BROKERS, COORDINATORS, ETCD_MEMBERS, PROXIES, ChaosCluster
from loadtest.chaos.disks import BrokerDisks, unmount_leftovers
from loadtest.chaos.faults import CLASSES, FaultClass
from loadtest.chaos.network import LoopbackNetwork, NamespaceNetwork, Network, cleanup_leftovers
from loadtest.chaos.report import document, table, write
from loadtest.chaos.runner import ClassResult, RunOptions, run
from loadtest.chaos.shim import Shim, build_shim
from loadtest.local_cluster import code_path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "loadtest" / "results" / "chaos.json"
LOGS = ROOT / ".artifacts" / "chaos-logs"
#: ``--short``: cheap classes that need neither root nor a compiler.
SHORT = ("kill-broker", "pause-proxy", "kill-coordinator")


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: everything gets cleaned up


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.chaos", description=__doc__)
    parser.add_argument("--faults", type=int, default=30, help="faults per class")
    parser.add_argument("--classes", help="comma-separated class names (default: all)")
    parser.add_argument("--short", action="store_true", help=f"smoke: {', '.join(SHORT)}")
    parser.add_argument("--loopback", action="store_true", help="no namespaces (no partitions)")
    parser.add_argument(
        "--etcd-single", action="store_true", help="services get etcd-0's URL, not all three"
    )
    parser.add_argument("--class-budget", type=float, default=180.0, help="seconds per class")
    parser.add_argument("--max-minutes", type=float, default=30.0, help="the whole run")
    parser.add_argument("--sdk-rate", type=float, default=50.0, help="records/s per SDK producer")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--merge", action="store_true", help="keep other classes' entries")
    parser.add_argument("--cleanup", action="store_true", help="remove a dead run's leftovers")
    parser.add_argument("--list", action="store_true", help="list the fault classes")
    parser.add_argument(
        "--code", help="run the services of this commit (git archive), not the work tree"
    )
    return parser.parse_args(argv)


def _choose(args: argparse.Namespace) -> list[FaultClass]:
    by_name = {c.name: c for c in CLASSES}
    names = args.classes.split(",") if args.classes else list(SHORT if args.short else by_name)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown fault classes: {unknown}; --list shows them")
    return [by_name[n] for n in names]


def _export(ref: str, folder: Path) -> tuple[tuple[str, ...], str]:
    """``ref``'s ``shared`` and ``services`` under ``folder`` (``git archive``: nothing in the
    repository changes); the PYTHONPATH folders and the commit."""
    commit = subprocess.run(
        ("git", "-C", str(ROOT), "rev-parse", ref), check=True, capture_output=True, text=True
    ).stdout.strip()
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ("git", "-C", str(ROOT), "archive", commit, "shared", "services"),
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(("tar", "-x", "-C", str(folder)), input=archive, check=True)
    return code_path(folder), commit


def _work_tree() -> str:
    """The checkout's commit, with ``+dirty`` when services or shared have local changes."""
    git = ("git", "-C", str(ROOT))
    head = subprocess.run((*git, "rev-parse", "HEAD"), capture_output=True, text=True).stdout
    changed = subprocess.run(
        (*git, "status", "--porcelain", "--", "shared", "services"), capture_output=True, text=True
    ).stdout
    return head.strip() + ("+dirty" if changed.strip() else "")


def _pending(fault: FaultClass, why: str) -> ClassResult:
    return ClassResult(fault.name, fault.description, skipped=why)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.list:
        for fault in CLASSES:
            print(f"{fault.name:<28}{fault.description}")
        return 0
    if args.cleanup:
        print("removed:", [*cleanup_leftovers(), *unmount_leftovers()] or "nothing")
        return 0
    signal.signal(signal.SIGTERM, _interrupt)
    chosen = _choose(args)
    runnable = [c for c in chosen if not (c.partitions and args.loopback)]
    skipped = [_pending(c, "needs network namespaces") for c in chosen if c not in runnable]
    folder = Path(tempfile.mkdtemp(prefix="yak-chaos-"))
    network: Network | None = None
    cluster: ChaosCluster | None = None
    started = time.monotonic()
    code = _work_tree()
    try:
        if args.loopback:
            network = LoopbackNetwork()
        else:
            nodes = (*ETCD_MEMBERS, *COORDINATORS, *BROKERS, *PROXIES)
            namespaces = NamespaceNetwork(nodes)
            namespaces.join("client")  # before any thread: see network's module doc
            namespaces.log_dir = folder / "logs"
            namespaces.log_dir.mkdir(parents=True, exist_ok=True)
            network = namespaces
        shim = None
        if any(c.shim for c in runnable):
            shim = Shim(build_shim(folder), folder / "shim-control")
        cluster_id = f"chaos-{uuid.uuid4().hex[:8]}"
        cluster = ChaosCluster(
            folder, network, cluster_id, shim=shim, etcd_list=not args.etcd_single
        )
        if shim is not None:  # ``disk-full`` fills this folder only without ``disks``
            shim.full_dir = cluster.data_dir(cluster.shim_broker).resolve()
        if any(c.disks for c in runnable):
            disks = BrokerDisks({b: cluster.data_dir(b) for b in BROKERS})
            if disks.mount():
                cluster.disks = disks
            else:
                print("disk-full: cannot mount the brokers' disks; the shim's full disk instead")
        if args.code:
            cluster.python_path, code = _export(args.code, folder / "code")
        cluster.start_all()
        options = RunOptions(
            faults=args.faults,
            class_budget_s=args.class_budget,
            sdk_rate=args.sdk_rate,
            deadline=started + args.max_minutes * 60,
        )

        def progress(result: ClassResult) -> None:
            v = result.verdict
            print(
                f"{result.name}: {result.faults} faults in {result.seconds:.0f} s, acked "
                f"{v.acked}, lost {v.lost}, duplicated {v.duplicated}, reordered "
                f"{v.reordered}, moved {v.moved}; etcd elections {result.etcd_elections}; "
                f"{result.skipped or ''} "
                f"{'; '.join(result.notes)[:400]} {result.diagnosis[:600]}",
                flush=True,
            )

        results = asyncio.run(run(cluster, network, shim, runnable, options, progress))
    finally:
        if cluster is not None:
            cluster.stop()
            if cluster.disks is not None:
                cluster.disks.unmount()
        if network is not None:
            network.close()
        if (folder / "logs").is_dir():  # every process's log, kept for a post-mortem
            shutil.rmtree(LOGS, ignore_errors=True)
            shutil.copytree(folder / "logs", LOGS)
        shutil.rmtree(folder, ignore_errors=True)
    settings = {
        "faults_per_class": args.faults,
        "network": "loopback" if args.loopback else "namespaces",
        "etcd_endpoints_given_to_services": 1 if args.etcd_single else 3,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "code": code,
        "classes": [c.name for c in runnable],
        "folder": str(folder),
    }
    doc = write(args.results, document([*results, *skipped], settings), merge=args.merge)
    print(table(doc))
    print(f"results: {args.results}; logs: {LOGS}")
    bad = any(doc[k] for k in ("lost", "duplicated", "reordered", "moved", "unread_classes"))
    if bad:
        for name, entry in doc["classes"].items():
            if entry.get("examples"):
                print(name, json.dumps(entry["examples"])[:600])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
