"""``yak partitions``: reassignment plans (like kafka-reassign-partitions) and preferred
leader election (like kafka-leader-election).

``reassign`` works on a JSON plan in Kafka's format (``yak.cli.reassign_plan``), one mode at
a time:

* ``--generate --topic T --brokers 1,2,3`` (or Kafka's ``--topics-to-move-json-file``)
  prints a plan moving the topics onto the brokers (only the partitions that change) on
  stdout, and the current assignment of the same partitions (the rollback plan) on stderr or
  into ``--rollback FILE``;
* ``PLAN --execute`` starts every move of the plan (``PUT …/reassignment``) and prints the
  rollback plan on stderr; partitions already on their planned replicas are skipped;
* ``PLAN --verify`` tells per partition whether the move is complete, in progress or not
  started (exit status 0 only when all are complete); ``--wait`` waits with a progress bar;
* ``PLAN --cancel`` cancels the plan's running moves (back to the original replicas);
* ``--status`` lists every running reassignment.

``elect-leaders`` moves leadership back to each partition's preferred replica — every
partition, a ``--topic``'s, or one ``--partition`` of it — and prints the outcome per
partition; it exits with 1 when a preferred replica was not available.

Commands talk to a coordinator (``yak.cli.cluster``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from yak.api.admin import (
    ClusterInfo,
    ElectLeadersResult,
    PartitionInfo,
    ReassignmentList,
    TopicDescription,
)
from yak.cli.cluster import AdminApiKeyOption, CoordinatorOption, DataDirOption, call_admin
from yak.cli.reassign_plan import (
    PlanEntry,
    PlanStatus,
    format_plan,
    generate_plan,
    parse_plan,
    plan_status,
)
from yak.clients.admin import AdminClient

__all__ = ["app"]

_T = TypeVar("_T")

app = typer.Typer(
    no_args_is_help=True, help="Reassign partitions with a plan; elect preferred leaders."
)

_DATA_DIR = Path(".yak")
_WAIT_POLL_S = 1.0
_err = Console(stderr=True)


def _read_plan(path: Path) -> list[PlanEntry]:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        return parse_plan(json.loads(text))
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="PLAN") from None


def _topics_to_move(path: Path) -> list[str]:
    """The topics of kafka-reassign-partitions' ``--topics-to-move-json-file``."""
    try:
        document = json.loads(path.read_text())
        topics = [str(t["topic"]) for t in document["topics"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        message = f'{path}: expected {{"topics": [{{"topic": "name"}}], "version": 1}}: {exc!r}'
        raise typer.BadParameter(message, param_hint="--topics-to-move-json-file") from None
    return topics


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise typer.BadParameter(f"broker ids like 1,2,3, not {text!r}") from None
    if not ids or len(set(ids)) != len(ids):
        raise typer.BadParameter(f"broker ids like 1,2,3 without repeats, not {text!r}")
    return ids


def _current(topics: list[TopicDescription]) -> list[PlanEntry]:
    """Each partition's replicas; for one being moved, those of its target (the merged list
    would count the replicas being removed)."""
    return [
        PlanEntry(t.name, p.partition, tuple(r for r in p.replicas if r not in p.removing_replicas))
        for t in topics
        for p in t.partitions
    ]


async def _statuses(
    admin: AdminClient, plan: list[PlanEntry]
) -> list[tuple[PlanEntry, PartitionInfo, PlanStatus]]:
    described = {name: await admin.describe_topic(name) for name in sorted({e.topic for e in plan})}
    out = []
    for entry in plan:
        partitions = {p.partition: p for p in described[entry.topic].partitions}
        state = partitions.get(entry.partition)
        if state is None:
            raise typer.BadParameter(f"{entry.topic}-{entry.partition} does not exist")
        status = plan_status(entry, state.replicas, state.adding_replicas, state.removing_replicas)
        out.append((entry, state, status))
    return out


def _print_statuses(rows: list[tuple[PlanEntry, PartitionInfo, PlanStatus]]) -> None:
    table = Table("partition", "planned", "replicas", "isr", "status")
    for entry, state, status in rows:
        table.add_row(
            f"{entry.topic}-{entry.partition}",
            ",".join(map(str, entry.replicas)),
            ",".join(map(str, state.replicas)),
            ",".join(map(str, state.isr)),
            status,
        )
    Console().print(table)


async def _wait_complete(
    admin: AdminClient, plan: list[PlanEntry], timeout_s: float
) -> list[tuple[PlanEntry, PartitionInfo, PlanStatus]]:
    deadline = time.monotonic() + timeout_s
    with Progress(console=_err, transient=True) as progress:
        task = progress.add_task("reassigning", total=len(plan))
        while True:
            rows = await _statuses(admin, plan)
            done = sum(1 for _, _, status in rows if status == "complete")
            progress.update(task, completed=done)
            if done == len(rows) or time.monotonic() > deadline:
                return rows
            await asyncio.sleep(_WAIT_POLL_S)  # another process's progress: polled


class _Coordinator:
    """How this command reaches a coordinator (``call_admin``'s options, bound once)."""

    def __init__(self, coordinator: str | None, data_dir: Path, api_key: str | None) -> None:
        self._args = (coordinator, data_dir)
        self._api_key = api_key

    def run(self, call: Callable[[AdminClient], Awaitable[_T]]) -> _T:
        return call_admin(*self._args, call, api_key=self._api_key)


def _generate(
    target: _Coordinator, topics: list[str], broker_ids: list[int], rollback: Path | None
) -> None:
    async def gather(admin: AdminClient) -> tuple[list[TopicDescription], ClusterInfo]:
        described = [await admin.describe_topic(name) for name in topics]
        return described, await admin.cluster()

    described, cluster = target.run(gather)
    racks: dict[int, str | None] = {b.broker_id: b.rack for b in cluster.brokers}
    unknown = sorted(set(broker_ids) - set(racks))
    if unknown:
        raise typer.BadParameter(f"brokers {unknown} are not live", param_hint="--brokers")
    current = _current(described)
    try:
        plan = generate_plan(current, {b: racks[b] for b in broker_ids})
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    moved = {(e.topic, e.partition) for e in plan}
    _write_rollback([e for e in current if (e.topic, e.partition) in moved], rollback)
    typer.echo(format_plan(plan))
    _err.print(f"{len(plan)} of {len(current)} partitions move")


def _write_rollback(current: list[PlanEntry], rollback: Path | None) -> None:
    text = format_plan(current)
    if rollback is not None:
        rollback.write_text(text + "\n")
        _err.print(f"current assignment (rollback plan) written to {rollback}")
    else:
        _err.print("current assignment (save it to roll back with --execute):")
        _err.print(text, markup=False, highlight=False)


def _execute(target: _Coordinator, plan: list[PlanEntry], rollback: Path | None) -> None:
    rows = target.run(lambda admin: _statuses(admin, plan))
    # A partition already moving rolls back to its replicas before that move.
    original = [
        PlanEntry(e.topic, e.partition, tuple(r for r in s.replicas if r not in s.adding_replicas))
        for e, s, _ in rows
    ]
    _write_rollback(original, rollback)
    todo = [e for e, _, status in rows if status != "complete"]

    async def start(admin: AdminClient) -> None:
        for e in todo:
            await admin.reassign_partition(e.topic, e.partition, list(e.replicas))

    target.run(start)
    typer.echo(f"started {len(todo)} reassignments ({len(plan) - len(todo)} already in place)")


def _cancel(target: _Coordinator, plan: list[PlanEntry]) -> None:
    async def cancel(admin: AdminClient) -> list[PartitionInfo]:
        return [await admin.cancel_reassignment(e.topic, e.partition) for e in plan]

    states = target.run(cancel)
    for e, state in zip(plan, states, strict=True):
        typer.echo(f"{e.topic}-{e.partition}: replicas {state.replicas} isr {state.isr}")


def _verify(
    target: _Coordinator, plan: list[PlanEntry], *, wait: bool, timeout_s: float, strict: bool
) -> None:
    if wait:
        rows = target.run(lambda admin: _wait_complete(admin, plan, timeout_s))
    else:
        rows = target.run(lambda admin: _statuses(admin, plan))
    _print_statuses(rows)
    complete = all(status == "complete" for _, _, status in rows)
    if wait and not complete:
        _err.print(f"not complete after {timeout_s:g} s")
    if (strict or wait) and not complete:
        raise typer.Exit(1)


@app.command()
def reassign(
    plan_file: Annotated[
        Path | None, typer.Argument(metavar="PLAN", help="Plan JSON file ('-': stdin).")
    ] = None,
    generate: Annotated[
        bool, typer.Option("--generate", help="Print a plan for --topic onto --brokers.")
    ] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Start the plan's moves.")] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="Tell how far the plan's moves are.")
    ] = False,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel the plan's running moves.")
    ] = False,
    status: Annotated[
        bool, typer.Option("--status", help="List every running reassignment.")
    ] = False,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="--generate: a topic to move.")
    ] = None,
    topics_file: Annotated[
        Path | None,
        typer.Option(
            "--topics-to-move-json-file",
            help='--generate: Kafka\'s {"topics": [{"topic": "t"}], "version": 1} file.',
        ),
    ] = None,
    brokers: Annotated[
        str | None, typer.Option("--brokers", help="--generate: target broker ids, e.g. 1,2,3.")
    ] = None,
    rollback: Annotated[
        Path | None,
        typer.Option("--rollback", help="Write the current assignment (rollback plan) here."),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="--execute/--verify: wait until every move is done.")
    ] = False,
    timeout_s: Annotated[float, typer.Option("--timeout", help="--wait limit (s).")] = 600.0,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Move partitions with a JSON plan (kafka-reassign-partitions)."""
    if sum([generate, execute, verify, cancel, status]) != 1:
        raise typer.BadParameter("give one of --generate, --execute, --verify, --cancel, --status")
    target = _Coordinator(coordinator, data_dir, api_key)
    if generate:
        topics = [*(topic or []), *(_topics_to_move(topics_file) if topics_file else [])]
        if not topics or brokers is None:
            raise typer.BadParameter("--generate needs --topic (repeatable) and --brokers")
        _generate(target, list(dict.fromkeys(topics)), _broker_ids(brokers), rollback)
        return
    if status:
        _print_running(target.run(lambda admin: admin.reassignments()))
        return
    if plan_file is None:
        raise typer.BadParameter("--execute, --verify and --cancel need a PLAN file")
    plan = _read_plan(plan_file)
    if cancel:
        _cancel(target, plan)
        return
    if execute:
        _execute(target, plan, rollback)
        if not wait:
            return
    _verify(target, plan, wait=wait, timeout_s=timeout_s, strict=verify)


def _print_running(listing: ReassignmentList) -> None:
    table = Table("partition", "replicas", "isr", "adding", "removing")
    for r in listing.reassignments:
        table.add_row(
            f"{r.topic}-{r.partition}",
            ",".join(map(str, r.replicas)),
            ",".join(map(str, r.isr)),
            ",".join(map(str, r.adding_replicas)) or "-",
            ",".join(map(str, r.removing_replicas)) or "-",
        )
    Console().print(table)
    if not listing.reassignments:
        typer.echo("no reassignment running")


@app.command("elect-leaders")
def elect_leaders(
    topic: Annotated[str | None, typer.Option("--topic", help="Only this topic.")] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", min=0, help="Only this partition of --topic.")
    ] = None,
    coordinator: CoordinatorOption = None,
    data_dir: DataDirOption = _DATA_DIR,
    api_key: AdminApiKeyOption = None,
) -> None:
    """Move leadership back to the preferred replica (the first one) of partitions."""
    if partition is not None and topic is None:
        raise typer.BadParameter("--partition needs --topic")
    target = _Coordinator(coordinator, data_dir, api_key)

    async def elect(admin: AdminClient) -> ElectLeadersResult:
        if topic is None:
            return await admin.elect_leaders(None)
        if partition is not None:
            return await admin.elect_leaders([(topic, partition)])
        described = await admin.describe_topic(topic)
        return await admin.elect_leaders([(topic, p.partition) for p in described.partitions])

    result = target.run(elect)
    table = Table("partition", "leader", "outcome")
    failed = 0
    for r in result.results:
        outcome = {
            None: "elected",
            "ELECTION_NOT_NEEDED": "already the preferred leader",
        }.get(r.error, r.error or "")
        failed += r.error not in (None, "ELECTION_NOT_NEEDED")
        table.add_row(
            f"{r.topic}-{r.partition}", str(r.leader) if r.leader >= 0 else "none", outcome
        )
    Console().print(table)
    elected = sum(1 for r in result.results if r.error is None)
    typer.echo(f"elected the preferred leader of {elected} partitions; {failed} could not be")
    if failed:
        raise typer.Exit(1)
