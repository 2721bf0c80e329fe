"""The member side of the consumer-group protocol, as pure functions (``docs/consumer-groups.md``,
"Member side").

A consumer instance (a *member*) is served by one rest-proxy at a time, its *holder*, which keeps
the member's state in memory (``member_state.Member``). Each function takes that state (and
what was read from etcd, and ``now_ms``) and returns a ``Step``: the member's next state and the
``Write`` that must succeed first — guards (mod_revisions that must still hold) and operations,
as plain values (``member_state``), which ``member_store.MemberStore`` turns into etcd
transactions. No I/O, no clock, no pydantic edits; ``settle`` fills in the revision a write got.

Invariants:

- **Ownership.** A member reads and commits only partitions in ``owned`` ∩ what it is granted
  (``current_assignment[m]`` when subscribed, else its manual assignment). ``reconcile``
  changes ``owned`` in one write guarded by the member record's, the state key's and the
  positions' mod_revisions, releasing what it may no longer own (auto-committing their
  positions) in the same write: a partition never has two owners.
- **Fencing.** Commits are guarded by the member record's mod_revision and, for a subscribed
  member, the state key's: a commit decided on an outdated assignment fails, and is decided
  again on what etcd holds (``FENCED_MEMBER_EPOCH`` if the partition moved).
- **Holding.** The positions record names the holder. Only the holder writes the member's
  record and positions, always guarded by both keys' mod_revisions, so a holder that lost the
  member never overwrites what the next one wrote. Another proxy ``ask``s (``wanted_by``); the
  holder answers with ``release`` (positions and auto-commits written, ``holder := wanted_by``);
  a holder that does not answer is taken over (``may_claim`` with ``asked``) from what etcd
  holds: the records polled since its last write are delivered again — at-least-once, never
  loss.
- **Positions** live in memory and are written behind (``flush``): on commit, rebalance, seek
  and release, and at an interval the caller keeps. ``stored`` is what etcd holds; it is never
  ahead of ``positions``. With auto-commit, ``processed`` holds the positions the client had
  when it polled again (Kafka's rule: asking for more acknowledges what came before), committed
  by the next ``flush``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from yak.errors import FencedMemberEpochError, IllegalStateError
from yak.types import TopicPartition
from yak_rest_proxy.consume.membership.member_state import (
    DeleteMember,
    Grant,
    Guard,
    Key,
    Member,
    MemberRead,
    Offsets,
    Op,
    PutCommit,
    PutMember,
    PutPositions,
    Step,
    StoredPositions,
    Write,
    due_commits,
    partition_set,
)

__all__ = [
    "adopt",
    "ask",
    "asked",
    "assign",
    "claim",
    "commit",
    "flush",
    "leave",
    "may_claim",
    "polled",
    "positioned",
    "reconcile",
    "refresh",
    "release",
    "require_owned",
    "seek",
    "settle",
    "subscribe",
    "unpositioned",
    "unsubscribe",
]


# -- taking a member over ---------------------------------------------------------------------


def adopt(read: MemberRead, holder: str) -> Member:
    """The member as etcd holds it, held by ``holder``."""
    record = read.record
    owned = partition_set(record.owned)
    return Member(
        group=read.group,
        member_id=read.member_id,
        holder=holder,
        base=record,
        revision=read.revision,
        subscription=record.subscription,
        pattern=record.subscription_pattern,
        manual=partition_set(record.manual_assignment),
        owned=owned,
        epoch=record.member_epoch,
        grant=read.grant,
        positions={tp: o for tp, o in read.stored.positions.items() if tp in owned},
        stored=read.stored.positions,
        positions_revision=read.stored.revision,
    )


def may_claim(read: MemberRead, holder: str, asked: int = 0) -> bool:
    """Whether ``holder`` may take the member now: nobody holds it, it does, or the holder left
    its request unanswered (``asked``: the revision of the request, still the latest write)."""
    stored = read.stored
    return stored.holder in ("", holder) or (asked > 0 and stored.revision == asked)


def claim(read: MemberRead, holder: str) -> Step:
    """Take the member (``may_claim`` must hold): name ``holder`` in its positions record."""
    member = adopt(read, holder)
    stored = read.stored
    if stored.revision and stored.holder == holder and not stored.wanted_by:
        return Step(member)
    put = PutPositions(stored.positions, member.epoch, holder)
    return Step(member, _write(member, (Key.MEMBER, Key.POSITIONS), (put,)))


def ask(read: MemberRead, holder: str) -> Write:
    """Ask the member's holder to hand it to ``holder`` (it answers with ``release``)."""
    stored = read.stored
    put = PutPositions(stored.positions, stored.member_epoch, stored.holder, wanted_by=holder)
    guards = (Guard(Key.MEMBER, read.revision), Guard(Key.POSITIONS, stored.revision))
    return Write(read.group, read.member_id, read.record.lease_id, guards, (put,))


