"""The pure parts of the chaos suite's network fault classes: which etcd member an etcd fault
hits (the raft leader a third of the time, every member in turn), which coordinator a
coordinator fault hits (the active controller every other time), how one-way and netem
faults rotate their targets, directions and holds, the raft leader read from ``/metrics``,
the nftables script of a one-way drop, the NFQUEUE rules and the delayer's netlink messages
and fates."""

from __future__ import annotations

import random
import socket
import struct
from collections import Counter

from loadtest.chaos import delayer
from loadtest.chaos.cluster import COORDINATORS, ETCD_MEMBERS, is_leader
from loadtest.chaos.faults import (
    CLASSES,
    NETEM_STEPS,
    coordinator_target,
    etcd_pause_hold,
    etcd_target,
    netem_plan,
    one_way_control_plan,
    one_way_plan,
)
from loadtest.chaos.network import Degradation, delayer_argv, drop_ruleset, queue_rules


def test_new_classes_are_listed_and_need_namespaces_where_they_cut() -> None:
    by_name = {c.name: c for c in CLASSES}
    assert not by_name["pause-etcd"].partitions  # a SIGSTOP works on loopback too
    for name in ("partition-etcd-member", "one-way", "netem"):
        assert by_name[name].partitions
    assert [c.name for c in CLASSES][-1] == "empty-disk"  # still last


def test_etcd_target_hits_the_leader_every_third_fault_and_every_follower() -> None:
    leader = "etcd-1"
    targets = [etcd_target(n, leader) for n in range(30)]
    assert targets[0::3] == [leader] * 10
    counts = Counter(targets)
    assert counts == {"etcd-1": 10, "etcd-0": 10, "etcd-2": 10}
    # whoever leads, a third of the faults hit it and both followers are hit
    for lead in ETCD_MEMBERS:
        hit = Counter(etcd_target(n, lead) for n in range(30))
        assert hit[lead] == 10
        assert len(hit) == 3


def test_etcd_target_without_a_known_leader_rotates_over_the_members() -> None:
    assert [etcd_target(n, None) for n in range(4)] == [*ETCD_MEMBERS, "etcd-0"]
    assert etcd_target(0, "not-a-member") == "etcd-0"


def test_every_etcd_role_gets_every_pause_hold() -> None:
    for role in range(3):
        holds = {etcd_pause_hold(n) for n in range(30) if n % 3 == role}
        assert holds == {0.5, 1.5, 3.0, 6.0}


def test_one_way_rotation_meets_every_leader_group_direction_and_hold() -> None:
    plans = [one_way_plan(n) for n in range(30)]
    assert len({p[:3] for p in plans[:18]}) == 18  # 3 leaders x 3 groups x 2 directions
    assert len({(p[0], p[1], p[3]) for p in plans[:27]}) == 27  # x 3 holds
    assert {p[1] for p in plans} == {"etcd", "followers", "proxies"}
    assert Counter(p[2] for p in plans) == {"out": 15, "in": 15}
    assert {p[3] for p in plans} == {1.0, 3.0, 5.0}


def test_coordinator_faults_hit_the_active_controller_every_other_time() -> None:
    targets = [coordinator_target(n, "coordinator-1") for n in range(30)]
    assert targets[0::2] == ["coordinator-1"] * 15
    assert targets[1::2] == ["coordinator-0"] * 15
    # no known controller: alternate
    assert [coordinator_target(n, None) for n in range(3)] == [*COORDINATORS, "coordinator-0"]


def test_netem_rotation_meets_every_leader_step_and_hold() -> None:
    plans = [netem_plan(n) for n in range(18)]
    assert len(set(plans)) == 18  # 3 leaders x 2 steps x 3 holds
    assert NETEM_STEPS[0] == Degradation(50, 20, 0.05)
    assert str(NETEM_STEPS[0]) == "50±20 ms, 5% loss"


def test_the_raft_leader_is_read_from_metrics() -> None:
    text = (
        "# HELP etcd_server_is_leader Whether or not this member is a leader.\n"
        "# TYPE etcd_server_is_leader gauge\n"
        "etcd_server_is_leader {}\n"
        "etcd_server_is_learner 0\n"
    )
    assert is_leader(text.format(1))
    assert not is_leader(text.format(0))
    assert not is_leader("etcd_server_has_leader 1\n")


