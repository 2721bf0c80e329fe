"""Partition reassignment, the admin half (pure): validate a target, start or cancel a move.

Kafka's AlterPartitionReassignments, KRaft flavour. A move is recorded in the partition state
itself, so it survives a controller failover:

- **start** (target ``T`` over original replicas ``O``): ``replicas = T + (O - T)``,
  ``adding_replicas = T - O``, ``removing_replicas = O - T``; the ISR keeps only replicas, so
  the new ones start as followers outside it. Starting over a running move replaces its target
  (the original replicas stay those before the first move).
- **complete**: ``reconcile`` (``_complete_reassignment``) once every target replica is in the
  ISR — leadership moves into the target if the leader is being removed, the removed replicas
  leave ``replicas`` and the ISR, both lists are emptied.
- **cancel**: back to the set ``O``, in the order of the merged list (as Kafka's revert: the
  partition state does not keep ``O``'s order, so the preferred leader may change); adding
  replicas leave the ISR; a leader that was among them is replaced by the next ``reconcile``
  like a dead one.

Every change bumps ``partition_epoch`` so that a leader's pending ISR change (a compare-and-swap
on it) cannot overwrite the move. Validation uses Kafka's error name,
``INVALID_REPLICA_ASSIGNMENT``: an empty list, a repeated broker, a broker that is not
registered, a broker being decommissioned, or fewer replicas than the topic's
``min.insync.replicas``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from yak.errors import InvalidReplicaAssignmentError
from yak.metadata.models import PartitionState
from yak.topic_config import MIN_INSYNC_REPLICAS

__all__ = ["cancel_reassignment", "start_reassignment", "validate_target"]


def validate_target(
    replicas: Sequence[int],
    live_brokers: Collection[int],
    configs: Mapping[str, str],
    *,
    draining: Collection[int] = (),
) -> tuple[int, ...]:
    """``replicas`` as a target replica list, or ``InvalidReplicaAssignmentError``.

    ``draining``: brokers being decommissioned (a target must not keep or add one)."""
    if not replicas:
        raise InvalidReplicaAssignmentError("the replica list is empty")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(f"replicas {list(replicas)} repeat a broker")
    unknown = sorted(set(replicas) - set(live_brokers))
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"replicas {list(replicas)} name brokers that are not live: {unknown}",
            brokers=unknown,
        )
    drained = sorted(r for r in replicas if r in draining)
    if drained:
        raise InvalidReplicaAssignmentError(
            f"replicas {list(replicas)} name brokers being decommissioned: {drained}",
            brokers=drained,
        )
    min_insync = _min_insync(configs)
    if len(replicas) < min_insync:
        raise InvalidReplicaAssignmentError(
            f"{len(replicas)} replicas are fewer than {MIN_INSYNC_REPLICAS}={min_insync}: "
            "acks=all writes could never succeed",
            config=MIN_INSYNC_REPLICAS,
        )
    return tuple(replicas)


def start_reassignment(state: PartitionState, target: Sequence[int]) -> PartitionState:
    """``state`` with a move to ``target`` recorded (see the module doc)."""
    original = state.original_replicas
    target = tuple(target)
    replicas = target + tuple(r for r in original if r not in target)
    return _with_replicas(
        state,
        replicas,
        adding=tuple(r for r in target if r not in original),
        removing=tuple(r for r in original if r not in target),
    )


def cancel_reassignment(state: PartitionState) -> PartitionState | None:
    """``state`` back on its original replicas; None when no move is running."""
    if not state.reassigning:
        return None
    return _with_replicas(state, state.original_replicas, adding=(), removing=())


def _with_replicas(
    state: PartitionState,
    replicas: tuple[int, ...],
    *,
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> PartitionState:
    # The ISR is never empty (reconcile's rule): if no member stays a replica, the first one is
    # kept until a replica catches up or the leader is replaced.
    isr = tuple(r for r in state.isr if r in replicas) or state.isr[:1]
    return state.model_copy(
        update={
            "replicas": replicas,
            "adding_replicas": adding,
            "removing_replicas": removing,
            "isr": isr,
            "isr_log_dirs": state.log_dirs_of(isr),
            "partition_epoch": state.partition_epoch + 1,
        }
    )


def _min_insync(configs: Mapping[str, str]) -> int:
    try:
        return max(int(configs.get(MIN_INSYNC_REPLICAS, "1")), 1)
    except ValueError:
        return 1