def asked(member: Member, stored: StoredPositions) -> Member:
    """``member`` once another proxy's ``ask`` rewrote its positions record (seen by a watch):
    the record's revision is the guard now; the holder's positions stay the truth."""
    if stored.holder != member.holder or stored.revision <= member.positions_revision:
        return member
    return replace(member, stored=stored.positions, positions_revision=stored.revision)


def refresh(member: Member, read: MemberRead) -> Member | None:
    """``member`` brought up to what etcd holds after a write failed; None once another proxy
    holds it. The holder's positions are the truth while it holds: they stay."""
    if read.stored.holder != member.holder:
        return None
    fresh = adopt(read, member.holder)
    kept = {tp: o for tp, o in member.positions.items() if tp in fresh.owned}
    return replace(
        fresh,
        positions={**fresh.positions, **kept},
        processed=member.processed,
        auto_committed=member.auto_committed,
    )


# -- the group's assignment -------------------------------------------------------------------


def reconcile(member: Member, grant: Grant, now_ms: int) -> Step:
    """Take what the member is granted, releasing what it no longer is: the released partitions'
    positions are dropped and, with auto-commit, committed in the same write."""
    if grant != member.grant:
        member = replace(member, grant=grant)
    granted, epoch = member.granted, member.granted_epoch
    if granted == member.owned and epoch == member.epoch:
        return Step(member)
    released = member.owned - granted
    commits: tuple[Op, ...] = ()
    if member.auto_commit:
        commits = tuple(
            PutCommit(tp, member.positions[tp], epoch, now_ms)
            for tp in sorted(released)
            if tp in member.positions
        )
    positions = _without(member.positions, released)
    after = replace(
        member,
        owned=granted,
        epoch=epoch,
        positions=positions,
        stored=positions,
        processed=_without(member.processed, released),
        auto_committed=_without(member.auto_committed, released),
    )
    ops = (*commits, PutMember(after), PutPositions(positions, epoch, member.holder))
    return Step(after, _write(member, (Key.MEMBER, Key.STATE, Key.POSITIONS), ops))


def subscribe(member: Member, topics: Iterable[str], pattern: str | None) -> Step:
    if member.manual:
        raise IllegalStateError(
            "the instance has a manual assignment; subscription and assignment are mutually "
            "exclusive (delete the assignment by creating a new instance)"
        )
    return _put_record(
        member, replace(member, subscription=tuple(dict.fromkeys(topics)), pattern=pattern)
    )


def unsubscribe(member: Member) -> Step:
    return _put_record(member, replace(member, subscription=(), pattern=None))


def assign(member: Member, partitions: Iterable[TopicPartition]) -> Step:
    if member.subscribed:
        raise IllegalStateError(
            "the instance is subscribed; subscription and assignment are mutually exclusive "
            "(unsubscribe first)"
        )
    return _put_record(member, replace(member, manual=frozenset(partitions)))


# -- positions --------------------------------------------------------------------------------


def unpositioned(member: Member) -> list[TopicPartition]:
    """Owned partitions without a position yet (they start at the committed offset)."""
    return sorted(member.owned - member.positions.keys())


def positioned(member: Member, found: Offsets) -> Member:
    """Start positions for owned partitions that still have none."""
    new = {tp: o for tp, o in found.items() if tp in member.owned and tp not in member.positions}
    return replace(member, positions={**member.positions, **new}) if new else member


def polled(member: Member, start: Offsets, reached: Offsets) -> Member:
    """After a poll that began at ``start`` (every position then) and read up to ``reached``:
    the positions advance and ``start`` counts as processed. A partition whose position moved
    meanwhile (a seek, a release, another poll) is left as it is now."""
    positions, processed = dict(member.positions), dict(member.processed)
    for tp, offset in start.items():
        if tp not in member.owned or member.positions.get(tp) != offset:
            continue
        processed[tp] = offset
        if tp in reached:
            positions[tp] = reached[tp]
    return replace(member, positions=positions, processed=processed)


def require_owned(member: Member, partitions: Iterable[TopicPartition]) -> None:
    """Refuse (``ILLEGAL_STATE``) partitions the member does not own."""
    missing = sorted(set(partitions) - member.owned)
    if missing:
        shown = ", ".join(f"{t}-{p}" for t, p in missing)
        raise IllegalStateError(f"consumer instance {member.member_id!r} is not assigned {shown}")


def seek(member: Member, offsets: Offsets) -> Step:
    """Move positions of owned partitions; written through."""
    require_owned(member, offsets)
    positions = {**member.positions, **offsets}
    after = replace(member, positions=positions, stored=positions)
    put = PutPositions(positions, member.epoch, member.holder)
    return Step(after, _write(member, (Key.MEMBER, Key.POSITIONS), (put,)))


# -- commits and writes behind ----------------------------------------------------------------