def test_drop_ruleset_replaces_the_table_with_one_drop_per_source() -> None:
    script = drop_ruleset(["10.77.0.31", "10.77.0.30", "10.77.0.31"])
    lines = script.splitlines()
    # created when missing, then deleted and written whole: applying it twice is harmless
    assert lines[:3] == [
        "table inet yakchaos {}",
        "delete table inet yakchaos",
        "table inet yakchaos {",
    ]
    drops = [line.strip() for line in lines if line.strip().endswith("drop")]
    assert drops == ["ip saddr 10.77.0.30 drop", "ip saddr 10.77.0.31 drop"]
    assert "hook input" in script  # at the receiver: the sender sees no local error


def test_queue_rules_cover_both_ways_and_fail_open() -> None:
    rules = queue_rules(30)
    assert {r[4] for r in rules} == {"INPUT", "OUTPUT"}
    for rule in rules:
        assert rule[0] == "iptables"
        assert "eth0" in rule
        assert "--queue-bypass" in rule
        assert rule[rule.index("--queue-num") + 1] == "30"


def test_delayer_argv_is_bounded() -> None:
    argv = delayer_argv(30, Degradation(50, 20, 0.05), 12.0)
    assert argv[1:3] == ("-m", "loadtest.chaos.delayer")
    assert argv[argv.index("--seconds") + 1] == "12.0"
    assert argv[argv.index("--loss") + 1] == "0.05"


def _attributes(message: bytes) -> dict[int, bytes]:
    found, at = {}, 16 + 4
    while at < len(message):
        size, kind = struct.unpack_from("=HH", message, at)
        found[kind] = message[at + 4 : at + size]
        at += (size + 3) & ~3
    return found


def test_verdict_message_layout() -> None:
    message = delayer.verdict_message(7, 0x01020304, delayer.NF_ACCEPT)
    length, kind, flags, _seq, _pid = struct.unpack_from("=IHHII", message)
    assert length == len(message) == 16 + 4 + 12
    assert kind == (3 << 8) | 1
    assert flags == 1
    assert struct.unpack_from("!BBH", message, 16) == (socket.AF_UNSPEC, 0, 7)
    assert _attributes(message)[2] == struct.pack("!II", 1, 0x01020304)


def test_config_messages_bind_then_ask_for_metadata_only() -> None:
    bind = delayer.config_message(3, 1, bind=True)
    assert struct.unpack_from("=IHHII", bind)[1:3] == ((3 << 8) | 2, 1 | 4)
    assert _attributes(bind)[1] == struct.pack("!BxH", 1, 0)
    params = _attributes(delayer.config_message(3, 2, max_len=500))
    assert params[2][:5] == struct.pack("!IB", 0, delayer.NFQNL_COPY_META)
    assert params[3] == struct.pack("!I", 500)


def _packet(packet_id: int) -> bytes:
    header = struct.pack("!IHB", packet_id, 0x0800, 1) + b"\0"  # padded to 8
    mark = struct.pack("=HH", 8, 3) + b"\0" * 4  # another attribute first
    attribute = struct.pack("=HH", 4 + 7, 1) + header[:7] + b"\0"
    body = struct.pack("!BBH", 2, 0, 3) + mark + attribute
    return struct.pack("=IHHII", 16 + len(body), 3 << 8, 0, 0, 0) + body


def test_packet_ids_are_read_from_every_message_of_a_read() -> None:
    error = struct.pack("=IHHII", 16 + 4, 2, 0, 0, 0) + struct.pack("=i", 0)
    assert delayer.packet_ids(_packet(5) + error + _packet(9)) == [5, 9]
    assert delayer.packet_ids(b"") == []
    assert list(delayer._errors(error)) == [0]


def test_fate_drops_about_the_loss_and_delays_within_the_jitter() -> None:
    rng = random.Random(1)
    fates = [delayer.fate(rng, 50, 20, 0.05) for _ in range(10_000)]
    dropped = sum(f is None for f in fates)
    assert 400 < dropped < 600
    delays = [f for f in fates if f is not None]
    assert min(delays) >= 0.030
    assert max(delays) <= 0.070
    assert delayer.fate(rng, 5, 20, 0.0) is not None  # never negative, never dropped
    assert min(delayer.fate(rng, 5, 20, 0.0) or 0 for _ in range(100)) >= 0.0


def test_control_plane_one_way_rotation_meets_every_subject_direction_and_hold() -> None:
    plans = [one_way_control_plan(n) for n in range(30)]
    assert len(set(plans[:12])) == 12  # 2 subjects x 2 directions x 3 holds
    assert Counter(p[0] for p in plans) == {"etcd-member": 16, "controller": 14}
    assert Counter(p[1] for p in plans) == {"out": 15, "in": 15}
    assert {p[2] for p in plans} == {1.0, 3.0, 5.0}
