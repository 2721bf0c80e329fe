"""The snapshot codec: exact round trips, run compression, and refusal of bad bytes."""

from __future__ import annotations

import struct
import zlib

import pytest

from tests.unit.broker.share.state.support import ACCEPT, REJECT, batch, filled, states
from yak.errors import CorruptShareStateError
from yak_broker.share.state.records import (
    DeadLetterReason,
    DelayWatermark,
    LogRecord,
    RecordState,
    Run,
    ShareSettings,
    ShareSnapshot,
)
from yak_broker.share.state.share_partition import SharePartition
from yak_broker.share.state.snapshot import VERSION, decode_snapshot, encode_snapshot


def busy() -> SharePartition:
    """A typical window: 2,000 in flight; members holding runs; accepted, rejected, released."""
    m = SharePartition(ShareSettings(), start_offset=10_000, leader_epoch=3)
    m.admit([LogRecord(o, 1_700_000_000_000 + o) for o in range(10_000, 12_000)], 12_000)
    for n, member in enumerate(("worker-0f8c2e", "worker-77a1d0", "worker-c40b19", "worker-9e2")):
        m.acquire(member, 1_000 + n, 400)
    first = m.acquire("worker-0f8c2e", 2_000, 100)[0].offset
    m.acknowledge("worker-0f8c2e", [batch(first, first + 49, ACCEPT)], 2_001)
    m.acknowledge("worker-77a1d0", [batch(10_400, 10_409, REJECT)], 2_002)
    return m


def test_a_snapshot_round_trips_exactly() -> None:
    m = busy()
    snapshot = m.snapshot()
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot


def test_a_typical_window_encodes_in_a_few_hundred_bytes() -> None:
    m = busy()
    data = encode_snapshot(m.snapshot())
    assert m.in_flight == 2_000
    assert len(m.snapshot().runs) == 8
    assert len(data) < 450, len(data)


def test_runs_carry_their_oldest_timestamp_and_a_restore_re_encodes_identically() -> None:
    m = filled(range(4))
    m.acquire("a", 0, 4)
    (run,) = m.snapshot().runs
    assert run == Run(0, 3, RecordState.ACQUIRED, 1, "a", 1_000, DeadLetterReason.NONE, 100)
    data = encode_snapshot(m.snapshot())
    restored = SharePartition.restore(decode_snapshot(data), m.settings, leader_epoch=0)
    assert encode_snapshot(restored.snapshot()) == data
    assert states(restored) == states(m)


def test_gaps_split_runs_and_survive_the_round_trip() -> None:
    m = filled([0, 1, 5, 6], next_offset=9)
    snapshot = decode_snapshot(encode_snapshot(m.snapshot()))
    assert [(r.first_offset, r.last_offset) for r in snapshot.runs] == [(0, 1), (5, 6)]
    assert (snapshot.start_offset, snapshot.scan_offset) == (0, 9)


def test_the_header_fields_round_trip() -> None:
    m = SharePartition(
        ShareSettings(), start_offset=7, leader_epoch=12, delay_watermark=DelayWatermark(55, 9)
    )
    m.admit([], 20)
    snapshot = decode_snapshot(encode_snapshot(m.snapshot()))
    assert snapshot == ShareSnapshot(12, 7, 20, 20, DelayWatermark(55, 9), ())


# --- bad bytes ---------------------------------------------------------------------------------


def _resealed(body: bytes) -> bytes:
    """``body`` with a correct CRC: structure checks, not the checksum, must catch it."""
    return body + struct.pack(">I", zlib.crc32(body))


def _good() -> bytes:
    m = filled(range(3))
    m.acquire("a", 0, 2)
    return encode_snapshot(m.snapshot())


@pytest.mark.parametrize("cut", [0, 1, 10, 56, -1, -5, -33])
def test_truncated_bytes_are_refused(cut: int) -> None:
    data = _good()
    with pytest.raises(CorruptShareStateError):
        decode_snapshot(data[:cut])


def test_every_flipped_byte_is_refused() -> None:
    data = _good()
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x40
        with pytest.raises(CorruptShareStateError):
            decode_snapshot(bytes(bad))


def test_an_unknown_version_is_refused_by_name() -> None:
    data = bytearray(_good())
    data[2] = VERSION + 1
    with pytest.raises(CorruptShareStateError, match="version 2 is unknown"):
        decode_snapshot(bytes(data))


def test_other_bytes_are_refused_by_their_magic() -> None:
    with pytest.raises(CorruptShareStateError, match="magic"):
        decode_snapshot(b"XX" + _good()[2:])


def _snapshot(*runs: Run, start: int = 0, scan: int = 10) -> bytes:
    body = encode_snapshot(ShareSnapshot(0, 0, start, scan, DelayWatermark(0), runs))
    return _resealed(body[:-4])


_A = RecordState.AVAILABLE
_Q = RecordState.ACQUIRED
_K = RecordState.ACKNOWLEDGED
_X = RecordState.ARCHIVED
_N = DeadLetterReason.NONE
_R = DeadLetterReason.REJECTED


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ((Run(0, 3, _A, 0, None, 0, _N, 1), Run(3, 4, _A, 0, None, 0, _N, 1)), "overlaps"),
        ((Run(5, 6, _A, 0, None, 0, _N, 1), Run(0, 1, _A, 0, None, 0, _N, 1)), "out of order"),
        ((Run(8, 12, _A, 0, None, 0, _N, 1),), "outside 0-9"),
        ((Run(0, 0, _Q, 1, None, 5, _N, 1),), "member 65535"),
        ((Run(0, 0, _A, 0, None, 5, _N, 1),), "deadline 5"),
        ((Run(0, 0, _K, 1, None, 0, _R, 1),), "dead-letter reason"),
        ((Run(0, 0, _X, 0, None, 0, _R, 1),), "never delivered"),
    ],
)
def test_inconsistent_runs_are_refused(runs: tuple[Run, ...], message: str) -> None:
    with pytest.raises(CorruptShareStateError, match=message):
        decode_snapshot(_snapshot(*runs))


def test_unknown_states_and_offsets_out_of_order_are_refused() -> None:
    good = _snapshot(Run(0, 0, _A, 0, None, 0, _N, 1))
    run_at = len(good) - 4 - 33
    bad_state = bytearray(good[:-4])
    bad_state[run_at + 12] = 3  # no RecordState 3
    with pytest.raises(CorruptShareStateError, match="state 3"):
        decode_snapshot(_resealed(bytes(bad_state)))
    with pytest.raises(CorruptShareStateError, match="offsets inconsistent"):
        decode_snapshot(_snapshot(start=5, scan=4))


def test_a_bad_member_table_is_refused() -> None:
    m = filled([0])
    m.acquire("é", 0, 1)
    body = bytearray(encode_snapshot(m.snapshot())[:-4])
    at = body.index("é".encode())
    body[at] = 0xFF  # not UTF-8
    with pytest.raises(CorruptShareStateError, match="malformed"):
        decode_snapshot(_resealed(bytes(body)))
    long = bytearray(encode_snapshot(m.snapshot())[:-4])
    long[at - 2 : at] = struct.pack(">H", 60_000)
    with pytest.raises(CorruptShareStateError, match="member table"):
        decode_snapshot(_resealed(bytes(long)))


def test_a_snapshot_with_too_many_members_cannot_be_encoded() -> None:
    runs = tuple(Run(o, o, _Q, 1, f"m{o}", 1, _N, 1) for o in range(0xFFFF))
    with pytest.raises(ValueError, match="members hold records"):
        encode_snapshot(ShareSnapshot(0, 0, 0, 0xFFFF, DelayWatermark(0), runs))
