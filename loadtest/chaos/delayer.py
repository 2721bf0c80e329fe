"""A user-space ``netem``: delay, jitter and loss for the packets of one namespace's link.

This machine's kernel has no ``sch_netem`` (``tc qdisc add ... netem`` answers "Specified
qdisc kind is unknown"; ``CONFIG_NET_SCH_NETEM`` is not set and there are no modules to
load), but it has ``nfnetlink_queue`` and iptables' ``NFQUEUE`` target. So the ``netem``
fault puts two rules into the degraded node's namespace (``NFQUEUE --queue-bypass`` on
``eth0``'s INPUT and OUTPUT: every packet of its link, both ways) and runs this program
inside that namespace: it takes each queued packet, draws its fate — dropped with
probability ``loss``, otherwise accepted after ``delay ± jitter`` milliseconds (uniform, so
packets may be reordered, as with netem's jitter) — and gives the kernel its verdict when
that time comes. ``--queue-bypass`` lets packets through untouched when no program listens,
so a delayer that dies degrades nothing.

It speaks nfnetlink's queue protocol over a raw netlink socket (no library to install):
bind the queue, ask for packet metadata only (``NFQNL_COPY_META``: ids, no payload), read
packet messages, send verdicts. It exits after ``--seconds`` (bounded) or on SIGTERM,
first accepting every packet it still holds. ``python -m loadtest.chaos.delayer --queue N
--delay-ms D --jitter-ms J --loss P --seconds S``.
"""

from __future__ import annotations

import argparse
import heapq
import random
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator

__all__ = [
    "config_message",
    "fate",
    "packet_ids",
    "verdict_message",
]

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NF_DROP = 0
NF_ACCEPT = 1
_NLMSG = struct.Struct("=IHHII")  # length, type, flags, sequence, port id (host order)
_NFGEN = struct.Struct("!BBH")  # family, version, resource id (the queue, network order)
_NLA = struct.Struct("=HH")  # attribute length, type


def _attribute(kind: int, payload: bytes) -> bytes:
    length = _NLA.size + len(payload)
    return _NLA.pack(length, kind) + payload + b"\0" * (-length % 4)


def _message(kind: int, flags: int, sequence: int, queue: int, attributes: bytes) -> bytes:
    body = _NFGEN.pack(socket.AF_UNSPEC, 0, queue) + attributes
    header = _NLMSG.pack(
        _NLMSG.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, sequence, 0
    )
    return header + body


def config_message(queue: int, sequence: int, *, bind: bool = False, max_len: int = 0) -> bytes:
    """A configuration request for ``queue``: bind it (``bind``) or set metadata-only copies
    and, with ``max_len``, the queue's length."""
    if bind:
        attributes = _attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0))
    else:
        attributes = _attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
        if max_len:
            attributes += _attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", max_len))
    return _message(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, sequence, queue, attributes)


def verdict_message(queue: int, packet_id: int, verdict: int) -> bytes:
    attributes = _attribute(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id))
    return _message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, 0, queue, attributes)


def _errors(data: bytes) -> Iterator[int]:
    """The error codes of the netlink acknowledgements in ``data`` (0: success)."""
    offset = 0
    while offset + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, offset)
        if length < _NLMSG.size:
            return
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", data, offset + _NLMSG.size)
            yield -code
        offset += (length + 3) & ~3


def packet_ids(data: bytes) -> list[int]:
    """The packet ids of the queue's packet messages in one netlink read."""
    ids = []
    offset = 0
    while offset + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, offset)
        if length < _NLMSG.size:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            at = offset + _NLMSG.size + _NFGEN.size
            while at + _NLA.size <= offset + length:
                size, attribute = _NLA.unpack_from(data, at)
                if size < _NLA.size:
                    break
                if attribute & 0x3FFF == NFQA_PACKET_HDR:
                    (packet_id,) = struct.unpack_from("!I", data, at + _NLA.size)
                    ids.append(packet_id)
                    break
                at += (size + 3) & ~3
        offset += (length + 3) & ~3
    return ids


def fate(rng: random.Random, delay_ms: float, jitter_ms: float, loss: float) -> float | None:
    """A packet's delay in seconds, or None: dropped."""
    if loss > 0 and rng.random() < loss:
        return None
    return max(0.0, delay_ms + rng.uniform(-jitter_ms, jitter_ms)) / 1000


class _StopRequestedError(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _StopRequestedError


def serve(queue: int, delay_ms: float, jitter_ms: float, loss: float, seconds: float) -> int:
    rng = random.Random()
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((0, 0))
    for sequence, request in enumerate(
        (config_message(queue, 1, bind=True), config_message(queue, 2, max_len=20_000)), 1
    ):
        sock.send(request)
        for code in _errors(sock.recv(65536)):
            if code:
                print(f"delayer: queue {queue} config {sequence} failed: errno {code}", flush=True)
                return 1
    held: list[tuple[float, int]] = []
    dropped = accepted = 0
    end = time.monotonic() + seconds
    signal.signal(signal.SIGTERM, _stop)
    print(f"delayer: queue {queue} {delay_ms}±{jitter_ms} ms loss {loss}", flush=True)
    try:
        while (now := time.monotonic()) < end:
            while held and held[0][0] <= now:
                sock.send(verdict_message(queue, heapq.heappop(held)[1], NF_ACCEPT))
                accepted += 1
            wait = min(end, held[0][0] if held else end) - now
            ready, _, _ = select.select([sock], [], [], max(0.0, wait))
            if not ready:
                continue
            try:
                data = sock.recv(1 << 16, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:  # ENOBUFS: the kernel dropped queue messages; go on
                continue
            now = time.monotonic()
            for packet_id in packet_ids(data):
                delay = fate(rng, delay_ms, jitter_ms, loss)
                if delay is None:
                    sock.send(verdict_message(queue, packet_id, NF_DROP))
                    dropped += 1
                else:
                    heapq.heappush(held, (now + delay, packet_id))
    except _StopRequestedError:
        pass
    finally:
        for _due, packet_id in held:  # let go of everything still held
            sock.send(verdict_message(queue, packet_id, NF_ACCEPT))
        sock.close()
    print(f"delayer: accepted {accepted + len(held)} dropped {dropped}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.chaos.delayer")
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    return serve(args.queue, args.delay_ms, args.jitter_ms, args.loss, min(args.seconds, 120.0))


if __name__ == "__main__":
    sys.exit(main())
