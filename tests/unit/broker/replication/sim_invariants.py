"""The invariants of docs/replication.md, checked on a simulated cluster after every step.

1. No acks=all batch is lost or reordered: the current leader (the controller's, once it runs
   the machine of the current leader epoch) holds every acknowledged batch at its offset, and
   batches acknowledged in production order sit at increasing offsets.
2. All live replicas hold the same batches at every offset below both their high watermarks.
3. A leader's high watermark never goes back while it leads (per ``LeaderPartition``).
4. A follower done truncating (``FETCHING``) for the current leader holds a prefix of its log.
5. Every log keeps ``log start <= high watermark <= log end``.
6. Every live member of the committed ISR holds the current leader's log below the leader's HW,
   and every acknowledged batch: what makes any ISR member a safe leader (KIP-101's truncation,
   KIP-497's maximal ISR and Kafka's "caught up to the epoch start" rule for expansions all
   exist for this).
7. No follower counts as caught up through an incremental fetch session (KIP-227) later than
   the last fetch that reached the leader from a session of that follower fetching the
   partition in this leader epoch (``FetchPath.heard``): the ISR never keeps a follower whose
   session stopped fetching it (forgot it, was closed, evicted or replaced, or its broker died).
8. Empty-disk restarts: a replica whose log was lost (its disk's folder id is not the one its
   ISR entry records) is never the controller's leader, and no broker runs a leader machine
   for it; 6 holds for every ISR member whose entry names its disk, so a wiped replica joins
   the ISR again only once it holds every acknowledged batch (KIP-903/KIP-858).

Logs are read through ``Log.read`` and compared by batch headers (the batch id is in the
timestamp); a replica's contents are re-read only when the cluster bumped its ``version``.
"""

from __future__ import annotations

from tests.unit.broker.replication.sim_cluster import BASE_TS, Cluster, Replica
from yak.record.batch_header import iter_batches
from yak_broker.replication.state.follower_partition import FollowerStatus
from yak_broker.replication.state.leader_partition import LeaderPartition
from yak_broker.storage.log import FetchIsolation, Log

__all__ = ["Checker", "contents"]

Contents = dict[int, tuple[int, int]]  # offset -> (batch leader epoch, batch id)


def contents(log: Log) -> Contents:
    """Every record offset of ``log`` with its batch's leader epoch and id."""
    out: Contents = {}
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        records = log.read(offset, 1 << 20, FetchIsolation.LOG_END).records
        if not records:
            break
        for _, header in iter_batches(records):
            entry = (header.partition_leader_epoch, header.max_timestamp - BASE_TS)
            for record in range(header.base_offset, header.next_offset):
                out[record] = entry
            offset = header.next_offset
    return out