def commit(
    member: Member, offsets: Offsets | None, now_ms: int, member_epoch: int | None = None
) -> Step:
    """Commit ``offsets`` (next offsets to read; None: every position) if the member owns them
    all, else ``FENCED_MEMBER_EPOCH``; the positions are written in the same write if they
    moved. An offset this holder already committed is not written again (as auto-commit
    does): a consumer committing every second, with most partitions quiet, rewrote every one
    of them, each a put of etcd's raft log; a commit that changes nothing writes nothing."""
    if member_epoch is not None and member_epoch != member.epoch:
        raise FencedMemberEpochError(
            f"member epoch {member_epoch} is stale; the member is at epoch {member.epoch}",
            group=member.group,
            instance=member.member_id,
            member_epoch=member.epoch,
        )
    if offsets is None:
        offsets = {tp: o for tp, o in member.positions.items() if tp in member.owned}
        if not offsets:
            return Step(member)
    not_owned = sorted(set(offsets) - (member.owned & member.granted))
    if not_owned:
        raise _fenced(member, ", ".join(f"{t}-{p}" for t, p in not_owned))
    commits = [
        PutCommit(tp, o, member.epoch, now_ms)
        for tp, o in sorted(offsets.items())
        if member.auto_committed.get(tp) != o
    ]
    after = replace(
        member,
        processed=_without(member.processed, offsets),
        auto_committed={**member.auto_committed, **offsets},
    )
    if not commits and member.positions == member.stored:
        return Step(after)
    return _with_positions(member, after, commits)


def flush(member: Member, now_ms: int) -> Step:
    """Write behind: the positions if they moved, and the due auto-commits."""
    due = due_commits(member)
    if not due and member.positions == member.stored:
        return Step(member)
    commits = [PutCommit(tp, o, member.epoch, now_ms) for tp, o in sorted(due.items())]
    after = replace(member, auto_committed={**member.auto_committed, **due})
    return _with_positions(member, after, commits)


def release(member: Member, now_ms: int, to: str = "") -> Write:
    """Hand the member over: what ``flush`` writes, and ``to`` (the proxy that asked; "": none)
    named holder. The member is no longer this proxy's once it succeeded."""
    due = due_commits(member)
    ops: list[Op] = [PutCommit(tp, o, member.epoch, now_ms) for tp, o in sorted(due.items())]
    ops.append(PutPositions(member.positions, member.epoch, to))
    keys = [Key.MEMBER, Key.POSITIONS]
    if due and member.subscribed:
        keys.append(Key.STATE)
    return _write(member, keys, ops)


def leave(member: Member) -> Write:
    """Delete the member (its record and positions)."""
    return Write(member.group, member.member_id, member.base.lease_id, (), (DeleteMember(),))


def settle(step: Step, revision: int) -> Member:
    """The member once ``step.write`` succeeded at ``revision``."""
    member, write = step.member, step.write
    if write is None:
        return member
    if any(isinstance(op, PutMember) for op in write.ops):
        member = replace(member, revision=revision)
    if any(isinstance(op, PutPositions) for op in write.ops):
        member = replace(member, positions_revision=revision)
    if any(guard.key is Key.STATE for guard in write.guards):
        member = replace(member, grant=member.grant._replace(as_of=revision))
    return member


# -- helpers ----------------------------------------------------------------------------------


def _with_positions(member: Member, after: Member, commits: list[PutCommit]) -> Step:
    """A write of ``commits`` (fenced) and, if they moved, the positions."""
    keys = [Key.MEMBER]
    if commits and member.subscribed:
        keys.append(Key.STATE)
    ops: list[Op] = list(commits)
    if member.positions != member.stored:
        keys.append(Key.POSITIONS)
        ops.append(PutPositions(member.positions, member.epoch, member.holder))
        after = replace(after, stored=member.positions)
    return Step(after, _write(member, keys, ops))


def _put_record(member: Member, after: Member) -> Step:
    return Step(after, _write(member, (Key.MEMBER,), (PutMember(after),)))


def _write(member: Member, keys: Iterable[Key], ops: Iterable[Op]) -> Write:
    known = {
        Key.MEMBER: member.revision,
        Key.STATE: member.grant.revision,
        Key.POSITIONS: member.positions_revision,
    }
    guards = tuple(Guard(key, known[key]) for key in keys)
    return Write(member.group, member.member_id, member.base.lease_id, guards, tuple(ops))


def _without(offsets: Offsets, partitions: Iterable[TopicPartition]) -> Offsets:
    drop = set(partitions)
    return {tp: o for tp, o in offsets.items() if tp not in drop}


def _fenced(member: Member, what: str) -> FencedMemberEpochError:
    return FencedMemberEpochError(
        f"consumer instance {member.member_id!r} does not own {what} "
        f"(member epoch {member.epoch}); it was reassigned or never assigned",
        group=member.group,
        instance=member.member_id,
    )
