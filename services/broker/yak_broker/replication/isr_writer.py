"""AlterPartition: the leader changes a partition's ISR in etcd with a compare-and-swap.

Only the leader of the current leader epoch changes the ISR, and only from the state it last
saw: the write succeeds if the key still holds the same leader, leader epoch and partition epoch
(so the controller's concurrent change — a new leader, a dead broker dropped — wins, and the
leader retries from the state its watch then delivers). The new state carries
``partition_epoch + 1``; every other field is kept as read (reassignment fields included).

The broker's metadata watch delivers the committed state back to the replica manager, which
hands it to the partition's ``LeaderPartition``; ``alter_isr`` only reports success.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from yak.errors import MetadataStoreError
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState
from yak.metadata.store import Compare, MetadataStore, PutOp

__all__ = ["alter_isr"]

_log = logging.getLogger(__name__)


async def alter_isr(
    store: MetadataStore,
    keyspace: Keyspace,
    *,
    topic: str,
    partition: int,
    leader_id: int,
    leader_epoch: int,
    expected_partition_epoch: int,
    new_isr: Sequence[int],
) -> PartitionState | None:
    """Write ``new_isr`` if the partition is still as the leader saw it; the new state or None."""
    key = keyspace.partition(topic, partition)
    try:
        current = await store.get(key)
        if current is None:
            return None
        state = PartitionState.decode(current.value)
        if (state.leader, state.leader_epoch, state.partition_epoch) != (
            leader_id,
            leader_epoch,
            expected_partition_epoch,
        ):
            _log.info(
                "ISR change of %s-%d dropped: state moved to leader %d epoch %d/%d",
                topic,
                partition,
                state.leader,
                state.leader_epoch,
                state.partition_epoch,
            )
            return None
        if not set(new_isr) <= set(state.replicas) or leader_id not in new_isr:
            raise ValueError(f"ISR {list(new_isr)} must hold the leader and only replicas")
        changed = state.model_copy(
            update={"isr": tuple(new_isr), "partition_epoch": state.partition_epoch + 1}
        )
        result = await store.txn(
            [Compare.mod_revision(key, current.mod_revision)], [PutOp(key, changed.encode())]
        )
    except MetadataStoreError as exc:
        _log.warning("ISR change of %s-%d failed: %s", topic, partition, exc)
        return None
    if not result.succeeded:
        return None
    _log.info(
        "ISR of %s-%d: %s -> %s (partition epoch %d)",
        topic,
        partition,
        list(state.isr),
        list(new_isr),
        changed.partition_epoch,
    )
    return changed