class Checker:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._cache: dict[Replica, tuple[int, Contents]] = {}
        self._hw_seen: dict[LeaderPartition, int] = {}

    def contents(self, replica: Replica) -> Contents:
        cached = self._cache.get(replica)
        if cached is None or cached[0] != replica.version:
            cached = (replica.version, contents(replica.log))
            self._cache[replica] = cached
        return cached[1]

    def check(self) -> None:
        cluster = self.cluster
        alive = [b for b in cluster.brokers.values() if b.alive]
        current = {r for b in alive for r in b.replicas.values()}
        self._cache = {r: c for r, c in self._cache.items() if r in current}
        for p in cluster.partitions:
            replicas = {b.broker_id: b.replicas[p] for b in alive}
            for broker_id, replica in replicas.items():
                log = replica.log
                assert log.log_start_offset <= log.high_watermark <= log.log_end_offset, (
                    f"broker {broker_id} p{p}: {log}"
                )
            self._check_acked(p, replicas)
            self._check_agreement(p, replicas)
            self._check_leader_hw(replicas)
            self._check_prefix(p, replicas)
            self._check_isr(p, replicas)
            self._check_session_progress(p, replicas)
            self._check_lost_logs(p, replicas)

    def _current_leader(self, p: int, replicas: dict[int, Replica]) -> Replica | None:
        state = self.cluster.states[p]
        replica = replicas.get(state.leader)
        machine = replica.leader if replica is not None else None
        if replica is None or machine is None or machine.leader_epoch != state.leader_epoch:
            return None
        return replica

    def _check_acked(self, p: int, replicas: dict[int, Replica]) -> None:
        batches = self.cluster.acked_batches[p]
        for (before, at), (after, later) in zip(sorted(batches), sorted(batches)[1:], strict=False):
            assert at < later, f"p{p}: #{before} acked at {at}, #{after} at {later}: reordered"
        leader = self._current_leader(p, replicas)
        if leader is None:
            return
        held = self.contents(leader)
        for offset, batch_id in self.cluster.acked[p].items():
            entry = held.get(offset)
            assert entry is not None, f"p{p}: acknowledged #{batch_id} at {offset} is missing"
            assert entry[1] == batch_id, (
                f"p{p}: acknowledged #{batch_id} at {offset} is {entry} on the leader "
                f"{self.cluster.states[p].leader}"
            )

    def _check_agreement(self, p: int, replicas: dict[int, Replica]) -> None:
        ids = sorted(replicas)
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                ra, rb = replicas[a], replicas[b]
                low = max(ra.log.log_start_offset, rb.log.log_start_offset)
                high = min(ra.log.high_watermark, rb.log.high_watermark)
                if low >= high:
                    continue
                ca, cb = self.contents(ra), self.contents(rb)
                for offset in range(low, high):
                    assert ca.get(offset) == cb.get(offset), (
                        f"p{p}: brokers {a} and {b} differ at {offset} below the HWs "
                        f"({ra.log}, {rb.log}): {ca.get(offset)} vs {cb.get(offset)}"
                    )

    def _check_leader_hw(self, replicas: dict[int, Replica]) -> None:
        for broker_id, replica in replicas.items():
            machine = replica.leader
            if machine is None:
                continue
            hw = replica.log.high_watermark
            seen = self._hw_seen.get(machine, hw)
            assert hw >= seen, f"leader {broker_id} p{replica.partition}: HW {seen} -> {hw}"
            self._hw_seen[machine] = hw

    def _check_prefix(self, p: int, replicas: dict[int, Replica]) -> None:
        leader = self._current_leader(p, replicas)
        if leader is None:
            return
        state = self.cluster.states[p]
        theirs = self.contents(leader)
        for broker_id, replica in replicas.items():
            machine = replica.follower
            if (
                machine is None
                or machine.status is not FollowerStatus.FETCHING
                or (machine.leader_id, machine.leader_epoch) != (state.leader, state.leader_epoch)
            ):
                continue
            for offset, entry in self.contents(replica).items():
                assert theirs.get(offset) == entry, (
                    f"p{p}: follower {broker_id} diverges from leader {state.leader} at "
                    f"{offset}: {entry} vs {theirs.get(offset)}"
                )

    def _check_isr(self, p: int, replicas: dict[int, Replica]) -> None:
        state = self.cluster.states[p]
        leader = self._current_leader(p, replicas)
        committed = self.contents(leader) if leader is not None else {}
        hw = leader.log.high_watermark if leader is not None else 0
        for member in state.isr:
            replica = replicas.get(member)
            if replica is None or self.cluster.lost(state, member):
                continue  # dead, or known to have lost its log: never elected (8)
            held = self.contents(replica)
            for offset in range(leader.log.log_start_offset if leader else 0, hw):
                assert held.get(offset) == committed.get(offset), (
                    f"p{p}: ISR member {member} has {held.get(offset)} at {offset}, below the "
                    f"HW {hw} of leader {state.leader} which has {committed.get(offset)}"
                )
            for offset, batch_id in self.cluster.acked[p].items():
                entry = held.get(offset)
                assert entry is not None, f"p{p}: ISR member {member} lacks acked #{batch_id}"
                assert entry[1] == batch_id, f"p{p}: ISR member {member} has {entry} at {offset}"

    def _check_lost_logs(self, p: int, replicas: dict[int, Replica]) -> None:
        cluster = self.cluster
        state = cluster.states[p]
        registered = cluster.registered.get(state.leader)
        assert registered is None or not state.log_dir_lost(state.leader, registered), (
            f"p{p}: leader {state.leader} elected with a lost log ({state})"
        )
        for broker_id, replica in replicas.items():
            machine = replica.leader
            known = replica.state
            if machine is None or machine.retired or known is None:
                continue
            assert not cluster.lost(known, broker_id), (
                f"p{p}: {broker_id} leads epoch {machine.leader_epoch} on an empty disk"
            )

    def _check_session_progress(self, p: int, replicas: dict[int, Replica]) -> None:
        heard = self.cluster.fetching.heard
        for broker_id, replica in replicas.items():
            machine = replica.leader
            if machine is None or machine.retired:
                continue
            leo = replica.log.log_end_offset
            for follower, progress in machine.followers.items():
                session = progress.session
                if (
                    session is None
                    or session.closed
                    or progress.log_end_offset < leo
                    or session.last_fetch_ms <= progress.last_caught_up_ms
                ):
                    continue  # caught up by its own fetches, not through the session
                last = heard.get((machine, follower))
                assert last is not None, f"p{p}: {follower} never fetched it from {broker_id}"
                assert last >= session.last_fetch_ms, (
                    f"p{p}: leader {broker_id} counts follower {follower} caught up at "
                    f"{session.last_fetch_ms} through a session that fetched p{p} last at {last}"
                )
